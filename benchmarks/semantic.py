"""What the semantic strategy costs against paragraph, at all-MiniLM-L6-v2's window.

    python -m benchmarks.semantic [--set DIR] [--repeat R]

Chunks the development set's documents (docs/evaluation.md; found as
:mod:`benchmarks.eval_dev` finds it) with each strategy as a run does (``Chunking`` with the
config of ``chunkmill eval --compare "STRATEGY tokenizer=all-minilm-l6-v2
max-embed-tokens=256"``), after one untimed pass that loads the model, and prints chunks/s and
KB/s of CPU time (best of ``--repeat``), and the ratio to paragraph. The machine is shared:
CPU time, as benchmarks/chunkers.py measures, not wall time. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.eval_dev import DEV_SET, MINILM_WINDOW

STRATEGIES = ("paragraph", "semantic")


def measure(texts: Sequence[str], strategy: str, repeat: int) -> tuple[int, float]:
    """Chunks made and the best CPU seconds over ``repeat`` passes over ``texts``."""
    from chunkmill.config import Chunking
    from chunkmill.pipeline.commands.eval import spec_config

    chunker = Chunking(spec_config(f"{strategy} {MINILM_WINDOW}")).chunker_for("text")
    for text in texts:  # loads the model, compiles regexes
        chunker.split(text)
    best, chunks = float("inf"), 0
    for _ in range(repeat):
        start = time.process_time()
        chunks = sum(len(chunker.split(text)) for text in texts)
        best = min(best, time.process_time() - start)
    return chunks, best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.semantic")
    parser.add_argument("--set", type=Path, default=DEV_SET, help="the development set")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    texts = [p.read_text(encoding="utf-8") for p in sorted((args.set / "corpora").glob("*.md"))]
    size_kb = sum(len(t.encode()) for t in texts) / 1000
    print(f"{len(texts)} documents, {size_kb:.0f} KB, {MINILM_WINDOW}, best of {args.repeat}")
    print("| strategy | chunks | CPU s | chunks/s | KB/s | vs paragraph |")
    print("|---|---:|---:|---:|---:|---:|")
    base = None
    for strategy in STRATEGIES:
        chunks, seconds = measure(texts, strategy, args.repeat)
        rate = chunks / seconds
        base = base or rate
        print(
            f"| {strategy} | {chunks} | {seconds:.2f} | {rate:,.0f} | {size_kb / seconds:,.1f} "
            f"| {rate / base:.4f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
