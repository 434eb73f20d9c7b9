"""A misspelt flag or command is one line naming the nearest one that exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main

ROOT = Path(__file__).parents[2]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nhello\n")
    return tmp_path / "docs"


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-token", "5"], "unrecognized argument --max-token; did you mean --max-tokens?"),
        (["--stratgy=section"], "unrecognized argument --stratgy; did you mean --strategy?"),
        # Beam's flags too, whichever way they are spelt.
        (
            ["--direct-num-workers=2"],
            "unrecognized argument --direct-num-workers; did you mean --direct_num_workers?",
        ),
        (["--runnr=DirectRunner"], "unrecognized argument --runnr; did you mean --runner?"),
        (
            ["--max-token", "5", "--outptu", "o"],
            "unrecognized arguments: --max-token --outptu; did you mean --max-tokens for "
            "--max-token, --output for --outptu?",
        ),
        (["--no-such-flag", "1"], "unrecognized argument --no-such-flag"),
    ],
)
def test_unknown_flag_names_the_nearest(command, extra, message, docs, tmp_path, capsys):
    argv = [command, "--input", f"{docs}/*", "--output", str(tmp_path / "out"), *extra]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"chunkmill: error: {message}\n"


def test_runs_subcommand_flag_names_the_nearest(capsys):
    assert main(["runs", "gc", "--keep", "2", "--dryrun"]) == 2
    assert capsys.readouterr().err == (
        "chunkmill: error: unrecognized argument --dryrun; did you mean --dry-run?\n"
    )


def test_unknown_flag_is_one_line_on_a_terminal_too(docs, tmp_path):
    """Beam logs the flags it cannot parse as a WARNING; the CLI's stderr must still be the
    one line (pytest's own log capture would hide that line from capsys)."""
    done = subprocess.run(
        [sys.executable, "-m", "chunkmill", "run", "--input", f"{docs}/*", "--max-token", "5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "chunkmill: error: unrecognized argument --max-token; did you mean --max-tokens?"
    ]
