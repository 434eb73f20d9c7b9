"""Run state under an output prefix, damaged on purpose: claims raced by threads, LATEST
holding anything but a run id, truncated ``_SUCCESS`` files; each is one line saying what is
wrong and how to mend it, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
from apache_beam.runners.runner import PipelineResult, PipelineState

from chunkmill import schema
from chunkmill.pipeline import graph, launch
from chunkmill.pipeline.cli import main
from chunkmill.transforms import publish as publishing
from chunkmill.transforms import runstate
from chunkmill.transforms.runstate import BadLatest, Claim, RunTaken
from tests.helpers import AS_NOBODY

REPO = Path(__file__).parents[2]


def publish(output: Path, run_id: str, day: int) -> None:
    """A finished run, published by the pipeline's own publishing code."""
    table = output / "runs" / run_id / "manifest"
    table.mkdir(parents=True)
    pq.write_table(schema.MANIFEST.empty_table(), table / "part-0.parquet")
    report = {"run_id": run_id, "started_at": f"2026-11-{day:02d}T01:00:00Z"}
    publishing.publish([], {"docs_listed": day}, str(output), run_id, report)


# ---------------------------------------------------------------------------------------------
# Claims


def claim(run_id: str, prior: str | None = None) -> Claim:
    return Claim(run_id, "2026-11-22T07:30:05Z", prior, None)


