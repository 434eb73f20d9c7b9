"""`chunkmill plan` against what the run then embeds, on a mixed corpus of PDFs (text, papers,
drawings), HTML, Markdown and text in twelve folders (benchmarks/plan_corpus.py): a first run,
a night of edits and a switch of PDF engine each planned within 2x of the tokens and chunks
in the run's chunks/; a prior the run refuses, plan refuses with the same line."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmarks.plan_corpus import edit_night, write_corpus
from chunkmill.pipeline.cli import main

pytestmark = pytest.mark.slow


def planned(capsys, *args: str) -> tuple[int, int]:
    """The tokens and chunks `chunkmill plan` estimates."""
    assert main(["plan", *args]) == 0
    out = capsys.readouterr().out
    if "0 tokens to embed (nothing to read)" in out:
        return 0, 0
    m = re.search(r"estimate   ~([\d,]+) tokens in ~([\d,]+) chunks to embed", out)
    assert m, out
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def embedded(output: Path, run_id: str) -> tuple[int, int]:
    """The tokens and chunks in the run's chunks/ (what is embedded)."""
    files = glob.glob(str(output / "runs" / run_id / "chunks" / "*.parquet"))
    tokens = [t for f in files for t in pq.read_table(f, columns=["token_count"])[0].to_pylist()]
    return sum(tokens), len(tokens)


def within_2x(plan: tuple[int, int], run: tuple[int, int]) -> bool:
    return all(r > 0 and r / 2 <= p <= 2 * r for p, r in zip(plan, run, strict=True))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    write_corpus(root, sets=2)  # 28 PDFs, 16 HTML pages, 16 guides: a format's sample is part
    return root


def args(docs: Path, tmp_path: Path, *more: str) -> tuple[str, ...]:
    return ("--input", str(docs / "**"), "--output", str(tmp_path / "out"), *more)


def test_a_first_run_over_a_mixed_corpus_is_planned_within_2x(docs, tmp_path, chunkmill, capsys):
    plan = planned(capsys, *args(docs, tmp_path))
    chunkmill(*args(docs, tmp_path)[:2], run_id="first")
    run = embedded(tmp_path / "out", "first")
    assert within_2x(plan, run), (plan, run)


def test_a_night_of_edits_is_planned_within_2x(docs, tmp_path, chunkmill, capsys):
    chunkmill(*args(docs, tmp_path)[:2], run_id="first")
    edit_night(docs)
    plan = planned(capsys, *args(docs, tmp_path))
    chunkmill(*args(docs, tmp_path)[:2], run_id="edits")
    run = embedded(tmp_path / "out", "edits")
    assert within_2x(plan, run), (plan, run)


def test_a_switch_of_pdf_engine_is_planned_within_2x(docs, tmp_path, chunkmill, capsys):
    chunkmill(*args(docs, tmp_path)[:2], run_id="first")
    switch = ("--pdf-engine", "pdfium")
    plan = planned(capsys, *args(docs, tmp_path, *switch))
    chunkmill(*args(docs, tmp_path)[:2], *switch, run_id="pdfium")
    run = embedded(tmp_path / "out", "pdfium")
    assert within_2x(plan, run), (plan, run)


def test_a_prior_the_run_refuses_plan_refuses_with_the_same_line(docs, tmp_path, chunkmill, capsys):
    chunkmill(*args(docs, tmp_path)[:2], run_id="first")
    part = sorted(glob.glob(str(tmp_path / "out" / "runs" / "first" / "manifest" / "*.parquet")))[0]
    table = pq.read_table(part, columns=["chunk_hash"])[0].to_pylist()
    victim = sorted(table)[len(table) // 2]  # in the data pages, not the footer's statistics
    data = bytearray(Path(part).read_bytes())
    at = data.find(victim.encode())
    assert at >= 0
    data[at + 10] = ord("0") if data[at + 10] != ord("0") else ord("1")
    Path(part).write_bytes(bytes(data))

    assert main(["plan", *args(docs, tmp_path)]) == 2
    plan_err = capsys.readouterr().err.strip()
    assert main(["run", *args(docs, tmp_path), "--run-id", "second"]) == 2
    run_err = capsys.readouterr().err.strip()
    run_line = run_err.splitlines()[-1].split("failed: ", 1)[1]
    assert plan_err.splitlines() == [f"chunkmill: error: {run_line}"], (plan_err, run_err)
    assert part in run_line
