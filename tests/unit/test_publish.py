"""Publishing under races: LATEST always ends naming the newest finished run, whatever
order two publishers' steps interleave in; a stale run never moves it back."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
from pathlib import Path

import pytest
from apache_beam.io.filesystems import FileSystems

from chunkmill.transforms import lineage
from chunkmill.transforms import publish as publishing


def report(run_id: str, started_at: str) -> dict:
    return {"run_id": run_id, "started_at": started_at}


def publish(output: Path, run_id: str, started_at: str) -> str:
    return publishing.publish([], {}, str(output), run_id, report(run_id, started_at))


def latest(output: Path) -> str:
    return (output / "LATEST").read_text().strip()


def test_first_publish_names_itself(tmp_path):
    publish(tmp_path, "r1", "2026-11-20T01:00:00Z")
    assert latest(tmp_path) == "r1"
    assert publishing.finished_runs(str(tmp_path)) == [("2026-11-20T01:00:00Z", "r1")]


def test_a_run_that_finishes_after_a_newer_one_does_not_move_latest_back(tmp_path, caplog):
    publish(tmp_path, "night1", "2026-11-20T01:00:00Z")
    publish(tmp_path, "night3", "2026-11-22T01:00:00Z")
    # night2 started before night3 but was slow; it still publishes its run.
    publish(tmp_path, "night2", "2026-11-21T01:00:00Z")
    assert latest(tmp_path) == "night3"
    assert (tmp_path / "runs" / "night2" / "_SUCCESS").exists()
    assert "LATEST keeps naming night3" in caplog.text


def test_order_is_started_at_not_the_run_id(tmp_path):
    publish(tmp_path, "zzz-backfill", "2026-11-20T01:00:00Z")
    publish(tmp_path, "aaa", "2026-11-21T01:00:00Z")
    assert latest(tmp_path) == "aaa"


def test_runs_one_after_the_other_within_a_second_order_as_they_ran(tmp_path):
    """Two launches in one second, the second with an id that sorts first: started_at is to
    the microsecond, so the later run is the newest."""
    from chunkmill.pipeline.commands.run import run_settings

    second = dt.datetime(2026, 11, 24, 1, 0, 0, tzinfo=dt.timezone.utc)
    for run_id, micros in (("zzz", 1_000), ("aaa", 900_000)):
        now = second.replace(microsecond=micros)
        args = ["--output", str(tmp_path), "--run-id", run_id]
        publish(tmp_path, run_id, run_settings(args, now=now).started_at)
    assert latest(tmp_path) == "aaa"


def test_a_time_to_the_second_orders_as_its_first_microsecond(tmp_path):
    """Runs of an older release wrote started_at to the second: a run started later in that
    second, to the microsecond, is newer, though "...00Z" sorts after "...00.5Z" as text."""
    publish(tmp_path, "new", "2026-11-21T01:00:00.500000Z")
    publish(tmp_path, "old", "2026-11-21T01:00:00Z")
    assert latest(tmp_path) == "new"
    publish(tmp_path, "older", "2026-11-21T00:59:59.999999Z")
    assert [r for _, r in publishing.finished_runs(str(tmp_path))] == ["older", "old", "new"]


def test_stale_rename_landing_last_is_repaired(tmp_path, monkeypatch):
    """The worst interleaving: the older run lists the runs, then stalls just before its
    rename while the newer run publishes completely; the older run's rename lands last."""
    real_rename = FileSystems.rename
    stalled = []

    def rename(sources, destinations):
        if sources[0].endswith(".old.tmp") and not stalled:
            stalled.append(sources[0])
            publish(tmp_path, "new", "2026-11-22T01:00:00Z")  # runs to the end meanwhile
            assert latest(tmp_path) == "new"
        return real_rename(sources, destinations)

    monkeypatch.setattr(FileSystems, "rename", staticmethod(rename))
    publish(tmp_path, "old", "2026-11-21T01:00:00Z")
    assert stalled, "the interleaving under test did not happen"
    assert latest(tmp_path) == "new"


