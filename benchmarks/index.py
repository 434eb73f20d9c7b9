"""The nightly loop on the CPU: run, embed, sync, verify, then a 1%-edited night.

Generates the synthetic Markdown corpus (``benchmarks.corpus``), chunks it for the default
embedding model (``--tokenizer all-minilm-l6-v2 --max-tokens 256``, its input window), embeds
every chunk, applies the state to PostgreSQL with pgvector (started here with ``pgserver``),
verifies it, then edits 1% of the documents and does the night again. Prints one table of
wall times and rates; each step is the CLI in a process of its own, as a schedule runs it.

    python -m benchmarks.index [--docs 500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import corpus as md


def chunkmill(*args: str) -> float:
    """Runs ``chunkmill ARGS`` in a process of its own; returns its wall time."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "chunkmill", *args], check=True, capture_output=True)
    return time.perf_counter() - started


def latest_counts(output: Path) -> dict:
    """The LATEST run's counts, with ``chunks_live``: the rows of its manifest."""
    import pyarrow.parquet as pq

    run = output / "runs" / (output / "LATEST").read_text().strip()
    counts: dict = json.loads((run / "_SUCCESS").read_text())["counts"]
    counts["chunks_live"] = pq.read_table(run / "manifest", columns=["chunk_hash"]).num_rows
    return counts


def edit_one_percent(folder: Path, n_docs: int) -> None:
    for path in sorted(folder.rglob("*.md"))[::100][: max(1, n_docs // 100)]:
        path.write_text(path.read_text() + "\n\nA paragraph added tonight.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=500)
    args = parser.parse_args()

    import pgserver

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs, output = root / "docs", root / "out"
        docs.mkdir()
        total = 0
        for name, text in md.iter_documents(args.docs):
            path = docs / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            total += len(text.encode())
        server = pgserver.get_server(root / "pg", cleanup_mode="stop")
        url = server.get_uri()
        run = ["run", "--input", str(docs / "**"), "--output", str(output)]
        run += ["--tokenizer", "all-minilm-l6-v2", "--max-tokens", "256"]
        rows = []
        for night in ("first", "1% edited"):
            if night != "first":
                edit_one_percent(docs, args.docs)
            t_run = chunkmill(*run)
            counts = latest_counts(output)
            t_embed = chunkmill("embed", "--output", str(output))
            t_sync = chunkmill("sync", "--output", str(output), "--to", url)
            t_verify = chunkmill("verify", "--output", str(output), "--to", url)
            rows.append((night, counts, t_run, t_embed, t_sync, t_verify))
        server.cleanup()

    print(f"{args.docs} documents, {total / 1e6:.1f} MB of Markdown; CPU only, 2 cores\n")
    print("| night | chunks live | to embed | tokens to embed | run | embed | sync | verify |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for night, c, t_run, t_embed, t_sync, t_verify in rows:
        print(
            f"| {night} | {c['chunks_live']:,} | {c['chunks_to_embed']:,} "
            f"| {c['tokens_to_embed']:,} | {t_run:.1f} s | {t_embed:.1f} s "
            f"| {t_sync:.1f} s | {t_verify:.1f} s |"
        )
    first = rows[0]
    c = first[1]
    print(
        f"\nembedding, first night: {c['chunks_to_embed'] / first[3]:.0f} chunks/s, "
        f"{c['tokens_to_embed'] / first[3]:.0f} tokens/s (start-up and model load included)"
    )
    print(f"sync, first night: {c['chunks_live'] / first[4]:.0f} rows/s (start-up included)")


if __name__ == "__main__":
    main()
