"""What a night spends on each part of the prior manifest, in this process: ``SummariseParts``
(the part's summaries and hash counts) and ``ApplyVerdicts`` (the part read whole, its rows
kept or removed and written to files), CPU time, best of ``--repeat``; and the hash join
(``MarkNew``) of the part's buckets in one bundle, deciding its buckets together and one at a
time.

    python -m benchmarks.prior_parts RUN/manifest/part-00000-of-00001.parquet [--edited 0.01]

The verdicts are those of a night that edited ``--edited`` of the part's documents (each a
``REMOVE``) and kept the rest (one Arrow array of kept documents, as ``PlanDocs`` sends it).
The hash join gets the part's hash counts as the prior's, the removed documents' rows as
removed, and as many new occurrences (one staged file's), as such a night sends it.
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

from chunkmill import ids
from chunkmill.items import REMOVE, PriorPart
from chunkmill.transforms import hash_join, prior


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


def mark_costs(part: PriorPart, edited: float, repeat: int, temp: str) -> tuple[float, float]:
    """(ms deciding the bundle's buckets together, ms one bucket at a time) of the hash join
    of a night that edited ``edited`` of the part's documents."""
    table = prior.read_part(part, ["doc_id", "chunk_hash"])
    docs = pc.unique(table["doc_id"])
    gone = table.filter(pc.is_in(table["doc_id"], docs.slice(0, int(len(docs) * edited))))
    new = pa.array([h[::-1] for h in gone["chunk_hash"].to_pylist()], pa.string())
    current = pa.table({"chunk_hash": new, "chunk_id": [ids.chunk_id("d", h, 0) for h in new]})
    values: dict[str, list[tuple[int, Any]]] = {}
    for bucket, message in hash_join.staged_ids(current):
        values.setdefault(bucket, []).append((hash_join.CURRENT, ("staged", message)))
    counts = prior.by_bucket(prior.hash_counts(table))
    for bucket, ref in prior.write_by_bucket(temp, counts):
        values.setdefault(bucket, []).append((prior.HASHES_TAG, ref))
    for bucket, message in prior.by_bucket(prior.hash_counts(gone)):
        values.setdefault(bucket, []).append((prior.GONE_TAG, message))
    elements = sorted(values.items())

    def mark(batch_bytes: int) -> Callable[[], list[Any]]:
        def bundle() -> list[Any]:
            step = hash_join._MarkNew(batch_bytes=batch_bytes)
            step.start_bundle()
            out = [o for element in elements for o in step.process(element)]
            return out + list(step.finish_bundle())

        return bundle

    return best_ms(mark(hash_join.MARK_BATCH_BYTES), repeat), best_ms(mark(1), repeat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prior_parts")
    parser.add_argument("files", nargs="+", help="prior manifest files")
    parser.add_argument("--edited", type=float, default=0.01, help="share of documents edited")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    print(
        "| part | rows | SummariseParts, ms CPU | ApplyVerdicts, ms CPU "
        "| MarkNew, buckets together, ms CPU | one bucket at a time |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for path in args.files:
        for part in prior.list_parts(path):
            rows, summarise, apply = part_costs(part, args.edited, args.repeat)
            with tempfile.TemporaryDirectory(prefix="prior-parts-") as temp:
                together, alone = mark_costs(part, args.edited, args.repeat, temp)
            print(
                f"| {part.key} | {rows:,} | {summarise:.0f} | {apply:.0f} "
                f"| {together:.0f} | {alone:.0f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
