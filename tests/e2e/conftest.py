from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill import schema
from chunkmill.pipeline.cli import main
from tests.helpers import make_pdf


def prose(topic: str, n: int = 6) -> str:
    return "\n\n".join(
        f"{topic} paragraph {i}: " + " ".join(f"{topic}{j}" for j in range(40)) for i in range(n)
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "start.md").write_text("# Start\n\n" + prose("start", 12))
    (root / "guides" / "faq.md").write_text("# FAQ\n\n" + prose("faq"))
    (root / "notes.txt").write_text(prose("notes", 3))
    (root / "tool.py").write_text("def main():\n    return 42\n\n\nprint(main())\n")
    good = make_pdf([prose("pageone", 2), prose("pagetwo", 2)])
    (root / "report.pdf").write_bytes(good)
    (root / "broken.pdf").write_bytes(good[: len(good) // 3])
    return root


class Run:
    """One finished chunkmill run, read back with plain pyarrow."""

    def __init__(self, output: Path, run_id: str) -> None:
        self.dir = output / "runs" / run_id
        self.report = json.loads((self.dir / "_SUCCESS").read_text())
        self.counts = self.report["counts"]

    def table(self, name: str) -> pa.Table:
        files = sorted(glob.glob(str(self.dir / name / "*.parquet")))
        assert files, f"no {name} files"
        return pa.concat_tables([pq.read_table(f) for f in files])

    def rows(self, name: str) -> list[dict]:
        key = {"errors": "doc_id", "retired": "chunk_hash"}.get(name, "chunk_id")
        return sorted(self.table(name).to_pylist(), key=lambda r: r[key])


@pytest.fixture
def chunkmill(tmp_path: Path, capsys):
    """Runs the CLI in-process; returns the run, asserting it exited 0."""

    def go(*args: str, output: Path | None = None, run_id: str) -> Run:
        output = output or tmp_path / "out"
        code = main(["run", "--output", str(output), "--run-id", run_id, *args])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return Run(output, run_id)

    return go


def assert_schemas(run: Run) -> None:
    for name, expected in schema.TABLES.items():
        table = run.table(name)
        assert table.schema.equals(expected, check_metadata=False), (name, table.schema)
        meta = table.schema.metadata or {}
        assert meta.get(b"chunkmill.schema_version") == schema.SCHEMA_VERSION.encode()


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield
    os.chdir(tmp_path)
