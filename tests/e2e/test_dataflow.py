"""The Dataflow job chunkmill would submit, built offline (``--dry_run=True``: no
credentials, no network), and the launcher's submit-and-return behaviour."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
from apache_beam.runners.dataflow.internal import apiclient
from apache_beam.runners.runner import PipelineResult, PipelineState
from google.protobuf.json_format import MessageToDict

from chunkmill.pipeline import graph, launch
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.run import run_settings

pytestmark = pytest.mark.slow

DEPLOY = Path(__file__).parents[2] / "deploy" / "dataflow"
IMAGE = "europe-docker.pkg.dev/acme/chunkmill/chunkmill:test"
# The top-level steps of pipeline/graph.py: their labels name the stages in Dataflow's UI
# and in its metrics, and an in-place update matches steps by them. A first run (this one)
# has no ReadPriorManifest.
STEPS = {"ListDocuments", "ChunkCorpus", "WriteTables", "Publish"}


def nightly_options() -> list[str]:
    lines = (DEPLOY / "nightly.options").read_text().splitlines()
    return [
        arg
        for line in lines
        if line.strip() and not line.startswith("#")
        for arg in shlex.split(line)
    ]


def dataflow_args(tmp_path: Path) -> list[str]:
    # Local input and output: a gs:// prefix would make chunkmill's flag checks reach GCS.
    # The job itself is the same; only paths differ.
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "a.md").write_text("# A\n\nhello\n")
    return [
        "--input", f"{docs}/**",
        "--output", str(tmp_path / "out"),
        "--run-id", "nightly",
        "--strategy", "paragraph",
        "--runner=DataflowRunner",
        "--dry_run=True",
        "--project=acme-chunks",
        "--region=europe-west1",
        "--temp_location=gs://acme-tmp/tmp",
        f"--sdk_container_image={IMAGE}",
        *nightly_options(),
    ]  # fmt: skip


def test_dataflow_job_carries_our_steps_and_the_nightly_options(tmp_path):
    settings = run_settings(dataflow_args(tmp_path))
    options = graph.pipeline_options(settings)
    assert not launch.waits_for_job(options)
    job = launch.start(settings, options).job  # dry run: built, not submitted

    transforms = job.proto_pipeline.components.transforms.values()
    top = {t.unique_name for t in transforms if "/" not in t.unique_name}
    assert top >= STEPS
    assert {"ChunkCorpus/ProcessDocuments", "Publish/WriteSuccessAndLatest"} <= {
        t.unique_name for t in transforms
    }
    images = {env.urn: env.payload for env in job.proto_pipeline.components.environments.values()}
    assert any(IMAGE.encode() in payload for payload in images.values())

    # The environment Dataflow would receive, as apiclient builds it at submission.
    env = apiclient.Environment(
        packages=[],
        options=job.options,
        environment_version="8",
        proto_pipeline_staged_url="gs://acme-tmp/staging/pipeline.pb",
        proto_pipeline=job.proto_pipeline,
    ).proto
    (pool,) = env.worker_pools
    assert pool.machine_type == "n2-standard-4"
    assert pool.autoscaling_settings.max_num_workers == 32
    assert pool.num_threads_per_worker == 4
    assert env.flex_resource_scheduling_goal.name == "FLEXRS_COST_OPTIMIZED"
    sent = MessageToDict(type(env).pb(env).sdk_pipeline_options)["options"]
    assert (sent["project"], sent["region"], sent["runner"]) == (
        "acme-chunks",
        "europe-west1",
        "DataflowRunner",
    )
    # chunkmill's own flags are not Beam options: they travel as the graph, not as options.
    assert not {"input", "output", "run_id", "strategy", "max_tokens"} & set(sent)


def test_the_job_carries_no_credentials(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-0042")
    args = dataflow_args(tmp_path)
    settings = run_settings(args)
    job = launch.start(settings, graph.pipeline_options(settings)).job
    blob = (
        job.proto_pipeline.SerializeToString()
        + json.dumps(job.options.get_all_options(retain_unknown_options=True), default=str).encode()
    )
    assert b"env-secret-0042" not in blob
    # The run report the Publish step carries is chunkmill's config, not the Beam options.
    assert b"acme-tmp" not in job.proto_pipeline.SerializeToString()

    # A credential given as a Beam flag would be copied into the job: refused, not echoed.
    code = main(["run", *args, "--s3_secret_access_key=flag-secret-0042"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--s3_secret_access_key" in err
    assert "flag-secret-0042" not in err


def test_cli_dry_run_builds_and_returns_writing_nothing(tmp_path, capsys):
    assert main(["run", *dataflow_args(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "dry run: the DataflowRunner job was built, not submitted" in out
    assert not (tmp_path / "out").exists()


class SubmitOnlyRunner(DataflowRunner):
    """A Dataflow stand-in (chunkmill runs only on the runners it supports): accepts the job
    and reports it running; waiting on it fails the test."""

    def run_pipeline(self, pipeline, options):
        return _Running()


class _Running(PipelineResult):
    def __init__(self) -> None:
        super().__init__(PipelineState.RUNNING)

    def job_id(self) -> str:
        return "job-42"

    def wait_until_finish(self, duration=None):
        raise AssertionError("chunkmill waited on a remote job")


def test_remote_run_submits_prints_the_job_and_returns(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("hello\n")
    out = tmp_path / "out"
    code = main(
        [
            "run", "--input", f"{docs}/*", "--output", str(out), "--run-id", "r1",
            f"--runner={__name__}.SubmitOnlyRunner",
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "run r1  submitted to SubmitOnlyRunner: job job-42 (RUNNING)" in captured.out
    assert str(out / "runs" / "r1" / "_SUCCESS") in captured.out
    assert not (out / "LATEST").exists()  # publishing is the job's own last step


def test_a_remote_run_s_claim_names_the_process_that_launched_it(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("hello\n")
    out = tmp_path / "out"
    argv = ["run", "--input", f"{docs}/*", "--output", str(out), "--run-id", "r1"]
    assert main([*argv, f"--runner={__name__}.SubmitOnlyRunner"]) == 0, capsys.readouterr().err
    claim = json.loads((out / "runs" / "r1" / "_CLAIM").read_text())
    assert (claim["host"], claim["pid"]) == (socket.gethostname(), os.getpid())


def test_template_entry_point_builds_the_job_from_template_parameters(tmp_path):
    # What the Flex Template launcher runs: main.py with --name=value parameters (argparse
    # dests, as metadata.json names them) and Dataflow's options, without --runner.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nhello\n")
    launched = subprocess.run(
        [
            sys.executable, str(DEPLOY / "main.py"),
            f"--input={docs}/**", f"--output={tmp_path / 'out'}", "--max_tokens=300",
            "--dry_run=True", "--project=acme-chunks", "--region=europe-west1",
            "--temp_location=gs://acme-tmp/tmp",
        ],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    assert "dry run: the DataflowRunner job was built, not submitted" in launched.stdout
