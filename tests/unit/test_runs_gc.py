"""``chunkmill runs list`` / ``runs gc``: the keep policy as a pure function, then the CLI
on run folders published by transforms.publish.publish (the same code a pipeline runs)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill.pipeline.cli import main
from chunkmill.pipeline.runs import RunInfo, list_runs, plan_gc
from chunkmill.transforms import publish as publishing
from chunkmill.transforms import runstate

NOW = 2_000_000_000.0
HOUR = 3600.0


def finished(run_id: str, day: int) -> RunInfo:
    return RunInfo(run_id, True, f"2026-11-{day:02d}T01:00:00Z", {}, NOW - 1000, 5)


def unfinished(run_id: str, idle_hours: float) -> RunInfo:
    return RunInfo(run_id, False, None, None, NOW - idle_hours * HOUR, 3)


def deleted(decisions) -> set[str]:
    return {d.run.run_id for d in decisions if d.delete}


def test_keeps_latest_and_the_n_newest_finished_besides_it():
    runs = [finished(f"d{d}", d) for d in range(1, 7)]
    assert deleted(plan_gc(runs, "d6", keep=2, grace_hours=None, now=NOW)) == {
        "d1",
        "d2",
        "d3",
    }
    # LATEST is kept even when it is not among the newest (a newer run is publishing).
    decisions = plan_gc(runs, "d3", keep=1, grace_hours=None, now=NOW)
    assert deleted(decisions) == {"d1", "d2"}
    assert {d.run.run_id: d.reason for d in decisions}["d5"] == "finished after LATEST (publishing)"
    assert deleted(plan_gc(runs, "d6", keep=0, grace_hours=None, now=NOW)) == {
        "d1", "d2", "d3", "d4", "d5"
    }  # fmt: skip


def test_unfinished_runs_are_kept_unless_idle_beyond_the_grace_period():
    runs = [finished("d1", 1), finished("d2", 2), unfinished("dead", 72), unfinished("live", 0.5)]
    assert deleted(plan_gc(runs, "d2", keep=0, grace_hours=None, now=NOW)) == {"d1"}
    assert deleted(plan_gc(runs, "d2", keep=0, grace_hours=48, now=NOW)) == {"d1", "dead"}
    assert deleted(plan_gc(runs, "d2", keep=0, grace_hours=100, now=NOW)) == {"d1"}


def test_the_prior_of_a_run_in_flight_is_kept_until_that_run_is_past_the_grace_period():
    runs = [finished(f"d{d}", d) for d in range(1, 5)]
    live = RunInfo("live", False, None, None, NOW - 2 * HOUR, 1, prior="d2")
    decisions = plan_gc([*runs, live], "d4", keep=0, grace_hours=None, now=NOW)
    assert deleted(decisions) == {"d1", "d3"}
    assert {d.run.run_id: d.reason for d in decisions}["d2"] == "prior of the unfinished run live"
    assert deleted(plan_gc([*runs, live], "d4", keep=0, grace_hours=3, now=NOW)) == {"d1", "d3"}
    # Past the grace period the claimant counts as dead: it and its prior may go.
    assert deleted(plan_gc([*runs, live], "d4", keep=0, grace_hours=1, now=NOW)) == {
        "d1", "d2", "d3", "live"
    }  # fmt: skip


def test_without_latest_nothing_finished_outside_keep_is_judged_older():
    runs = [finished("d1", 1), finished("d2", 2)]
    assert deleted(plan_gc(runs, None, keep=1, grace_hours=None, now=NOW)) == set()


def publish(output: Path, run_id: str, day: int, counts: dict | None = None) -> None:
    table = output / "runs" / run_id / "manifest"
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"PAR1")
    report = {"run_id": run_id, "started_at": f"2026-11-{day:02d}T01:00:00Z"}
    publishing.publish([], counts or {"docs_listed": day}, str(output), run_id, report)


def dead_run(output: Path, run_id: str, idle_hours: float) -> Path:
    path = output / "runs" / run_id / "chunks" / "beam-temp-part-x" / "f.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"partial")
    old = path.stat().st_mtime - idle_hours * HOUR
    os.utime(path, (old, old))
    return path


@pytest.fixture
def output(tmp_path) -> Path:
    out = tmp_path / "out"
    for day in (1, 2, 3, 4):
        publish(out, f"night{day}", day, {"docs_listed": 10 * day, "chunks_to_embed": day})
    dead_run(out, "crashed", idle_hours=50)
    dead_run(out, "running", idle_hours=0.1)
    return out


def test_list_reads_runs_and_latest(output):
    runs = list_runs(str(output))
    assert runstate.read_latest(str(output)) == "night4"
    assert [r.run_id for r in runs[:4]] == ["night1", "night2", "night3", "night4"]
    assert {r.run_id for r in runs[4:]} == {"crashed", "running"}
    assert runs[3].counts == {"docs_listed": 40, "chunks_to_embed": 4}
    assert not runs[4].finished and runs[4].started_at is None


def test_runs_list_cli(output, capsys):
    assert main(["runs", "list", "--output", str(output)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATE", "STARTED_AT"]
    (latest_line,) = [line for line in lines if line.endswith("<- LATEST")]
    assert latest_line.split()[:3] == ["night4", "published", "2026-11-04T01:00:00Z"]
    assert "40" in latest_line.split()
    assert any(line.startswith("crashed") and "unfinished" in line for line in lines)


def test_gc_dry_run_deletes_nothing_then_gc_deletes_the_plan(output, capsys):
    before = sorted(p.name for p in (output / "runs").iterdir())
    argv = ["runs", "gc", "--output", str(output), "--keep", "1", "--grace-hours", "48"]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete  night1" in out and "would delete  crashed" in out
    assert sorted(p.name for p in (output / "runs").iterdir()) == before

    assert main(argv) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (output / "runs").iterdir()) == ["night3", "night4", "running"]
    assert (output / "LATEST").read_text().strip() == "night4"


def test_gc_never_deletes_unfinished_runs_without_grace(output, capsys):
    assert main(["runs", "gc", "--output", str(output), "--keep", "0"]) == 0
    assert "kept  crashed" in capsys.readouterr().out
    assert sorted(p.name for p in (output / "runs").iterdir()) == ["crashed", "night4", "running"]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["gc"], "--keep"),
        (["gc", "--keep", "-1"], "--keep"),
        (["gc", "--keep", "1", "--grace-hours", "-1"], "--grace-hours"),
        (["gc", "--keep", "1", "--grace-hours", "soon"], "--grace-hours"),
        (["prune"], "prune"),
    ],
)
def test_bad_runs_flags_are_one_line(args, names, tmp_path, capsys):
    assert main(["runs", *args, "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and names in err


def test_list_on_an_empty_prefix(tmp_path, capsys):
    assert main(["runs", "list", "--output", str(tmp_path / "nothing")]) == 0
    assert "no runs in" in capsys.readouterr().out


def test_gc_keeps_the_prior_a_launched_run_claimed(output, capsys):
    """A run launched when night3 was LATEST is still running when night4 publishes: gc must
    not delete night3 under it."""
    claim = runstate.Claim("slow", "2026-11-04T00:30:00Z", "night3", None)
    assert runstate.claim_run(str(output), claim, exact=True).run_id == "slow"
    assert main(["runs", "gc", "--output", str(output), "--keep", "0"]) == 0
    assert "kept  night3  (prior of the unfinished run slow)" in capsys.readouterr().out
    assert sorted(p.name for p in (output / "runs").iterdir()) == [
        "crashed", "night3", "night4", "running", "slow"
    ]  # fmt: skip


def test_gc_keeps_the_run_a_launched_run_without_a_prior_compares_with(output, capsys):
    """A run launched with --prior-manifest none while night3 was LATEST compares its
    documents with night3's when it publishes: gc keeps night3 while it runs."""
    claim = runstate.Claim("fresh", "2026-11-04T00:30:00Z", None, None, after="night3")
    assert runstate.claim_run(str(output), claim, exact=True).run_id == "fresh"
    assert main(["runs", "gc", "--output", str(output), "--keep", "0"]) == 0
    out = capsys.readouterr().out
    assert "kept  night3  (LATEST at the launch of the unfinished run fresh)" in out


