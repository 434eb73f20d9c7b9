"""The floor of the end-to-end benchmark: chunkmill's per-document work in a plain
single-process Python loop, without Beam.

    python -m benchmarks.plain_loop CORPUS_DIR OUT_DIR [--strategy paragraph]

It does what a first run of the pipeline does for every document, in one process: list the
corpus (sorted walk), read each file, extract, chunk and hash it with the same function the
pipeline's workers call (``chunkmill.document.process_document``, the ``auto`` strategy
unless ``--strategy`` names another), and write the ``chunks``, ``manifest`` and ``errors``
tables with pyarrow, a record batch at a time. What it leaves out is what only an
incremental pipeline needs: the joins with a prior manifest (there is none on a first run),
the run report and publishing.
The difference between this and ``chunkmill run`` is what Beam and the diff cost.

It prints the counts, then the CPU time of the whole loop and of the per-document work
alone: the ``process_document`` calls, each on bytes already read (the figure
``benchmarks/README.md`` follows for the per-document work).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chunkmill import ids, schema
from chunkmill.chunking.registry import available
from chunkmill.config import AUTO, Chunking, ChunkingConfig
from chunkmill.document import process_document
from chunkmill.items import WorkItem, source_version

# Rows per record batch: large enough that pyarrow's per-batch cost vanishes, small enough
# that a batch of chunk texts stays a few MB.
BATCH_ROWS = 4_096


def iter_files(root: str) -> Iterator[str]:
    """Every file under ``root``, in sorted order (a deterministic listing)."""
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        for name in sorted(files):
            yield os.path.join(directory, name)


class _TableWriter:
    """Rows in, column by column, one Parquet file out, a record batch at a time."""

    def __init__(self, path: str, table_schema: pa.Schema) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._schema = table_schema
        self._writer = pq.ParquetWriter(path, table_schema)
        self._columns: dict[str, list[Any]] = {name: [] for name in table_schema.names}
        self._rows = 0

    def add(self, columns: Mapping[str, Sequence[Any]], rows: int) -> None:
        """``rows`` rows, given as a sequence per column (a column absent is null)."""
        for name, column in self._columns.items():
            column.extend(columns[name] if name in columns else (None,) * rows)
        self._rows += rows
        if self._rows >= BATCH_ROWS:
            self._flush()

    def add_row(self, row: dict[str, Any]) -> None:
        self.add({name: (value,) for name, value in row.items()}, 1)

    def _flush(self) -> None:
        if self._rows:
            arrays = [pa.array(self._columns[f.name], f.type) for f in self._schema]
            self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._schema))
            self._columns = {name: [] for name in self._schema.names}
            self._rows = 0

    def close(self) -> None:
        self._flush()
        self._writer.close()


def run(corpus_dir: str, out_dir: str, config: ChunkingConfig | None = None) -> dict[str, Any]:
    """Process every file under ``corpus_dir`` into tables under ``out_dir``; returns counts
    and the CPU seconds of the per-document work (``work_cpu_s``)."""
    chunking = Chunking(config or ChunkingConfig())
    writers = {
        name: _TableWriter(os.path.join(out_dir, name, "part-00000.parquet"), schema.TABLES[name])
        for name in ("chunks", "manifest", "errors")
    }
    counts: dict[str, Any] = {"docs": 0, "bytes": 0, "chunks": 0, "failed": 0}
    work_cpu = 0.0
    # chunks/ holds each hash once, as the pipeline's does (its shuffle by hash does this).
    seen: set[str] = set()
    for path in iter_files(corpus_dir):
        stat = os.stat(path)
        item = WorkItem(
            doc_id=ids.doc_id(path),
            uri=path,
            size_bytes=stat.st_size,
            version=source_version(stat.st_size, stat.st_mtime),
        )
        with open(path, "rb") as f:
            data = f.read()
        started = time.process_time()
        outcome = process_document(item, data, chunking)
        work_cpu += time.process_time() - started
        counts["docs"] += 1
        counts["bytes"] += len(data)
        if outcome.error is not None:
            counts["failed"] += 1
            writers["errors"].add_row(outcome.error)
        chunks = outcome.chunks
        if not chunks:
            continue
        n = len(chunks["chunk_id"])
        counts["chunks"] += n
        writers["manifest"].add({**chunks, "is_new": (True,) * n}, n)  # a first run: all new
        firsts = []  # the rows whose hash is not in chunks/ yet
        for index, h in enumerate(chunks["chunk_hash"]):
            if h not in seen:
                seen.add(h)
                firsts.append(index)
        if len(firsts) == n:
            writers["chunks"].add(chunks, n)
        elif firsts:
            writers["chunks"].add(
                {name: [column[i] for i in firsts] for name, column in chunks.items()},
                len(firsts),
            )
    for writer in writers.values():
        writer.close()
    counts["work_cpu_s"] = work_cpu
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plain_loop", description=__doc__)
    parser.add_argument("corpus_dir")
    parser.add_argument("out_dir")
    parser.add_argument(
        "--strategy",
        choices=[AUTO, *available()],
        default=AUTO,
        help="the chunking strategy (default: auto, as chunkmill run)",
    )
    args = parser.parse_args(argv)
    started = time.process_time()
    counts = run(
        os.path.abspath(args.corpus_dir), args.out_dir, ChunkingConfig(strategy=args.strategy)
    )
    total_cpu = time.process_time() - started
    work_cpu = counts.pop("work_cpu_s")
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    print(
        f"cpu_s={total_cpu:.3f} (the loop) work_cpu_s={work_cpu:.3f} "
        f"(process_document, {args.strategy})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
