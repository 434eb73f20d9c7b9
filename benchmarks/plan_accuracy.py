"""`chunkmill plan`'s estimate against what the run then embeds, night by night.

    python -m benchmarks.plan_accuracy [--dir DIR] [--sets 2]

On the corpus of benchmarks/plan_corpus.py, in a fresh folder: a first run, a night of edits,
a switch of PDF engine (``--pdf-engine pdfium``) and a night with nothing changed. Each night
is planned, then run; the table gives the tokens and chunks of the estimate, those in the
run's chunks/ (what is embedded), and their ratio. ``--sets N``: N copies of
the corpus, each in folders of its own (the default, 2: 28 PDFs in six folders, 16 HTML
pages, 16 guides, 10 notes; the plan samples 16 documents a format).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import re
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.plan_corpus import edit_night, write_corpus
from chunkmill.pipeline.cli import main as cli


def _plan(args: list[str]) -> tuple[int, int]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(["plan", *args]) == 0
    m = re.search(r"estimate   ~([\d,]+) tokens in ~([\d,]+) chunks", out.getvalue())
    return (0, 0) if m is None else (int(m[1].replace(",", "")), int(m[2].replace(",", "")))


def _run(args: list[str], output: Path, run_id: str) -> tuple[int, int]:
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli(["run", *args, "--run-id", run_id]) == 0
    files = glob.glob(str(output / "runs" / run_id / "chunks" / "*.parquet"))
    tokens = [t for f in files for t in pq.read_table(f, columns=["token_count"])[0].to_pylist()]
    return sum(tokens), len(tokens)


def _ratio(plan: int, run: int) -> str:
    return "-" if run == 0 else f"{plan / run:.2f}"


def table(root: Path, sets: int = 1) -> list[str]:
    docs, output = root / "docs", root / "out"
    write_corpus(docs, sets)
    base = ["--input", str(docs / "**"), "--output", str(output)]
    nights = [
        ("first run", [], None),
        ("edit night", [], edit_night),
        ("pdf engine switch", ["--pdf-engine", "pdfium"], None),
        ("nothing changed", ["--pdf-engine", "pdfium"], None),
    ]
    lines = [
        "| night | planned tokens | embedded tokens | ratio | planned chunks | embedded chunks "
        "| ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for i, (name, extra, change) in enumerate(nights):
        if change is not None:
            change(docs)
        (pt, pc), (rt, rc) = _plan(base + extra), _run(base + extra, output, f"night{i}")
        lines.append(
            f"| {name} | {pt:,} | {rt:,} | {_ratio(pt, rt)} | {pc:,} | {rc:,} | {_ratio(pc, rc)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="work folder (default: a temporary one)")
    parser.add_argument(
        "--sets", type=int, default=2, help="copies of the corpus (16 documents a format sampled)"
    )
    args = parser.parse_args(argv)
    if args.dir:
        print("\n".join(table(Path(args.dir), args.sets)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        print("\n".join(table(Path(tmp), args.sets)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
