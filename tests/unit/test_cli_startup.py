"""``--help``, ``--version`` and usage errors answer without importing Beam or pyarrow (a
second or more on a laptop): each runs in a fresh interpreter that then reports what it
imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
HEAVY = ("apache_beam", "pyarrow")
# Runs the CLI as the console script does, then prints which heavy modules it imported.
PROBE = f"""
import json, sys
from chunkmill.pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
imported = [m for m in {HEAVY!r} if m in sys.modules]
print(json.dumps({{"code": code, "imported": imported}}), file=sys.stderr)
"""


def probe(*argv: str) -> tuple[int, list[str], str, list[str]]:
    """(exit code, heavy modules imported, stdout, stderr lines before the probe's own)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    *err, last = done.stderr.splitlines()
    report = json.loads(last)
    return report["code"], report["imported"], done.stdout, err


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        [],
        ["run", "--help"],
        ["plan", "--help"],
        ["report", "--help"],
    ],
)
def test_help_imports_neither_beam_nor_pyarrow(argv):
    code, imported, out, _ = probe(*argv)
    assert code == 0 and "usage: chunkmill" in out
    assert imported == []


def test_version_prints_the_package_version_without_beam():
    code, imported, out, _ = probe("--version")
    assert (code, out) == (0, f"chunkmill {metadata.version('chunkmill')}\n")
    assert imported == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--max-tokens", "lots"], "argument --max-tokens: must be an integer"),
        (["plan", "--strategy", "paragraf"], "argument --strategy: invalid choice"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["rnu"], "unknown command 'rnu'; did you mean run?"),
        (["report", "--outptu", "x"], "unrecognized argument --outptu; did you mean --output?"),
    ],
)
def test_usage_errors_chunkmills_parser_finds_import_neither(argv, message):
    code, imported, out, err = probe(*argv)
    assert code == 2 and out == ""
    assert len(err) == 1 and err[0].startswith("chunkmill: error: ") and message in err[0], err
    assert imported == []


def test_every_command_is_listed_by_help():
    from chunkmill.pipeline.cli import COMMANDS

    _, _, out, _ = probe("--help")
    listed = out.split("{", 1)[1].split("}", 1)[0].split(",")
    assert listed == list(COMMANDS)
