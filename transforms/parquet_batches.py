"""Row dicts to Arrow tables for ``WriteToParquetBatched``: the conversion half of Beam's
``WriteToParquet``, done by pyarrow in C++ a batch at a time instead of column by column in
Python for every row.

Profiled on a first run (benchmarks/profiling.py), Beam's ``_RowDictionariesToArrowTable`` plus
the projection step before it took about a tenth of the whole pipeline's CPU: a Python loop
over every field of every row. ``pa.RecordBatch.from_pylist`` does the same conversion
natively. Batches and tables are cut exactly where Beam cuts them (``record_batch_size``
rows per batch, a table once the batches reach ``row_group_buffer_size`` bytes), so the files
hold the same rows in the same row groups.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms import window

from chunkmill import schema

# Beam's WriteToParquet defaults, kept so the files come out with the same row groups.
RECORD_BATCH_ROWS = 1_000
ROW_GROUP_BUFFER_BYTES = 64 * 1024 * 1024
# The Arrow buffers of chunks/ rows (text included) gathered into one row group.
TEXT_ROW_GROUP_BYTES = 8 * 1024 * 1024


def _buffer_bytes(batch: pa.RecordBatch) -> int:
    # Beam's own measure (the sum of every array's buffers), so tables are cut where its are.
    return sum(b.size for column in batch.columns for b in column.buffers() if b is not None)


class RowsToArrowTables(beam.DoFn):
    """Row dicts in, ``pa.Table``s of ``schema`` out (for ``WriteToParquetBatched``).

    Every row must hold every field of ``schema`` (extra keys are ignored): a missing one is
    a ``KeyError`` naming it, never a silent null. Bounded input in the global window only.
    """

    def __init__(
        self,
        schema: pa.Schema,
        *,
        record_batch_rows: int = RECORD_BATCH_ROWS,
        row_group_buffer_bytes: int = ROW_GROUP_BUFFER_BYTES,
    ) -> None:
        if record_batch_rows < 1 or row_group_buffer_bytes < 1:
            raise ValueError("record_batch_rows and row_group_buffer_bytes must be positive")
        self._schema = schema
        self._fields = frozenset(schema.names)
        self._batch_rows = record_batch_rows
        self._group_bytes = row_group_buffer_bytes

    def start_bundle(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._batches: list[pa.RecordBatch] = []
        self._bytes = 0

    def process(self, row: dict[str, Any]):
        # The same order of checks as Beam's: a full batch is converted, and full row groups
        # are emitted, before the next row is buffered.
        if len(self._rows) >= self._batch_rows:
            self._flush_rows()
        if self._bytes >= self._group_bytes:
            yield self._take_table()
        if not self._fields <= row.keys():
            missing = sorted(self._fields - row.keys())
            raise KeyError(f"row lacks field(s) {', '.join(missing)} of the table schema")
        self._rows.append(row)

    def finish_bundle(self):
        if self._rows:
            self._flush_rows()
        if self._batches:
            yield window.GlobalWindows.windowed_value_at_end_of_window(self._take_table())

    def _flush_rows(self) -> None:
        batch = pa.RecordBatch.from_pylist(self._rows, schema=self._schema)
        self._rows = []
        self._batches.append(batch)
        self._bytes += _buffer_bytes(batch)

    def _take_table(self) -> pa.Table:
        table = pa.Table.from_batches(self._batches, schema=self._schema)
        self._batches, self._bytes = [], 0
        return table


class TableGatherer:
    """Small Arrow tables gathered into tables of about ``group_bytes`` of buffers, a row
    group's worth each. Tables must share a schema."""

    def __init__(self, group_bytes: int = ROW_GROUP_BUFFER_BYTES) -> None:
        if group_bytes < 1:
            raise ValueError("row_group_buffer_bytes must be positive")
        self._group_bytes = group_bytes
        self._tables: list[pa.Table] = []
        self._bytes = 0

    def add(self, table: pa.Table) -> Iterator[pa.Table]:
        """Takes ``table``; yields what is ready: ``table`` itself when it is a row group's
        worth already, else the tables gathered before it once it would overfill them."""
        # The size of the buffers the table references: ~20x cheaper than ``nbytes``, which
        # measures exactly what a slice or a filter's result uses of them.
        size = table.get_total_buffer_size()
        if size >= self._group_bytes:
            yield table  # already a row group's worth
            return
        if self._bytes + size > self._group_bytes:
            yield self.take()
        self._tables.append(table)
        self._bytes += size

    def take(self) -> pa.Table:
        """The tables gathered so far, as one (call only when ``bool(self)``)."""
        # Combined into one chunk per column: the Parquet writer is far slower on columns of
        # many small chunks (a 20,000-document first run took 39 s instead of 30).
        table = pa.concat_tables(self._tables).combine_chunks()
        self._tables, self._bytes = [], 0
        return table

    def __bool__(self) -> bool:
        return bool(self._tables)


class ConcatTables(beam.DoFn):
    """Arrow tables in, fewer and larger Arrow tables out (``TableGatherer``, a bundle at a
    time): ``WriteToParquetBatched`` writes each table it gets as its own row group, so small
    tables (the kept rows of a sparse prior part) are joined up to ``row_group_buffer_bytes``.
    Tables must share a schema."""

    def __init__(self, *, row_group_buffer_bytes: int = ROW_GROUP_BUFFER_BYTES) -> None:
        self._group_bytes = row_group_buffer_bytes
        self._gathered = TableGatherer(row_group_buffer_bytes)

    def start_bundle(self) -> None:
        self._gathered = TableGatherer(self._group_bytes)

    def process(self, table: pa.Table) -> Iterator[pa.Table]:
        yield from self._gathered.add(table)

    def finish_bundle(self):
        if self._gathered:
            yield window.GlobalWindows.windowed_value_at_end_of_window(self._gathered.take())


def _nothing(_: Any) -> tuple[()]:
    return ()


class BatchTables(beam.PTransform):
    """The pieces of a run's tables → ``{"chunks", "manifest", "removed", "errors", "added",
    "retired": PCollection[pa.Table]}``, as few large tables, ready for ``WriteTables``.

    ``"retired"``: Arrow tables; ``"errors"`` and ``"listing_errors"``: errors/ rows. The
    rows of manifest/, chunks/, added/ and removed/ are not among them: they are written to
    files where they are decided (``hash_join.FinishStaged``, ``prior.ApplyVerdicts``), so
    those four are empty."""

    def expand(self, parts: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        errors = (
            (parts["errors"], parts["listing_errors"])
            | "FlattenErrors" >> beam.Flatten()
            | "ErrorsToArrow" >> beam.ParDo(RowsToArrowTables(schema.ERRORS))
        )
        # Written elsewhere; empty PCollections that cost no stage of their own.
        empty = {
            name: parts["errors"] | f"Nothing{label}" >> beam.FlatMap(_nothing)
            for name, label in (
                ("chunks", "Chunked"),
                ("manifest", "Listed"),
                ("removed", "Removed"),
                ("added", "Added"),
            )
        }
        return {
            **empty,
            "errors": errors,
            "retired": parts["retired"] | "BatchRetired" >> beam.ParDo(ConcatTables()),
        }
