"""``chunkmill run`` at 100k and a million documents on one machine: wall time and peak RSS.

    python -m benchmarks.scale                          # 10k and 100k documents
    python -m benchmarks.scale --docs 1000000           # one scale
    python -m benchmarks.scale --docs 2000 --quick      # smoke test, seconds
    python -m benchmarks.scale --docs 1000000 --workdir DIR --keep   # first run kept in DIR

For each scale: a first run over generated Markdown, then a night after 1% of the documents
were edited (a paragraph appended), each ``python -m chunkmill run`` in a subprocess on the
local runner with one worker, measured from outside as :mod:`benchmarks.pipeline` does (wall
time, CPU time of the process tree, peak of the summed RSS of the tree, sampled every 50 ms).
A run whose tree grows past ``--rss-cap`` is stopped and reported as such, so a scale the
local engine cannot hold does not take the machine down with it.

With ``--keep``, the corpus and the first run's output are kept in ``--workdir`` as
hard-linked copies (``corpus-N.first``, ``out-N.first``; a run never rewrites a file in
place, and the edits replace their documents), and a later ``--keep`` run in the same folder
starts from them: it measures only the night, so a million-document night can be measured
for each of two trees against the same first run.

The documents are variations of a pool of :mod:`benchmarks.corpus` documents (the same
generator as every other benchmark): document ``i`` is pool document ``i % pool`` with its
number at the head of every paragraph, so every document, and nearly every chunk, is unique
while a million of them are written in minutes, not the half hour the generator alone takes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import corpus as md
from benchmarks.peers import edit_one_percent
from benchmarks.pipeline import Capped, Measurement, measure

ONE_WORKER = ("--direct_num_workers=1", "--direct_running_mode=in_memory")
DEFAULT_SCALES = (10_000, 100_000)
POOL = 2_000
_PARAGRAPH_HEAD = re.compile(r"(?m)^(?=[A-Z])")


def write_corpus(path: Path, n_docs: int, pool_size: int = POOL) -> int:
    """``n_docs`` Markdown documents under ``path``, 1,000 a folder; returns their bytes."""
    pool = md.generate(min(pool_size, n_docs))
    total = 0
    for i in range(n_docs):
        name, text = pool[i % len(pool)]
        # Numbered paragraphs: a unique document, and a unique text for every chunk.
        text = _PARAGRAPH_HEAD.sub(f"{i} ", text)
        doc = path / f"{i // 1000:04d}" / f"{Path(name).stem}-{i:07d}.md"
        if i % 1000 == 0:
            doc.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        doc.write_bytes(data)
        total += len(data)
    return total


def run_cmd(corpus: Path, output: Path, prior: str) -> list[str]:
    return [
        sys.executable, "-m", "chunkmill", "run", "--input", f"{corpus}/**",
        "--output", str(output), "--prior-manifest", prior, *ONE_WORKER,
    ]  # fmt: skip


def measure_capped(cmd: Sequence[str], rss_cap: int) -> Measurement | Capped:
    """:func:`benchmarks.pipeline.measure`, or how far the run got before the cap stopped it."""
    try:
        return measure(cmd, rss_cap=rss_cap)
    except Capped as stopped:
        return stopped


def _cells(m: Measurement | Capped) -> str:
    if isinstance(m, Capped):
        return f"stopped at {m.wall_s:.0f} s | — | over the cap ({m.peak_rss / 2**20:,.0f} MB) |"
    return f"{m.wall_s:,.1f} | {m.cpu_s:,.1f} | {m.peak_rss / 2**20:,.0f} |"


def _linked_copy(source: Path, target: Path) -> None:
    """``target`` as a copy of ``source`` whose files are hard links to its files."""
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["cp", "-al", str(source), str(target)], check=True)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--docs", type=int, action="append", help="documents at one scale; repeatable"
    )
    parser.add_argument("--rss-cap-gb", type=float, default=8.0, help="stop a run past this RSS")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp folder")
    parser.add_argument("--quick", action="store_true", help="a small pool: a smoke test")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep each scale's corpus and first run in --workdir, and start from them if kept",
    )
    args = parser.parse_args(argv)
    if args.keep and args.workdir is None:
        parser.error("--keep needs --workdir: the folder the first runs are kept in")
    scales = args.docs or list(DEFAULT_SCALES)
    cap = int(args.rss_cap_gb * 10**9)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="scale-"))
    rows = [
        "| documents | corpus MB | run | wall s | CPU s | peak RSS MB |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for n in scales:
        corpus, out = work / f"corpus-{n}", work / f"out-{n}"
        kept_corpus, kept_out = work / f"corpus-{n}.first", work / f"out-{n}.first"
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        if args.keep and kept_corpus.is_dir() and kept_out.is_dir():
            _linked_copy(kept_corpus, corpus)
            _linked_copy(kept_out, out)
            mb = sum(p.stat().st_size for p in corpus.rglob("*.md")) / 10**6
            _log(f"{n:,} documents, {mb:,.0f} MB: the first run kept in {kept_out}")
            rows.append(f"| {n:,} | {mb:,.0f} | first run | kept from an earlier run | | |")
        else:
            started = time.perf_counter()
            mb = write_corpus(corpus, n, pool_size=50 if args.quick else POOL) / 10**6
            _log(f"{n:,} documents, {mb:,.0f} MB, written in {time.perf_counter() - started:.0f} s")
            first = measure_capped(run_cmd(corpus, out, "none"), cap)
            _log(f"first run: {_cells(first)}")
            rows.append(f"| {n:,} | {mb:,.0f} | first run | {_cells(first)}")
            if isinstance(first, Capped):
                continue
            if args.keep:
                _linked_copy(corpus, kept_corpus)
                _linked_copy(out, kept_out)
        edited = edit_one_percent(corpus)
        night = measure_capped(run_cmd(corpus, out, "auto"), cap)
        _log(f"night after {edited:,} edits: {_cells(night)}")
        rows.append(f"| {n:,} | {mb:,.0f} | {edited:,} edited (1%) | {_cells(night)}")
        if not args.keep:
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
    print("\n".join(rows))
    print(f"(1-minute load average at the end: {os.getloadavg()[0]:.1f})")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
