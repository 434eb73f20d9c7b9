"""SumCounts under TestPipeline, on its own: the ``(name, n)`` counts of every step become the
run report's one dict, every key present and failures, skips and listing errors broken down
by reason."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill.pipeline import progress
from chunkmill.pipeline.progress import Snapshot
from chunkmill.transforms import counts
from chunkmill.transforms.counts import (
    PROGRESS_DONE,
    PROGRESS_LISTED,
    SumCounts,
    finish_counts,
    update_each,
)


def test_counts_of_several_steps_add_up_in_one_dict():
    planned = [("docs_listed", 3), ("docs_carried_over", 1)]
    processed = [("docs_processed", 1), ("docs_failed", 1), ("failed:corrupt", 1)]
    processed += [("docs_listed", 0), ("skipped:not_text", 2), ("listing_error:list_failed", 1)]
    with TestPipeline(runner="FnApiRunner") as p:
        counts = (
            p | "Planned" >> beam.Create(planned),
            p | "Processed" >> beam.Create(processed),
        ) | SumCounts()
        expected = finish_counts({})
        expected |= {"docs_listed": 3, "docs_carried_over": 1, "docs_processed": 1}
        expected |= {
            "docs_failed": 1,
            "failed_by_reason": {"corrupt": 1},
            "skipped_by_reason": {"not_text": 2},
            "listing_errors_by_reason": {"list_failed": 1},
        }
        assert_that(counts, equal_to([expected]))


def test_no_counts_at_all_is_one_dict_of_zeros():
    with TestPipeline(runner="FnApiRunner") as p:
        counts = (p | beam.Create([]).with_output_types(tuple[str, int]),) | SumCounts()
        assert_that(counts, equal_to([finish_counts({})]))


def test_update_each_updates_the_cells_the_progress_line_reads():
    before = progress.process_snapshot()
    update_each(PROGRESS_LISTED, [300, 200])
    update_each(PROGRESS_DONE, [0, 0, 1])
    counts.LISTED_PROGRESS.update(100)  # the same cell as the distribution's
    assert progress.process_snapshot() - before == Snapshot(
        listed=3, listed_bytes=600, done=3, failed=1, read=0, read_bytes=0
    )
