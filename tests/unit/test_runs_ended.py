"""Runs say what they are: a refused or interrupted run is marked so in its folder, ``runs
list`` shows it, ``runs gc`` deletes it without a grace period, and never deletes a run whose
process is alive."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from chunkmill.pipeline.cli import main
from chunkmill.pipeline.runs import RunInfo, plan_gc
from chunkmill.transforms import runstate
from tests.helpers import write_finished_run

NOW = 2_000_000_000.0
HOUR = 3600.0


def unfinished(run_id: str, idle_hours: float, **kw) -> RunInfo:
    return RunInfo(run_id, False, None, None, NOW - idle_hours * HOUR, 3, **kw)


def deleted(decisions) -> set[str]:
    return {d.run.run_id for d in decisions if d.delete}


def test_refused_and_interrupted_runs_go_without_waiting_for_the_grace_period():
    runs = [
        unfinished("refused", 0.01, ended="refused"),
        unfinished("interrupted", 0.01, ended="interrupted"),
        unfinished("unfinished", 0.01),
        unfinished("ending", 0.01, ended="interrupted", running=True),
    ]
    assert deleted(plan_gc(runs, None, keep=0, grace_hours=None, now=NOW)) == {
        "refused",
        "interrupted",
    }
    # --grace-hours 0: every unfinished run, but never one whose process is alive.
    runs.append(unfinished("running", 0.0, running=True))
    assert deleted(plan_gc(runs, None, keep=0, grace_hours=0, now=NOW)) == {
        "refused",
        "interrupted",
        "unfinished",
    }


def _claim(out: Path, run_id: str, *, pid: int | None) -> None:
    claim = runstate.Claim(
        run_id, "2026-11-27T00:00:00.000000Z", None, None, None, socket.gethostname(), pid
    )
    assert runstate.claim_run(str(out), claim, exact=True).run_id == run_id


def test_runs_list_and_gc_on_marked_and_live_runs(tmp_path: Path, capsys):
    out = tmp_path / "out"
    write_finished_run(out, "r1", [])
    _claim(out, "refused", pid=None)
    runstate.mark_ended(str(out), "refused", runstate.REFUSED, "would remove 90% of documents")
    _claim(out, "interrupted", pid=None)
    runstate.mark_interrupted(str(out), "interrupted", "SIGINT")
    _claim(out, "dead", pid=None)
    # A run whose process (a chunkmill process on this host) is alive.
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "chunkmill"])
    try:
        _claim(out, "running", pid=live.pid)
        assert main(["runs", "list", "--output", str(out)]) == 0
        states = {
            line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]
        }
        assert states == {
            "r1": "published",
            "refused": "refused",
            "interrupted": "interrupted",
            "dead": "unfinished",
            "running": "unfinished",
        }
        assert main(["runs", "gc", "--output", str(out), "--keep", "0", "--grace-hours", "0"]) == 0
        printed = capsys.readouterr().out
        assert sorted(p.name for p in (out / "runs").iterdir()) == ["r1", "running"]
        assert "kept  running  (running: its process is alive on this host)" in printed
    finally:
        live.kill()
        live.wait()
    assert main(["runs", "gc", "--output", str(out), "--keep", "0", "--grace-hours", "0"]) == 0
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["r1"]


def test_a_marker_says_why_and_who(tmp_path: Path):
    out = tmp_path / "out"
    _claim(out, "r2", pid=None)
    note = runstate.mark_interrupted(str(out), "r2", "SIGTERM")
    assert note == "run r2 published nothing (marked interrupted); LATEST names no run"
    record = json.loads((out / "runs" / "r2" / runstate.INTERRUPTED).read_text())
    assert record["why"] == "interrupted by SIGTERM" and record["pid"] == os.getpid()
    assert runstate.ended_marker(str(out), "r2") == runstate.INTERRUPTED


def test_grace_hours_zero_is_accepted_and_negative_refused(tmp_path: Path, capsys):
    out = str(tmp_path / "out")
    assert main(["runs", "gc", "--output", out, "--keep", "1", "--grace-hours", "0"]) == 0
    assert main(["runs", "gc", "--output", out, "--keep", "1", "--grace-hours", "-1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--grace-hours" in err[0]


def test_process_alive_needs_this_host_and_a_chunkmill_process():
    assert not runstate.process_alive("another-host", os.getpid())
    assert not runstate.process_alive(socket.gethostname(), None)
    dead = subprocess.Popen([sys.executable, "-c", "pass", "chunkmill"])
    dead.wait()
    time.sleep(0.1)
    assert not runstate.process_alive(socket.gethostname(), dead.pid)


def test_a_refused_run_is_marked_listed_as_refused_and_collected(tmp_path: Path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"d{i}.md").write_text(f"# D{i}\n\nDocument {i}.\n")
    out = str(tmp_path / "out")
    assert main(["run", "--input", str(docs / "**"), "--output", out, "--run-id", "r1"]) == 0
    for i in range(1, 6):
        (docs / f"d{i}.md").unlink()
    # Would remove 5 of 6 documents: refused by --max-removed-ratio (0.5).
    assert main(["run", "--input", str(docs / "**"), "--output", out, "--run-id", "r2"]) == 2
    marker = json.loads((tmp_path / "out" / "runs" / "r2" / runstate.REFUSED).read_text())
    assert "--max-removed-ratio" in marker["why"]
    capsys.readouterr()
    assert main(["runs", "list", "--output", out]) == 0
    assert any(
        line.split()[:2] == ["r2", "refused"] for line in capsys.readouterr().out.splitlines()
    )
    assert main(["runs", "gc", "--output", out, "--keep", "0"]) == 0
    assert "deleted  r2  (refused: it will never publish)" in capsys.readouterr().out
    assert not (tmp_path / "out" / "runs" / "r2").exists()
