"""RowsToArrowTables: the same Arrow tables, cut at the same rows, as Beam's WriteToParquet
conversion, so the Parquet files WriteTables writes are unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest
from apache_beam.io.parquetio import _RowDictionariesToArrowTable
from apache_beam.transforms.window import GlobalWindow

from chunkmill import document, ids, schema
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.items import WorkItem
from chunkmill.transforms.parquet_batches import RowsToArrowTables


def _rows() -> list[dict]:
    """Realistic chunk rows of every kind of column: section paths, nulls, a context window."""
    text = "\n\n".join(
        f"# Part {i}\n\nSome prose about part {i}, café and naïve.\n\n## Detail\n\n" + "word " * 40
        for i in range(12)
    )
    rows = []
    for config in (
        ChunkingConfig.create("section", max_tokens=40),
        ChunkingConfig.create("paragraph", max_tokens=30, overlap_tokens=5, context_prev_chars=20),
    ):
        uri = f"/corpus/{config.strategy}.md"
        data = text.encode()
        item = WorkItem(ids.doc_id(uri), uri, len(data), version="size=1;mtime=2.0")
        rows += document.process_document(item, data, Chunking(config)).occurrences
    return [{**r, "is_new": i % 3 == 0} for i, r in enumerate(rows)]


def _drive(fn, rows: list[dict], **params) -> list[pa.Table]:
    """Run a DoFn over ``rows`` as one bundle; the tables it emits, in order."""
    fn.start_bundle()
    out = []
    for row in rows:
        out.extend(fn.process(row, **params))
    for value in fn.finish_bundle() or ():
        out.append(value.value)  # finish_bundle yields WindowedValues
    return out


@pytest.mark.parametrize("table_schema", [schema.CHUNKS, schema.MANIFEST])
@pytest.mark.parametrize(("batch_rows", "group_bytes"), [(1000, 64 << 20), (7, 1), (5, 20_000)])
def test_tables_equal_beams_cut_at_the_same_rows(table_schema, batch_rows, group_bytes):
    rows = _rows()
    assert len(rows) > 3 * batch_rows or batch_rows == 1000
    beam_tables = _drive(
        _RowDictionariesToArrowTable(table_schema, group_bytes, batch_rows),
        [{k: r[k] for k in table_schema.names} for r in rows],  # what the old Project step fed
        w=GlobalWindow(),
    )
    ours = _drive(
        RowsToArrowTables(
            table_schema, record_batch_rows=batch_rows, row_group_buffer_bytes=group_bytes
        ),
        rows,
    )
    assert [t.num_rows for t in ours] == [t.num_rows for t in beam_tables]
    assert len(ours) > 1 or batch_rows == 1000
    for a, b in zip(ours, beam_tables, strict=True):
        assert a.schema.equals(b.schema, check_metadata=True)
        assert a.equals(b)


def test_a_row_missing_a_field_is_an_error_naming_it():
    row = {k: v for k, v in _rows()[0].items() if k != "chunk_hash"}
    fn = RowsToArrowTables(schema.CHUNKS)
    fn.start_bundle()
    with pytest.raises(KeyError, match="chunk_hash"):
        list(fn.process(row))


def test_sizes_must_be_positive():
    with pytest.raises(ValueError):
        RowsToArrowTables(schema.CHUNKS, record_batch_rows=0)