# -- the text of the current state -------------------------------------------------------------


def publish_hashes(output: Path, run_id: str, day: int, chunks: str, manifest: str) -> None:
    """A finished run whose chunks/ holds the hashes ``chunks`` (one letter each) and whose
    manifest lists ``manifest``: gc reads only their ``chunk_hash`` column."""
    written = []
    for table, hashes in (("chunks", chunks), ("manifest", manifest)):
        path = output / "runs" / run_id / table / "part-00000-of-00001.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.table({"chunk_hash": pa.array(list(hashes), pa.string())}), path)
        written.append(str(path))
    report = {"run_id": run_id, "started_at": f"2026-11-{day:02d}T01:00:00Z"}
    publishing.publish(written, {"docs_listed": day}, str(output), run_id, report)


def texts_left(output: Path) -> set[str]:
    return {
        h
        for path in (output / "runs").glob("*/chunks/*.parquet")
        for h in pq.read_table(path)["chunk_hash"].to_pylist()
    }


@pytest.mark.parametrize(
    ("latest_lists", "left"),
    [
        # b's text is in night1 and again in night3 (it came back); c's only in night2;
        # a's only in night1.
        ("abc", {"night1", "night2", "night3", "night4"}),
        ("c", {"night2", "night4"}),
        ("", {"night4"}),
    ],
)
def test_gc_never_deletes_the_only_text_of_a_chunk_latest_lists(
    tmp_path, capsys, latest_lists, left
):
    out = tmp_path / "out"
    publish_hashes(out, "night1", 1, chunks="ab", manifest="ab")
    publish_hashes(out, "night2", 2, chunks="c", manifest="ac")
    publish_hashes(out, "night3", 3, chunks="b", manifest="abc")
    publish_hashes(out, "night4", 4, chunks="", manifest=latest_lists)
    assert main(["runs", "gc", "--output", str(out), "--keep", "0"]) == 0
    printed = capsys.readouterr().out
    assert {p.name for p in (out / "runs").iterdir()} == left
    assert set(latest_lists) <= texts_left(out)
    for run in left - {"night4"}:
        assert f"kept  {run}  (holds the only text of 1 of LATEST's chunks)" in printed


def test_gc_keeps_a_run_whose_chunks_cannot_be_read_and_stops_when_latest_cannot(tmp_path, capsys):
    out = tmp_path / "out"
    publish_hashes(out, "night1", 1, chunks="a", manifest="a")
    publish_hashes(out, "night2", 2, chunks="", manifest="a")
    (part,) = (out / "runs" / "night1" / "chunks").iterdir()
    part.write_bytes(part.read_bytes()[:-12])  # cut short: its footer is gone
    assert main(["runs", "gc", "--output", str(out), "--keep", "0"]) == 0
    assert "kept  night1  (its chunks/ cannot be read" in capsys.readouterr().out

    (latest_part,) = (out / "runs" / "night2" / "manifest").iterdir()
    latest_part.write_bytes(b"not parquet")
    assert main(["runs", "gc", "--output", str(out), "--keep", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("chunkmill: runs gc deletes nothing: LATEST's manifest cannot be read")
    assert {p.name for p in (out / "runs").iterdir()} == {"night1", "night2"}
