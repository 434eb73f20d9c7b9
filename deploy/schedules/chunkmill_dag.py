"""Airflow / Cloud Composer: launch chunkmill's Flex Template every night.

Only stable arguments: chunkmill names the run (UTC timestamp) and diffs against the run in
OUTPUT/LATEST, so the DAG keeps no state and never passes a run id or a prior manifest.
A failed night needs no catch-up run: the next one diffs against the last good state.
Requires apache-airflow-providers-google. Set the Airflow Variables named below.
"""

from __future__ import annotations

import datetime as dt

from airflow import DAG
from airflow.models import Variable
from airflow.providers.google.cloud.operators.dataflow import (
    DataflowStartFlexTemplateOperator,
)

PROJECT = Variable.get("chunkmill_project")
REGION = Variable.get("chunkmill_region")
IMAGE = Variable.get("chunkmill_image")

with DAG(
    dag_id="chunkmill_nightly",
    schedule="30 1 * * *",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    # One state, not one state per day: a missed night is not replayed.
    catchup=False,
    max_active_runs=1,
    tags=["chunkmill"],
) as dag:
    DataflowStartFlexTemplateOperator(
        task_id="launch_chunkmill",
        project_id=PROJECT,
        location=REGION,
        body={
            "launchParameter": {
                # Dataflow refuses a second running job with this name: no overlap.
                "jobName": "chunkmill-nightly",
                "containerSpecGcsPath": Variable.get("chunkmill_template"),
                "parameters": {
                    "input": Variable.get("chunkmill_input"),
                    "output": Variable.get("chunkmill_output"),
                    "sdk_container_image": IMAGE,
                    "number_of_worker_harness_threads": "4",
                },
                # deploy/dataflow/nightly.options says why each value.
                "environment": {
                    "flexrsGoal": "FLEXRS_COST_OPTIMIZED",
                    "maxWorkers": 32,
                    "machineType": "n2-standard-4",
                    "tempLocation": Variable.get("chunkmill_temp"),
                },
            }
        },
        # The launcher submits and exits; waiting for the job here would hold a worker
        # slot for hours. Readers find the finished run through OUTPUT/LATEST.
        wait_until_finished=False,
    )