def test_launches_racing_for_one_default_id_each_get_their_own_folder(tmp_path):
    launches = 8
    barrier = threading.Barrier(launches)
    got: list[str] = []
    lock = threading.Lock()

    def launch() -> None:
        barrier.wait()
        mine = runstate.claim_run(str(tmp_path), claim("20261122T073005Z"), exact=False)
        with lock:
            got.append(mine.run_id)

    threads = [threading.Thread(target=launch) for _ in range(launches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = ["20261122T073005Z"] + [f"20261122T073005Z-{n}" for n in range(2, launches + 1)]
    assert sorted(got) == sorted(expected)
    for run_id in got:
        recorded = json.loads((tmp_path / "runs" / run_id / runstate.CLAIM).read_text())
        assert recorded["run_id"] == run_id


def test_racing_for_one_explicit_id_exactly_one_wins(tmp_path):
    launches = 6
    barrier = threading.Barrier(launches)
    outcomes: list[str] = []

    def launch() -> None:
        barrier.wait()
        try:
            runstate.claim_run(str(tmp_path), claim("nightly"), exact=True)
            outcomes.append("won")
        except RunTaken:
            outcomes.append("taken")

    threads = [threading.Thread(target=launch) for _ in range(launches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["taken"] * (launches - 1) + ["won"]


def test_a_folder_of_an_older_run_without_a_claim_is_taken(tmp_path):
    (tmp_path / "runs" / "r1" / "manifest").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "manifest" / "part.parquet").write_bytes(b"x")
    with pytest.raises(RunTaken):
        runstate.claim_run(str(tmp_path), claim("r1"), exact=True)
    assert runstate.claim_run(str(tmp_path), claim("r1"), exact=False).run_id == "r1-2"
    assert not (tmp_path / "runs" / "r1" / runstate.CLAIM).exists()


def test_the_claim_records_the_run_and_its_prior_and_nothing_else(tmp_path):
    made = runstate.claim_run(
        str(tmp_path),
        Claim("r2", "2026-11-22T07:30:05Z", "r1", "/o/r1/*.parquet", after="r1"),
        exact=True,
    )
    recorded = json.loads((tmp_path / "runs" / "r2" / runstate.CLAIM).read_text())
    assert recorded == {
        "run_id": "r2",
        "started_at": "2026-11-22T07:30:05Z",
        "prior_run_id": "r1",
        "prior_manifest": "/o/r1/*.parquet",
        "after": "r1",
    }
    assert runstate.read_claim(str(tmp_path), "r2") == made


def test_a_prior_manifest_path_under_the_output_names_its_run():
    by_path = Claim("r3", "t", None, "/out/runs/r1/manifest/*.parquet")
    assert by_path.prior_run_under("/out") == "r1"
    assert (
        Claim("r3", "t", None, "/elsewhere/r1/manifest/*.parquet").prior_run_under("/out") is None
    )


# ---------------------------------------------------------------------------------------------
# The CLI: claiming before the pipeline is built, and what a failure names


def run_args(docs: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--input", str(docs / "*"), "--output", str(out), *extra]


def test_run_claims_before_building_and_a_taken_explicit_id_is_one_line(
    docs, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    seen = {}

    def build(p, settings):
        # The folder is claimed before any step exists; then the run breaks, on purpose.
        seen["claim"] = runstate.read_claim(str(out), settings.run_id)
        raise RuntimeError("stop here")

    monkeypatch.setattr(graph, "build", build)
    assert main(run_args(docs, out, "--run-id", "r1", "--prior-manifest", "none")) == 1
    assert seen["claim"].run_id == "r1"
    capsys.readouterr()

    # A second launch with the same explicit id, which preflight passed because the folder
    # looked empty when it was checked (the claim arrives between the check and the claim).
    monkeypatch.setattr(runstate, "_has_files", lambda folder: False)
    assert main(run_args(docs, out, "--run-id", "r1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--run-id" in err and "'r1' already exists" in err


def test_two_default_ids_in_one_second_get_distinct_folders(docs, tmp_path, monkeypatch, capsys):
    import datetime as dt

    from chunkmill.pipeline import options

    now = dt.datetime(2026, 11, 22, 7, 30, 5, tzinfo=dt.timezone.utc)
    monkeypatch.setattr(options, "launch_clock", lambda: now)
    built = []
    monkeypatch.setattr(graph, "build", lambda p, s: built.append(s.run_id) or 1 / 0)
    out = tmp_path / "out"
    for _ in range(3):
        assert main(run_args(docs, out)) == 1
    assert built == ["20261122T073005Z", "20261122T073005Z-2", "20261122T073005Z-3"]
    assert "run 20261122T073005Z-3 failed before publishing" in capsys.readouterr().err


def test_plan_claims_nothing(docs, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["plan", "--input", str(docs / "*"), "--output", str(out)]) == 0
    assert not (out / "runs").exists()


def test_a_failed_run_names_what_latest_names_when_it_fails(docs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    publish(out, "r1", 1)

    def build(p, settings):
        assert settings.prior_run_id == "r1"
        # Meanwhile another run finishes and gc deletes r1, the prior this one started with.
        publish(out, "r2", 2)
        shutil.rmtree(out / "runs" / "r1")
        raise RuntimeError("cannot read the prior manifest")

    monkeypatch.setattr(graph, "build", build)
    assert main(run_args(docs, out, "--run-id", "r3")) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == "chunkmill: run r3 failed before publishing; LATEST names r2"


SUBMITTED: list[str] = []


class SubmitOnlyRunner(DataflowRunner):
    """A remote runner stand-in (chunkmill runs only on runners it supports): records
    whether the run folder was claimed at submission."""

    def run_pipeline(self, pipeline, options):
        SUBMITTED.append(options.view_as(StandardOptions).runner)
        return _Running()


class _Running(PipelineResult):
    def __init__(self) -> None:
        super().__init__(PipelineState.RUNNING)


def test_a_remote_run_is_claimed_before_it_is_submitted(docs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    claims_seen = []
    real_start = launch.start

    def start(settings, options):
        claims_seen.append(runstate.read_claim(str(out), settings.run_id))
        return real_start(settings, options)

    monkeypatch.setattr(launch, "start", start)
    SUBMITTED.clear()
    argv = run_args(docs, out, "--run-id", "r1", f"--runner={__name__}.SubmitOnlyRunner")
    assert main(argv) == 0
    assert [c.run_id for c in claims_seen] == ["r1"] and len(SUBMITTED) == 1
    capsys.readouterr()

    monkeypatch.setattr(runstate, "_has_files", lambda folder: False)  # the race, as above
    assert main(argv) == 2
    assert "'r1' already exists" in capsys.readouterr().err
    assert len(SUBMITTED) == 1  # nothing submitted the second time


# ---------------------------------------------------------------------------------------------
# LATEST


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\x8f\x00\xffrandom", "binary content"),
        (b"r1\x00\n", "binary content"),
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"r1\nr2\n", "2 lines"),
        (b"../etc\n", "'../etc' is not a run id"),
        (b"x" * 2000, "over 1024 bytes"),
    ],
)
def test_latest_that_is_not_a_run_id_says_what_and_how_to_mend(tmp_path, content, problem):
    publish(tmp_path, "r1", 1)
    (tmp_path / "LATEST").write_bytes(content)
    with pytest.raises(BadLatest) as e:
        runstate.read_latest(str(tmp_path), alternative="pass --prior-manifest none")
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'LATEST'} is not a run id ({problem}"), message
    assert message.endswith(
        "; write the id of the last good run into it, e.g. r1, or pass --prior-manifest none"
    )
    assert "\n" not in message


@pytest.mark.parametrize("content", [b"r1", b"r1\n", b" r1 \r\n"])
def test_latest_with_one_run_id_reads(tmp_path, content):
    (tmp_path / "LATEST").write_bytes(content)
    assert runstate.read_latest(str(tmp_path)) == "r1"


def test_no_latest_is_no_run(tmp_path):
    assert runstate.read_latest(str(tmp_path)) is None


# Each command that reads LATEST, given a LATEST that names no run: one line, exit 2.
COMMANDS = {
    "run": lambda docs, out: run_args(docs, out),
    "report": lambda docs, out: ["report", "--output", str(out)],
    "runs gc": lambda docs, out: ["runs", "gc", "--keep", "1", "--output", str(out)],
}
DAMAGE = {
    "binary": (lambda latest: latest.write_bytes(os.urandom(64) + b"\x00"), "binary content"),
    "folder": (lambda latest: latest.mkdir(), "a folder"),
    "empty": (lambda latest: latest.write_bytes(b""), "empty"),
    "garbage": (lambda latest: latest.write_text("r1\n\nr2\n"), "2 lines"),
    "newline id": (lambda latest: latest.write_text("r 1\n"), "is not a run id"),
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_damaged_latest_is_one_line_in_every_command(command, damage, docs, tmp_path, capsys):
    out = tmp_path / "out"
    publish(out, "r1", 1)
    latest = out / "LATEST"
    latest.unlink()
    make, problem = DAMAGE[damage]
    make(latest)
    assert main(COMMANDS[command](docs, out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("chunkmill: error: "), err
    assert f"{latest} is not a run id (" in err and problem in err
    assert "write the id of the last good run into it, e.g. r1" in err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["r1"]  # gc deleted nothing


@pytest.mark.parametrize("damage", DAMAGE)
def test_runs_list_lists_the_runs_and_says_latest_is_damaged(damage, tmp_path, capsys):
    out = tmp_path / "out"
    publish(out, "r1", 1)
    (out / "LATEST").unlink()
    DAMAGE[damage][0](out / "LATEST")
    assert main(["runs", "list", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["r1", "published"] and "<- LATEST" not in lines[1]
    assert lines[-1].startswith(f"{out / 'LATEST'} is not a run id (")


def test_an_unreadable_latest_is_one_line(tmp_path):
    """LATEST that the user running chunkmill may not read (tests run as root: the command
    runs as nobody)."""
    out = Path(tempfile.mkdtemp(prefix="chunkmill-latest-"))
    try:
        publish(out, "r1", 1)
        for path in [out, *out.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (out / "LATEST").chmod(0o000)
        argv = ["runs", "gc", "--keep", "0", "--output", str(out)]
        done = subprocess.run(
            [*AS_NOBODY, sys.executable, "-m", "chunkmill", *argv],
            capture_output=True,
            text=True,
            cwd=out,
            env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(out)},
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert f"{out / 'LATEST'} cannot be read (PermissionError" in done.stderr
        assert "write the id of the last good run into it, e.g. r1" in done.stderr
    finally:
        shutil.rmtree(out)


# ---------------------------------------------------------------------------------------------
# _SUCCESS


def truncate_success(out: Path, run_id: str) -> None:
    success = out / "runs" / run_id / "_SUCCESS"
    data = success.read_bytes()
    success.write_bytes(data[: len(data) // 2])


def test_a_truncated_success_is_not_a_finished_run(tmp_path, capsys):
    out = tmp_path / "out"
    publish(out, "r1", 1)
    publish(out, "r2", 2)
    truncate_success(out, "r2")
    assert publishing.finished_runs(str(out)) == [("2026-11-01T01:00:00Z", "r1")]
    # The next publisher points LATEST at the newest valid run, not at the damaged one.
    assert publishing.point_latest_at_newest(str(out), "r1") == "r1"

    assert main(["runs", "list", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (r2,) = [line for line in lines if line.startswith("r2")]
    assert r2.split()[1:3] == ["corrupt", "_SUCCESS"]

    assert main(["report", "r2", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "r2" in err and "_SUCCESS is damaged" in err


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"run_id": "r1", "started_at"', "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"run_id": "r1", "started_at": "t", "counts": {}}', "no tables"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_success_validity(data, problem):
    with pytest.raises(runstate.CorruptSuccess, match=problem):
        runstate.parse_success(data)


def test_success_with_its_keys_is_valid():
    tables = {
        name: [{"path": f"{name}/part-0.parquet", "rows": 1, "bytes": 9}] for name in schema.TABLES
    }
    report = {"run_id": "r", "started_at": "t", "counts": {}, "tables": tables, "more": 1}
    assert runstate.parse_success(json.dumps(report)) == report


def test_a_success_of_schema_3_lists_no_added_nor_retired_and_is_read_with_none():
    old = {name: [] for name in ("chunks", "manifest", "removed", "errors")}
    report = {"run_id": "r", "started_at": "t", "counts": {}, "tables": old}
    parsed = runstate.parse_success(json.dumps(report))
    assert parsed["tables"]["added"] == [] and parsed["tables"]["retired"] == []
    del old["errors"]  # a table every version writes is still required
    with pytest.raises(runstate.CorruptSuccess, match="errors"):
        runstate.parse_success(json.dumps(report))
