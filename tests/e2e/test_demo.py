"""What a newcomer runs: the CLI as a process, on the bundled sample corpus."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chunkmill.pipeline.options import SAMPLE_CORPUS

pytestmark = pytest.mark.slow


def chunkmill(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("chunkmill", path=str(Path(sys.executable).parent))
    assert exe, "the chunkmill console script is installed beside this Python"
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_demo_runs_twice_on_the_sample_corpus(tmp_path):
    first = chunkmill("run", "--run-id", "demo1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    listed = sum(1 for p in SAMPLE_CORPUS.rglob("*") if p.is_file())
    assert f"listed {listed}" in first.stdout
    assert "failed 1 (corrupt 1)" in first.stdout  # pdfs/broken.pdf, on purpose
    assert "WARNING" not in first.stderr, first.stderr
    report = json.loads((tmp_path / "out" / "runs" / "demo1" / "_SUCCESS").read_text())
    assert report["counts"]["docs_processed"] == listed - 1
    assert report["counts"]["chunks_to_embed"] > listed  # some documents make several chunks
    assert_ends_with_next_steps(first.stdout, tmp_path, report["counts"]["chunks_to_embed"])

    second = chunkmill("run", "--run-id", "demo2", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"carried over {listed - 1}" in second.stdout
    # The broken PDF failed last night and is unchanged: not read again, failed again.
    assert f"listed {listed}  read 0  processed 0" in second.stdout
    assert "failed 1 (corrupt 1; 1 known, not retried)" in second.stdout
    assert "new to embed 0" in second.stdout
    assert (tmp_path / "out" / "LATEST").read_text().strip() == "demo2"


def assert_ends_with_next_steps(stdout: str, cwd: Path, chunks: int) -> None:
    """A run on the sample corpus ends with where its tables are and commands that work."""
    out = cwd / "out"
    tail = stdout.splitlines()[-5:]
    assert tail[0].startswith(f"tables     {out}/runs/demo1/: chunks/")
    assert tail[3] == f"next       chunkmill report --output {out}   # this run as an HTML page"
    assert tail[4].startswith(f"           chunkmill run --output {out}   # again")
    # The read command, as printed, reads the chunks table.
    read = shlex.split(tail[1].removeprefix("read them  "))
    assert read[:2] == ["python", "-c"]
    shown = subprocess.run([sys.executable, *read[1:]], capture_output=True, text=True, cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    assert "source_uri: string" in shown.stdout and "token_count" in shown.stdout
    assert f"'{out}/runs/demo1/chunks/*.parquet'" in tail[2]  # the DuckDB query's table
    duck = shlex.split(tail[2].split("#")[0].strip())
    assert duck[:2] == ["python", "-c"]  # DuckDB's Python package has no duckdb command
    shown = subprocess.run([sys.executable, *duck[1:]], capture_output=True, text=True, cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    assert "source_uri" in shown.stdout and "token_count" in shown.stdout
    reported = chunkmill(
        *shlex.split(tail[3].split("#")[0].removeprefix("next       "))[1:], cwd=cwd
    )
    assert reported.returncode == 0 and f"new to embed {chunks}" in reported.stdout


def test_python_dash_m_pipeline_is_the_same_cli(tmp_path):
    bad = subprocess.run(
        [sys.executable, "-m", "chunkmill", "run", "--max-tokens", "lots"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "chunkmill: error: argument --max-tokens: must be an integer, got 'lots'"
    ]
