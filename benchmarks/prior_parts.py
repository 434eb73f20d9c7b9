"""What a night spends on each part of the prior manifest, in this process: ``SummariseParts``
(the part's summaries and hash counts) and ``ApplyVerdicts`` (the part read whole, its rows
kept or removed and written to files), CPU time, best of ``--repeat``.

    python -m benchmarks.prior_parts RUN/manifest/part-00000-of-00001.parquet [--edited 0.01]

The verdicts are those of a night that edited ``--edited`` of the part's documents (each a
``REMOVE``) and kept the rest (one Arrow array of kept documents, as ``PlanDocs`` sends it).
Run it in each of two trees (each imported whole) for a before and after.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill.items import REMOVE, PriorPart
from chunkmill.transforms import prior


def best_ms(run: Callable[[], Any], repeat: int) -> float:
    run()  # imports and first calls
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best * 1000


def part_costs(part: PriorPart, edited: float, repeat: int) -> tuple[int, float, float]:
    """(rows, SummariseParts ms, ApplyVerdicts ms) of one part."""
    docs = pc.unique(prior.read_part(part, ["doc_id"])["doc_id"])
    n_edited = int(len(docs) * edited)
    kept = prior.to_ipc(pa.RecordBatch.from_arrays([docs.slice(n_edited)], schema=prior.KEPT_DOCS))
    verdicts = [(d, REMOVE, None, ()) for d in docs.slice(0, n_edited).to_pylist()]
    summarise = best_ms(lambda: list(prior.SummariseParts().process(part)), repeat)
    with tempfile.TemporaryDirectory(prefix="prior-parts-") as temp:

        def apply_once() -> list[Any]:
            # As a bundle: the rows are written to files of ``temp`` and named at its end.
            step = prior.ApplyVerdicts(temp)
            step.start_bundle()
            return [*step.process((part.key, [kept, verdicts])), *step.finish_bundle()]

        apply = best_ms(apply_once, repeat)
    return prior.read_part(part, ["doc_id"]).num_rows, summarise, apply


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prior_parts")
    parser.add_argument("files", nargs="+", help="prior manifest files")
    parser.add_argument("--edited", type=float, default=0.01, help="share of documents edited")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    print("| part | rows | SummariseParts, ms CPU | ApplyVerdicts, ms CPU |")
    print("|---|---:|---:|---:|")
    for path in args.files:
        for part in prior.list_parts(path):
            rows, summarise, apply = part_costs(part, args.edited, args.repeat)
            print(f"| {part.key} | {rows:,} | {summarise:.0f} | {apply:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
