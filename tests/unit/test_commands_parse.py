"""Every command's ``parse`` reads its command line and nothing else: with every way to reach a
file system or an object store made to fail, a valid command line of each command still
parses. What touches storage happens in the command's ``main``, before the work
(``chunkmill.pipeline.preflight``), and still says what is wrong in one line. (A ``--config``
file is flags kept in a file: reading it is reading the command line.)"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import datetime as dt
import io
import os
from collections.abc import Iterator

import fsspec
import pytest
from apache_beam.io.filesystems import FileSystems

from chunkmill.pipeline import commands, options
from chunkmill.pipeline.cli import main

NOW = dt.datetime(2026, 11, 27, 7, 0, tzinfo=dt.timezone.utc)
PG = "postgresql://chunkmill@localhost/index"
# A valid command line of every command (without the command word).
VALID = {
    "run": ["--input", "docs/*.md", "--output", "out", "--run-id", "r1", "--max-tokens", "200"],
    "plan": ["--input", "docs/*.md", "--output", "gs://bucket/out", "--prior-manifest", "none"],
    "report": ["r1", "--output", "out"],
    "runs": ["gc", "--output", "out", "--keep", "2", "--dry-run"],
    "embed": ["--output", "out", "--run", "r1", "--batch-size", "8", "--dry-run"],
    "export": ["--output", "out", "--to", "exported"],
    "sync": ["--output", "out", "--to", PG, "--full"],
    "verify": ["--output", "out", "--to", PG, "--repair"],
    "query": ["how do I rotate keys?", "--to", PG, "--k", "3"],
    "eval": ["--questions", "q.csv", "--input", "docs/*.md", "--html", "page/eval.html"],
}


class StorageTouched(AssertionError):
    """Raised by every file-system and store entry point while ``no_storage`` holds."""


def _refuse(name: str):  # noqa: ANN202 - any signature
    def refused(*args: object, **kwargs: object) -> None:
        raise StorageTouched(f"parse called {name}{args!r}")

    return refused


@contextlib.contextmanager
def no_storage(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local files (``os`` calls, ``open``; ``pathlib`` and ``os.path`` go through them),
    fsspec and Beam's FileSystems all raise ``StorageTouched``. argparse's messages are
    left untranslated: gettext looks for the interpreter's catalogues on disk."""
    with monkeypatch.context() as m:
        m.setattr(argparse, "_", lambda text: text)
        m.setattr(argparse, "ngettext", lambda one, many, n: one if n == 1 else many)
        for name in ("stat", "lstat", "scandir", "listdir", "access", "open", "walk"):
            m.setattr(os, name, _refuse(f"os.{name}"))
        m.setattr(builtins, "open", _refuse("open"))
        m.setattr(io, "open", _refuse("io.open"))
        for name in ("open", "filesystem", "open_files", "url_to_fs"):
            m.setattr(fsspec, name, _refuse(f"fsspec.{name}"))
        for name in ("match", "exists", "open", "create", "delete", "rename"):
            m.setattr(FileSystems, name, _refuse(f"FileSystems.{name}"))
        yield


def test_every_command_is_covered():
    assert list(VALID) == list(commands.COMMANDS)


@pytest.mark.parametrize("name", list(VALID))
def test_a_valid_command_line_parses_without_touching_storage(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # nothing named above exists here
    monkeypatch.setattr(options, "launch_clock", lambda: NOW)  # one started_at for both
    module = commands.module(name)
    expected = module.parse(VALID[name])  # imports what parsing needs, first
    with no_storage(monkeypatch):
        assert module.parse(VALID[name]) == expected


def test_the_guard_catches_a_parse_that_reads(monkeypatch, tmp_path):
    from chunkmill.pipeline import preflight

    with no_storage(monkeypatch), pytest.raises(StorageTouched):
        preflight.check_writable(str(tmp_path / "out"))


def test_what_parse_leaves_to_storage_is_checked_before_the_work(tmp_path, capsys):
    # Each parses (above); main then says in one line what storage says.
    out = tmp_path / "out"
    assert main(["run", "--input", str(tmp_path / "none" / "*.md"), "--output", str(out)]) == 2
    assert main(["plan", "--input", str(tmp_path / "none" / "*.md"), "--output", str(out)]) == 2
    assert main(["report", "--output", str(out)]) == 2
    assert main(["eval", *VALID["eval"][:4], "--html", str(tmp_path / "no" / "e.html")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"chunkmill: error: argument --input: '{tmp_path}/none/*.md' matches no file",
        f"chunkmill: error: argument --input: '{tmp_path}/none/*.md' matches no file",
        f"chunkmill: error: no run in {out} yet; run `chunkmill run --output {out}` first",
        f"chunkmill: error: --html {tmp_path}/no/e.html: its folder does not exist",
    ]
    assert not out.exists()
