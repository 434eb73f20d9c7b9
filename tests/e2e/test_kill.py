"""A run killed (SIGKILL: no cleanup, no finally) at any stage publishes nothing, and the next
run diffs against the last good one exactly as if the killed run had never started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main
from tests.e2e.conftest import Run, prose

# Deadlock guard only: a stage is reached in seconds; never reached by a passing run.
_STAGE_TIMEOUT_S = 300


def _claimed(folder: Path) -> bool:
    return (folder / "_CLAIM").exists()


def _writing(folder: Path) -> bool:
    """Tables are being written: some file besides the claim exists under the run folder."""
    return any(p.is_file() and p.name != "_CLAIM" for p in folder.rglob("*"))


def _run(argv: list[str]) -> int:
    return main(["run", *argv])


def _tables(run: Run) -> dict[str, list]:
    return {
        name: sorted(
            tuple(sorted((k, str(v)) for k, v in row.items() if k != "attempted"))
            for row in run.table(name).to_pylist()
        )
        for name in ("chunks", "manifest", "removed", "errors")
    }


@pytest.mark.slow
@pytest.mark.parametrize("stage", [_claimed, _writing], ids=["after-claim", "while-writing-tables"])
def test_a_killed_run_publishes_nothing_and_the_next_run_is_exact(
    stage: Callable[[Path], bool], corpus: Path, tmp_path: Path, capsys
):
    out = tmp_path / "out"
    base = ["--input", str(corpus / "**"), "--output", str(out), "--runner=FnApiRunner"]
    assert _run([*base, "--run-id", "r1"]) == 0
    # The night's changes: an edit, a new document, a deletion.
    (corpus / "guides" / "faq.md").write_text("# FAQ\n\n" + prose("changed", 5))
    (corpus / "new.md").write_text("# New\n\n" + prose("fresh", 4))
    (corpus / "notes.txt").unlink()
    control = tmp_path / "control"
    shutil.copytree(out, control)  # the same state, never touched by the killed run

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.Popen(
        [sys.executable, "-m", "chunkmill", "run", *base, "--run-id", "r2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    folder = out / "runs" / "r2"
    deadline = time.monotonic() + _STAGE_TIMEOUT_S
    while not stage(folder):
        assert killed.poll() is None, "the run ended before the stage to kill it at"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(killed.pid, signal.SIGKILL)  # the run and its parser children
    killed.wait()

    assert (out / "LATEST").read_text().strip() == "r1"
    assert not (folder / "_SUCCESS").exists()
    capsys.readouterr()
    assert main(["runs", "list", "--output", str(out)]) == 0
    listed = capsys.readouterr().out
    assert "r2" in listed and "unfinished" in listed

    # The next run diffs against r1, exactly as it does where r2 never ran.
    assert _run([*base, "--run-id", "r3"]) == 0
    control_base = ["--input", str(corpus / "**"), "--output", str(control), "--runner=FnApiRunner"]
    assert _run([*control_base, "--run-id", "r3"]) == 0
    after, expected = Run(out, "r3"), Run(control, "r3")
    assert after.report["prior"]["run_id"] == "r1"
    assert after.counts == expected.counts
    assert after.counts["docs_removed"] == 1 and after.counts["chunks_to_embed"] > 0
    assert _tables(after) == _tables(expected)
    assert (out / "LATEST").read_text().strip() == "r3"
