"""Quiet by default: no command prints a warning its user cannot act on, on a plain install
(without the gcp extra, simulated by an import blocker for ``apitools``) as with every extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
# The CLI in a fresh interpreter; with "block", as if apitools (the gcp extra) were absent.
PROBE = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "apitools":
            raise ImportError(f"No module named {name!r}")
if sys.argv[1] == "block":
    sys.meta_path.insert(0, Block())
from chunkmill.pipeline.cli import main
sys.exit(main(sys.argv[2:]))
"""


def chunkmill(mode: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", PROBE, mode, *argv],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "WARNING" in line or "Warning" in line]


@pytest.mark.parametrize("mode", ["block", "extras"])
def test_no_command_warns_what_its_user_cannot_act_on(mode, tmp_path):
    out = str(tmp_path / "out")
    for argv in (
        ["--help"],
        ["run", "--output", out, "--run-id", "r1"],
        ["plan", "--output", out],
        ["runs", "list", "--output", out],
        ["report", "--output", out],
    ):
        done = chunkmill(mode, *argv)
        assert done.returncode == 0, (argv, done.stderr)
        assert warnings(done.stderr) == [], (argv, done.stderr)


def test_the_filter_drops_only_the_apitools_line(caplog):
    import logging

    from chunkmill import quiet

    quiet.install()
    logging.getLogger().warning(quiet.UNACTIONABLE[0] + " despite the import")
    logging.getLogger().warning("apitools is fine, another warning is not dropped")
    assert [r.getMessage() for r in caplog.records] == [
        "apitools is fine, another warning is not dropped"
    ]


def test_loading_the_model_draws_no_progress_bar(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("Paris is the capital of France.\n")
    reference = {"content": "Paris", "start_index": 0, "end_index": 5}
    question = {"question": "Capital of France?", "corpus_id": "a", "references": [reference]}
    (tmp_path / "q.jsonl").write_text(json.dumps(question) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    done = subprocess.run(
        [sys.executable, "-m", "chunkmill", "eval", "--input", str(tmp_path / "docs" / "*.md"),
         "--questions", str(tmp_path / "q.jsonl"), "--retriever", "model"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "it/s]" not in done.stderr, done.stderr
