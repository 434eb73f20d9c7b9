"""Run folders claimed atomically: launches racing for one run id on local disk (two whole
runs in two processes), on GCS (fake-gcs-server, which honours preconditions) and on S3
(moto's server). Two launches never share a folder."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chunkmill.transforms import runstate
from chunkmill.transforms.runstate import Claim, RunTaken
from tests.e2e.conftest import Run
from tests.e2e.stores import fake_gcs_server, gcs_env, s3_emulator, s3_env, store_env

NOW = dt.datetime(2026, 11, 22, 7, 30, 5, tzinfo=dt.timezone.utc)
BASE_ID = "20261122T073005Z"
# Deadlock guard only (a launch that fails before the barrier would hang the other): never
# reached by a passing run.
_BARRIER_TIMEOUT_S = 600


def _launch(argv: list[str], barrier: threading.Barrier) -> None:
    """One `chunkmill run` in a fresh process, started at NOW; waits for the other launch just
    before building its pipeline, so both runs execute at the same time."""
    import sys

    from chunkmill.pipeline import cli, graph, options

    options.launch_clock = lambda: NOW  # type: ignore[assignment]
    build = graph.build

    def build_together(p, settings):
        barrier.wait()
        return build(p, settings)

    graph.build = build_together  # type: ignore[assignment]
    sys.exit(cli.main(argv))


@pytest.mark.slow
def test_two_launches_in_one_second_each_publish_their_own_run(corpus, tmp_path):
    out = tmp_path / "out"
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2, timeout=_BARRIER_TIMEOUT_S)
    argv = ["run", "--input", str(corpus / "**"), "--output", str(out), "--runner=FnApiRunner"]
    # Different shard counts, as two differently configured launches would write.
    launches = [
        context.Process(target=_launch, args=([*argv, *extra], barrier))
        for extra in ([], ["--direct_runner_bundle_repeat=1"])
    ]
    for p in launches:
        p.start()
    for p in launches:
        p.join()
    assert [p.exitcode for p in launches] == [0, 0]

    assert sorted(d.name for d in (out / "runs").iterdir()) == [BASE_ID, f"{BASE_ID}-2"]
    first, second = Run(out, BASE_ID), Run(out, f"{BASE_ID}-2")
    for run in (first, second):
        assert run.report["run_id"] == run.dir.name
        manifest = run.rows("manifest")
        # Each run's rows once: no table of the other run mixed into its folder.
        assert len({r["chunk_id"] for r in manifest}) == len(manifest)
        assert len(manifest) == run.counts["chunks_total"]
        assert len(run.rows("errors")) == run.counts["docs_failed"] == 1
        claim = runstate.read_claim(str(out), run.dir.name)
        assert claim is not None and claim.run_id == run.dir.name
    assert first.rows("manifest") == second.rows("manifest")
    # Both started in the same second; the -2 run sorts after, so LATEST names it.
    assert (out / "LATEST").read_text().strip() == f"{BASE_ID}-2"


def race(output: str, claim: Claim, *, exact: bool, launches: int) -> list[str | None]:
    """``launches`` threads claiming at once; each one's claimed id, or None if refused."""
    barrier = threading.Barrier(launches)
    got: list[str | None] = []
    lock = threading.Lock()

    def launch() -> None:
        barrier.wait()
        try:
            made: str | None = runstate.claim_run(output, claim, exact=exact).run_id
        except RunTaken:
            made = None
        with lock:
            got.append(made)

    threads = [threading.Thread(target=launch) for _ in range(launches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def assert_claims_are_exclusive(output: str, read: Callable[[str], bytes]) -> None:
    got = race(output, Claim(BASE_ID, "2026-11-22T07:30:05Z", None, None), exact=False, launches=4)
    assert sorted(x for x in got if x) == [BASE_ID] + [f"{BASE_ID}-{n}" for n in (2, 3, 4)]
    for run_id in got:
        assert run_id and runstate.read_claim(output, run_id).run_id == run_id
    assert read(f"runs/{BASE_ID}-2/{runstate.CLAIM}")

    got = race(output, Claim("nightly", "2026-11-22T07:30:05Z", "r1", None), exact=True, launches=4)
    assert sorted(got, key=str) == [None, None, None, "nightly"]
    assert runstate.read_claim(output, "nightly").prior_run_id == "r1"


@pytest.fixture
def gcs_bucket() -> Iterator[str]:
    with fake_gcs_server() as url, store_env(gcs_env(url)):
        from google.cloud import storage as gcs_lib

        from chunkmill.transforms import storage

        # As `run` does before its first call: Beam's GcsIO reaches the emulator anonymously.
        storage.use_anonymous_gcs_for_emulator()
        gcs_lib.Client().create_bucket("chunks")
        yield "chunks"


def test_claims_on_gcs_are_exclusive(gcs_bucket):
    from google.cloud import storage as gcs_lib

    bucket = gcs_lib.Client().bucket(gcs_bucket)
    output = f"gs://{gcs_bucket}/out"
    assert_claims_are_exclusive(output, lambda key: bucket.blob(f"out/{key}").download_as_bytes())


@pytest.fixture
def s3_bucket() -> Iterator[object]:
    with s3_emulator() as url, store_env(s3_env(url)):
        import boto3
        from apache_beam.io.filesystems import FileSystems
        from apache_beam.options.pipeline_options import PipelineOptions

        # Beam's S3 filesystem (which reads claims back) needs options, as `run` gives it.
        FileSystems.set_options(PipelineOptions([]))
        client = boto3.client("s3")
        client.create_bucket(Bucket="chunks")
        yield client


def test_claims_on_s3_are_exclusive(s3_bucket):
    def read(key: str) -> bytes:
        return s3_bucket.get_object(Bucket="chunks", Key=f"out/{key}")["Body"].read()

    assert_claims_are_exclusive("s3://chunks/out", read)


def test_a_local_folder_is_claimed_with_o_excl(tmp_path: Path):
    assert_claims_are_exclusive(str(tmp_path), lambda key: (tmp_path / key).read_bytes())
