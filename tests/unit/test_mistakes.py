"""Mistakes get one-line answers: exit code 2, one line on stderr naming what is wrong, and
nothing read or written. The same for `run` and `plan`, which take the same flags."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chunkmill import schema
from chunkmill.pipeline.cli import main
from tests.helpers import write_finished_run


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        os.path.join(d, f): (
            os.stat(os.path.join(d, f)).st_size,
            os.stat(os.path.join(d, f)).st_mtime_ns,
        )
        for d, _, files in os.walk(root)
        for f in files
    }


def _old_prior(out: Path) -> None:
    """A prior run written by an older chunkmill (schema version 1)."""
    table = schema.MANIFEST.empty_table().replace_schema_metadata(
        {b"chunkmill.schema_version": b"1", b"chunkmill.version": b"0.0.9"}
    )
    write_finished_run(out, "r1", [table])


def _file_in_the_way(root: Path) -> Path:
    (root / "a-file").write_text("not a folder")
    return root / "a-file" / "out"


# (name, set-up returning extra arguments, words the message must contain)
CASES = {
    "unknown flag": (lambda root: ["--no-such-flag", "1"], ["--no-such-flag"]),
    "misspelt beam flag": (lambda root: ["--runnr=DirectRunner"], ["--runnr"]),
    "pattern matching nothing": (
        lambda root: ["--input", str(root / "nowhere" / "*.md")],
        [str(Path("nowhere") / "*.md"), "matches no file"],
    ),
    "output under a regular file": (
        lambda root: ["--output", str(_file_in_the_way(root))],
        ["--output", "a-file", "is a file"],
    ),
    "output is a regular file": (
        lambda root: ["--output", str(root / "docs" / "a.md")],
        ["--output", "a.md", "is a file"],
    ),
    "prior manifest of an older version": (
        lambda root: (_old_prior(root / "out"), [])[1],
        ["schema version 1", "chunkmill 0.0.9", "--prior-manifest none"],
    ),
    "bad log level": (lambda root: ["--log-level", "loud"], ["--log-level", "loud"]),
}


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize("case", list(CASES))
def test_mistake_is_one_line_and_exit_2(command, case, tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nhello\n")
    setup, words = CASES[case]
    extra = setup(tmp_path)
    argv = [command, "--input", str(tmp_path / "docs" / "*"), "--output", str(tmp_path / "out")]
    before = tree(tmp_path)
    code = main(argv + extra)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and captured.err.startswith("chunkmill: error: "), (
        captured.err
    )
    for word in words:
        assert word in captured.err, captured.err
    assert captured.out == ""
    assert tree(tmp_path) == before, "nothing is written on a usage error"


def test_report_bad_log_level_is_one_line(tmp_path, capsys):
    assert main(["report", "--output", str(tmp_path), "--log-level", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--log-level" in err


def test_a_writable_output_that_does_not_exist_yet_is_fine(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nhello\n")
    out = tmp_path / "new" / "deeper" / "out"
    assert main(["plan", "--input", str(tmp_path / "docs" / "*"), "--output", str(out)]) == 0
    assert "new 1" in capsys.readouterr().out and not (tmp_path / "new").exists()


def test_a_read_only_output_folder_is_one_line(tmp_path, capsys, monkeypatch):
    # Tests run as root, which chmod does not stop: the permission check is what is faked.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nhello\n")
    (tmp_path / "locked").mkdir()
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p).endswith("locked") else real(p, mode)
    )
    out = tmp_path / "locked" / "out"
    assert main(["run", "--input", str(tmp_path / "docs" / "*"), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "locked is read-only" in err, err
