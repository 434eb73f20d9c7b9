"""Logs a person can read, and the progress line, on real runs."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from chunkmill.pipeline.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("restore_log_levels")]

LIBRARIES = ("apache_beam", "pypdf", "google", "urllib3", "grpc")


def run(corpus, tmp_path, *args: str) -> None:
    out = str(tmp_path / "out")
    assert main(["run", "--input", str(corpus / "**"), "--output", out, *args]) == 0


def library(record: logging.LogRecord) -> bool:
    return record.name.split(".")[0] in LIBRARIES


def test_default_level_shows_chunkmill_info_and_library_warnings_only(corpus, tmp_path, caplog):
    run(corpus, tmp_path)
    ours = [r for r in caplog.records if r.name.startswith("chunkmill.")]
    assert any(r.levelno == logging.INFO for r in ours)
    assert not [r for r in caplog.records if library(r) and r.levelno < logging.WARNING]
    # The reporter read the real run's figures: 6 listed, all done, the corrupt PDF failed.
    lines = [r.getMessage() for r in ours if r.name == "chunkmill.pipeline.progress"]
    assert any(m.startswith("documents 6/6 (100%)") and "failed 1" in m for m in lines), lines


def test_debug_shows_library_lines(corpus, tmp_path, caplog):
    run(corpus, tmp_path, "--log-level", "debug")
    assert [r for r in caplog.records if library(r) and r.levelno < logging.WARNING]


def test_warning_level_silences_chunkmill_info(corpus, tmp_path, caplog):
    run(corpus, tmp_path, "--log-level", "warning")
    assert not [r for r in caplog.records if r.levelno < logging.WARNING]


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_a_real_process_stderr_holds_only_chunkmill_lines(mode, corpus, tmp_path):
    """Outside pytest's log capture: what a person running the command sees. The sample
    corpus gives no library a reason to warn, so every line is chunkmill's."""
    out = tmp_path / "out"
    argv = ["run", "--input", str(corpus / "**"), "--output", str(out)]
    argv.append(f"--direct_running_mode={mode}")
    done = subprocess.run(
        [sys.executable, "-m", "chunkmill", *argv], capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    assert lines, "chunkmill says what it does"
    for line in lines:
        assert line.split(" ")[2].startswith("chunkmill."), line
    if mode == "in_memory":
        assert any("documents 6/6 (100%)" in line for line in lines), lines
    assert done.stdout.startswith("run ")


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_real_process_answers_a_mistake_in_one_line(command, corpus, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    argv = [command, "--input", str(corpus / "**"), "--output", str(tmp_path / "a-file" / "out")]
    done = subprocess.run(
        [sys.executable, "-m", "chunkmill", *argv], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "chunkmill: error: argument --output"
    )
    assert done.stdout == ""


def test_debug_logs_of_a_multi_process_run_never_print_secret_options(tmp_path):
    """Beam's workers log their pipeline options at start-up, and the launcher relays those
    lines at --log-level debug: the S3 secret must not be in them, nor anywhere written."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nhello world\n")
    out = tmp_path / "out"
    argv = [
        "run",
        "--input",
        str(corpus / "*.md"),
        "--output",
        str(out),
        "--log-level",
        "debug",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=1",
        "--s3_access_key_id=SENTINEL-id",
        "--s3_secret_access_key=SENTINEL-secret",
        "--s3_session_token=SENTINEL-token",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "chunkmill", *argv], capture_output=True, text=True, check=True
    )
    assert "Pipeline_options" in done.stderr, "the line that used to carry them is still there"
    assert "SENTINEL" not in done.stderr + done.stdout
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "_SUCCESS" for p in written)
    for path in written:
        assert b"SENTINEL" not in path.read_bytes(), path
