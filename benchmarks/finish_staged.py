"""What writing a first run's own rows costs: ``FinishStaged``'s work (read each staged file
back, split its rows by their decisions, write manifest/, added/, chunks/ and the text
store's file) on the rows of a real first run, in a process of its own, CPU time.

    python -m benchmarks.finish_staged [--docs 7000] [--rounds 5] [--baseline TREE]

Makes a corpus (``benchmarks.peers.write_corpus``) and runs chunkmill's first run on it once,
then stages that run's chunks/ rows as ``ProcessDocuments`` does (files of 4,096 rows; on a
first run every row is new, added and chosen) and times one bundle of ``_FinishStaged``
over them in a new process per round: the first bundle of a process, as in a run, fresh
memory included. With ``--baseline`` (a source tree of chunkmill), the same for that tree,
interleaved round by round (``benchmarks.peers.source_view``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

STAGE_ROWS = 4_096

# Run in the measuring process, whose ``chunkmill`` is the tree's under test.
_MEASURE = """
import json, sys, tempfile, time
import pyarrow.parquet as pq
from chunkmill import schema
from chunkmill.transforms import hash_join, prior, staging

chunks, work, stage_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = pq.read_table(chunks).cast(schema.CHUNKS)
staged = []
for start in range(0, rows.num_rows, stage_rows):
    table = rows.slice(start, stage_rows)
    _, runs = prior.bucket_runs(table["chunk_hash"])
    flags = hash_join.IS_NEW | hash_join.ADDED | hash_join.CHOSEN
    decided = [(bucket, bytes([flags]) * n) for bucket, _, n in runs]
    # A file's decisions as MarkNew sends them: grouped per staged file where the tree's
    # MarkNew groups them (it reads a batch's messages together), one per bucket before.
    grouped = hasattr(hash_join, "_read_staged_ids_together")
    staged.append((staging.write(work, table), [decided] if grouped else decided))
finish = hash_join._FinishStaged(tempfile.mkdtemp(dir=work), text=True)
cpu, wall = time.process_time(), time.perf_counter()
finish.start_bundle()
for element in staged:
    finish.process(element)
files = list(finish.finish_bundle())
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"cpu": cpu, "wall": wall, "rows": rows.num_rows, "files": len(files)}))
"""


def first_run_chunks(docs: int, work: Path) -> Path:
    """The chunks/ file of chunkmill's first run over a corpus of ``docs`` documents."""
    from benchmarks.peers import ONE_WORKER, write_corpus
    from chunkmill.pipeline.cli import main

    corpus, out = work / "corpus", work / "out"
    write_corpus(corpus, docs)
    argv = ["run", "--input", f"{corpus}/**", "--output", str(out), "--strategy", "paragraph"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main([*argv, "--prior-manifest", "none", "--run-id", "r1", *ONE_WORKER])
    if code != 0:
        raise SystemExit(f"the first run exited {code}")
    (chunks,) = (out / "runs" / "r1" / "chunks").glob("*.parquet")
    return chunks


def measure(cwd: str | None, chunks: Path, work: Path) -> dict[str, float]:
    """One bundle of ``_FinishStaged`` in a new process whose ``chunkmill`` is found from
    ``cwd`` (a ``source_view``; None: this interpreter's)."""
    folder = tempfile.mkdtemp(dir=work)
    argv = [sys.executable, "-c", _MEASURE, str(chunks), folder, str(STAGE_ROWS)]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.finish_staged")
    parser.add_argument("--docs", type=int, default=7000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a source tree of chunkmill to compare")
    args = parser.parse_args(argv)
    from benchmarks.peers import source_view

    with tempfile.TemporaryDirectory(prefix="finish-staged-") as tmp:
        work = Path(tmp)
        chunks = first_run_chunks(args.docs, work)
        trees: dict[str, str | None] = {"this tree": None}
        if args.baseline is not None:
            trees["baseline"] = str(source_view(args.baseline.resolve(), work / "view"))
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                runs[name].append(m := measure(trees[name], chunks, work))
                print(f"round {r + 1}: {name}: {m['cpu']:.3f} s CPU", file=sys.stderr)
        rows = runs["this tree"][0]["rows"]
        print(f"\n{args.docs} documents, {rows} chunks/ rows, {args.rounds} rounds\n")
        print("| tree | CPU, best | CPU, median | wall, best |")
        print("|---|---:|---:|---:|")
        for name, ms in runs.items():
            cpu, wall = [m["cpu"] for m in ms], min(m["wall"] for m in ms)
            print(f"| {name} | {min(cpu):.3f} s | {statistics.median(cpu):.3f} s | {wall:.3f} s |")
        if args.baseline is not None:
            ratio = min(m["cpu"] for m in runs["this tree"]) / min(
                m["cpu"] for m in runs["baseline"]
            )
            print(f"\nCPU, best: this tree / baseline = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
