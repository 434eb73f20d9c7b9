"""What ``ProcessDocuments`` costs around the per-document work, without Beam around it.

    python -m benchmarks.process_docs CORPUS_DIR [--rounds 5] [--baseline TREE]

Over every file under ``CORPUS_DIR`` (paragraph strategy), best of ``--rounds`` in one
process: the plain loop (open, read, ``process_document``), the step's DoFn driven by hand
(``_ProcessDocuments``: its reader, carry-over checks, counters, staging, one bundle), and
reading its staged files back as ``FinishStaged`` does. CPU is the process's (the staging
thread's included); wall is this process's. With ``--baseline`` (a source tree of chunkmill),
the same figures for both trees, each run whole from its ``source_view`` in a child process
per round (best of two there), the trees interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_FIGURES = ("loop_cpu", "dofn_cpu", "dofn_wall", "read_back_cpu")


def measure(corpus: str, rounds: int) -> dict[str, float]:
    """The best of ``rounds`` of each figure, in seconds, for the chunkmill imported here."""
    from chunkmill import ids
    from chunkmill.config import Chunking, ChunkingConfig
    from chunkmill.document import process_document
    from chunkmill.items import WorkItem, source_version
    from chunkmill.transforms import doc_plan, process_docs, staging

    items = []
    for folder, subfolders, names in os.walk(corpus):
        subfolders.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            st = os.stat(path)
            version = source_version(st.st_size, st.st_mtime)
            items.append(WorkItem(ids.doc_id(path), path, st.st_size, version=version))
    config = ChunkingConfig.create("paragraph")
    chunking = Chunking(config)
    work = [(doc, [w]) for doc, w in map(doc_plan.as_work, items)]
    staged = tempfile.mkdtemp(prefix="chunkmill-bench-staged-")
    step = process_docs._ProcessDocuments(config, process_docs.read_file, staged)
    step.setup()
    best = dict.fromkeys(_FIGURES, float("inf"))
    try:
        for _ in range(rounds):
            cpu = time.process_time()
            for item in items:
                with open(item.uri, "rb") as f:
                    process_document(item, f.read(), chunking)
            best["loop_cpu"] = min(best["loop_cpu"], time.process_time() - cpu)
            cpu, wall = time.process_time(), time.perf_counter()
            step.start_bundle()
            outputs = [o for element in work for o in step.process(element)]
            outputs += list(step.finish_bundle())
            best["dofn_cpu"] = min(best["dofn_cpu"], time.process_time() - cpu)
            best["dofn_wall"] = min(best["dofn_wall"], time.perf_counter() - wall)
            cpu = time.process_time()
            for name in os.listdir(staged):
                staging.read(os.path.join(staged, name))
            best["read_back_cpu"] = min(best["read_back_cpu"], time.process_time() - cpu)
            for name in os.listdir(staged):
                os.remove(os.path.join(staged, name))
    finally:
        step.teardown()
        os.rmdir(staged)
    return best


def _in_tree(tree: Path, corpus: str, rounds: int, work: Path) -> dict[str, float]:
    """``measure`` run by ``tree``'s code, whole, in a child process."""
    from benchmarks.peers import source_view

    view = source_view(tree, work / f"view-{tree.name}")
    code = (
        "import json; ns = {'__name__': 'bench'}; "
        f"exec(compile(open({str(Path(__file__).resolve())!r}).read(), 'bench', 'exec'), ns); "
        f"print(json.dumps(ns['measure']({corpus!r}, {rounds})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=view, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.process_docs", description=__doc__)
    parser.add_argument("corpus")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.corpus):
        parser.error(f"corpus: no folder at {args.corpus}")
    if args.baseline is not None and not (args.baseline / "chunkmill").is_dir():
        parser.error(f"--baseline: no chunkmill source tree at {args.baseline}")
    corpus = os.path.abspath(args.corpus)
    if args.baseline is None:
        figures = {"this tree": measure(corpus, args.rounds)}
    else:
        trees = {"this tree": Path(__file__).resolve().parents[1], "baseline": args.baseline}
        figures = {name: dict.fromkeys(_FIGURES, float("inf")) for name in trees}
        with tempfile.TemporaryDirectory() as work:
            for r in range(args.rounds):  # a child per round (best of its 2), interleaved
                for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                    got = _in_tree(trees[name].resolve(), corpus, 2, Path(work))
                    figures[name] = {k: min(figures[name][k], got[k]) for k in _FIGURES}
    names = list(figures)
    print(f"| figure (best of {args.rounds}), s | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for figure in _FIGURES:
        print(f"| {figure} | " + " | ".join(f"{figures[n][figure]:.3f}" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
