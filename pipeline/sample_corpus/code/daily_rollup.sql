-- Daily rollup of click events per country and device class.
-- Rewrites one partition at a time so that reruns replace, never append.
-- Parameters: :run_date (DATE)

BEGIN;

DELETE FROM analytics.daily_clicks
WHERE event_date = :run_date;

INSERT INTO analytics.daily_clicks (
    event_date,
    country_code,
    device_class,
    sessions,
    clicks,
    unique_users,
    p95_latency_ms
)
WITH deduped AS (
    -- Producers may deliver an event more than once; keep the first arrival.
    SELECT *
    FROM (
        SELECT
            e.*,
            ROW_NUMBER() OVER (PARTITION BY e.event_id ORDER BY e.arrival_ts) AS rn
        FROM raw.click_events AS e
        WHERE e.event_date = :run_date
    ) AS numbered
    WHERE rn = 1
)
SELECT
    :run_date                                         AS event_date,
    COALESCE(d.country_code, 'ZZ')                    AS country_code,
    CASE
        WHEN d.user_agent ILIKE '%mobile%' THEN 'mobile'
        WHEN d.user_agent ILIKE '%tablet%' THEN 'tablet'
        ELSE 'desktop'
    END                                               AS device_class,
    COUNT(DISTINCT d.session_id)                      AS sessions,
    COUNT(*)                                          AS clicks,
    COUNT(DISTINCT d.user_id)                         AS unique_users,
    PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY d.latency_ms) AS p95_latency_ms
FROM deduped AS d
GROUP BY 1, 2, 3;

COMMIT;
