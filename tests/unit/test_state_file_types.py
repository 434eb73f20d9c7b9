"""A FIFO, folder or device where a state file should be (``LATEST``, ``_SUCCESS``,
``_CLAIM``) is one line, never a hang nor a traceback, in ``run``, ``plan``, ``report`` and
``runs``: the file's type is examined before it is opened. Each command runs in its own
process with a deadline, so a command that would wait on a FIFO fails the test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main
from chunkmill.transforms import runstate
from tests.helpers import write_finished_run

ROOT = Path(__file__).parents[2]
# Far above a command's second or two; a FIFO opened for reading waits forever.
_DEADLINE_S = 120


def chunkmill(*argv: str) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "chunkmill", *argv],
        capture_output=True,
        text=True,
        timeout=_DEADLINE_S,
        env=env,
    )
    return done.returncode, [line for line in done.stderr.splitlines() if " INFO " not in line]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("make", [_fifo, _folder], ids=["fifo", "folder"])
@pytest.mark.parametrize("state_file", ["LATEST", "_SUCCESS"])
def test_a_state_file_that_is_not_a_file_is_one_line(state_file, make, tmp_path):
    out = tmp_path / "out"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\ntext\n")
    write_finished_run(out, "r1", [])
    target = out / "LATEST" if state_file == "LATEST" else out / "runs" / "r1" / "_SUCCESS"
    target.unlink()
    make(target)
    kind = "a FIFO" if make is _fifo else "a folder"
    for argv in (
        ["run", "--input", str(docs / "**"), "--output", str(out)],
        ["plan", "--input", str(docs / "**"), "--output", str(out)],
        ["report", "--output", str(out)],
        *([["runs", "gc", "--output", str(out), "--keep", "1"]] if state_file == "LATEST" else []),
    ):
        code, err = chunkmill(*argv)
        assert code == 2, (argv, err)
        assert len(err) == 1 and err[0].startswith("chunkmill: "), (argv, err)
        assert kind in err[0] and "Traceback" not in err[0], (argv, err)
    code, err = chunkmill("runs", "list", "--output", str(out))
    assert code == 0 and "Traceback" not in "\n".join(err)
    if state_file == "_SUCCESS":  # LATEST's run, unfinished as far as gc can tell: kept
        code, err = chunkmill("runs", "gc", "--output", str(out), "--keep", "0")
        assert code == 0 and err == [] and (out / "runs" / "r1").exists()


def test_a_fifo_claim_and_a_fifo_latest_are_read_without_waiting(tmp_path):
    out = tmp_path / "out"
    write_finished_run(out, "r1", [])
    (out / "runs" / "r2").mkdir()
    os.mkfifo(out / "runs" / "r2" / runstate.CLAIM)
    assert runstate.read_claim(str(out), "r2") is None
    os.mkfifo(out / "runs" / "r2" / runstate.SUCCESS)
    with pytest.raises(runstate.CorruptSuccess, match="a FIFO"):
        runstate.read_success(str(out / "runs" / "r2" / runstate.SUCCESS))
    code, err = chunkmill("runs", "list", "--output", str(out))
    assert code == 0 and err == []


def test_portable_runner_without_a_job_endpoint_names_the_flags(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main(["run", "--output", out, "--runner", "PortableRunner"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert "--runner" in err[0] and "--job_endpoint" in err[0] and "LOOPBACK" in err[0]
    assert not os.path.exists(out)