def test_concurrent_publishers_leave_the_newest(tmp_path, monkeypatch):
    real_rename = FileSystems.rename
    rng = random.Random(7)
    lock = threading.Lock()

    def jittery_rename(sources, destinations):
        with lock:
            delay = rng.random() / 50
        threading.Event().wait(delay)
        return real_rename(sources, destinations)

    monkeypatch.setattr(FileSystems, "rename", staticmethod(jittery_rename))
    runs = [(f"run{i:02d}", f"2026-11-{10 + i:02d}T01:00:00Z") for i in range(8)]
    rng.shuffle(runs)
    start = threading.Barrier(len(runs))

    def go(run_id: str, started_at: str) -> None:
        start.wait()
        publish(tmp_path, run_id, started_at)

    threads = [threading.Thread(target=go, args=run) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert latest(tmp_path) == "run07"
    assert not list(tmp_path.glob("LATEST.*.tmp"))


@pytest.mark.parametrize("missing", ["", "runs"])
def test_no_finished_runs(tmp_path, missing):
    if missing:
        (tmp_path / missing).mkdir()
        (tmp_path / "runs" / "dead").mkdir()  # a run that never finished
    assert publishing.finished_runs(str(tmp_path)) == []


# ---------------------------------------------------------------------------------------------
# Runs ordered by their chain: a clock that ran ahead does not pin LATEST


NIGHT = dt.datetime(2026, 11, 24, 1, 0, 0, tzinfo=dt.timezone.utc)
AHEAD = dt.timedelta(hours=2)


def settings_at(output: Path, run_id: str, now: dt.datetime, *extra: str):
    """A run launched at ``now`` by that machine's clock, through the real preflight."""
    from chunkmill.pipeline.commands.run import run_settings

    return run_settings(["--output", str(output), "--run-id", run_id, *extra], now=now)


def launch_and_publish(output: Path, run_id: str, now: dt.datetime, *extra: str) -> str:
    from chunkmill.pipeline import graph

    settings = settings_at(output, run_id, now, *extra)
    header = graph.report_header(settings)
    return publishing.publish([], {}, str(output), run_id, header)


def success(output: Path, run_id: str) -> dict:
    return json.loads((output / "runs" / run_id / "_SUCCESS").read_text())


def test_a_run_launched_with_its_clock_ahead_does_not_pin_latest(tmp_path, caplog):
    """night1's machine ran two hours ahead: its started_at is later than the next nights'.
    Each of them comes after it (LATEST named it at their launch), so each becomes LATEST,
    without a warning."""
    launch_and_publish(tmp_path, "night1", NIGHT + AHEAD)
    for minutes, run_id in ((30, "night2"), (60, "night3")):
        launch_and_publish(tmp_path, run_id, NIGHT + dt.timedelta(minutes=minutes))
        assert latest(tmp_path) == run_id
    assert success(tmp_path, "night3")["prior"]["after"] == "night2"
    assert "keeps naming" not in caplog.text
    assert [r for _, r in publishing.finished_runs(str(tmp_path))] == ["night1", "night2", "night3"]


def test_a_run_without_a_prior_records_the_run_it_comes_after(tmp_path):
    launch_and_publish(tmp_path, "night1", NIGHT + AHEAD)
    launch_and_publish(tmp_path, "fresh", NIGHT, "--prior-manifest", "none")
    report = success(tmp_path, "fresh")
    assert report["prior"]["run_id"] is None and report["prior"]["after"] == "night1"
    assert lineage.predecessor(report) == "night1"
    assert lineage.descends_from(str(tmp_path), "fresh", "night1")
    assert latest(tmp_path) == "fresh"


def test_an_ancestor_publishing_again_does_not_take_latest_back(tmp_path):
    """A retried publish of a run whose clock was ahead, after its successor published."""
    ahead = settings_at(tmp_path, "night1", NIGHT + AHEAD)
    from chunkmill.pipeline import graph

    publishing.publish([], {}, str(tmp_path), "night1", graph.report_header(ahead))
    launch_and_publish(tmp_path, "night2", NIGHT)
    publishing.publish([], {}, str(tmp_path), "night1", graph.report_header(ahead))
    assert latest(tmp_path) == "night2"


def test_siblings_order_by_their_clocks(tmp_path, caplog):
    """Two runs launched side by side after the same LATEST: neither comes after the other,
    so the one started later is the newest, whichever finishes first."""
    from chunkmill.pipeline import graph

    launch_and_publish(tmp_path, "night1", NIGHT + AHEAD)
    early = settings_at(tmp_path, "early", NIGHT)
    late = settings_at(tmp_path, "late", NIGHT + dt.timedelta(minutes=5))
    publishing.publish([], {}, str(tmp_path), "late", graph.report_header(late))
    publishing.publish([], {}, str(tmp_path), "early", graph.report_header(early))
    assert latest(tmp_path) == "late"
    assert "LATEST keeps naming late" in caplog.text


def test_the_order_survives_gc_deleting_the_runs_between(tmp_path):
    """Each report records its place in the chain: with the runs between deleted, the run
    whose clock ran ahead is still older than the runs after it."""
    import shutil

    launch_and_publish(tmp_path, "night1", NIGHT + AHEAD)
    launch_and_publish(tmp_path, "night2", NIGHT)
    launch_and_publish(tmp_path, "night3", NIGHT + dt.timedelta(minutes=30))
    shutil.rmtree(tmp_path / "runs" / "night2")
    assert publishing.point_latest_at_newest(str(tmp_path), "night3") == "night3"


def test_gc_follows_the_chain(tmp_path):
    """`runs gc` orders runs as LATEST does: the run whose clock ran ahead is the oldest, so
    it goes first, and LATEST with the newest besides it stays."""
    from chunkmill.pipeline import runs

    launch_and_publish(tmp_path, "night1", NIGHT + AHEAD)
    launch_and_publish(tmp_path, "night2", NIGHT)
    launch_and_publish(tmp_path, "night3", NIGHT + dt.timedelta(minutes=30))
    listed = runs.list_runs(str(tmp_path))
    assert [r.run_id for r in listed] == ["night1", "night2", "night3"]
    decisions = runs.plan_gc(listed, "night3", keep=1, grace_hours=None, now=0)
    assert {d.run.run_id: d.delete for d in decisions} == {
        "night1": True,
        "night2": False,
        "night3": False,
    }
