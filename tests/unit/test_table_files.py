"""WriteTables' last step: temporary files become ``TABLE/part-SSSSS-of-NNNNN.parquet``, once,
whatever a retry or a failed bundle attempt left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill import schema
from chunkmill.transforms import parquet_io, textstore
from chunkmill.transforms.parquet_io import TableFile
from chunkmill.transforms.sinks import TableFiles, name_table_files
from tests.unit.test_prior_integrity import hand_rows


def _temp_file(temp: Path, name: str, rows: list[dict]) -> str:
    path = str(temp / name)
    f = TableFile(path, schema.MANIFEST)
    f.write(pa.Table.from_pylist(rows, schema=schema.MANIFEST))
    f.close()
    return path


def test_files_are_named_in_order_empty_tables_get_a_file_and_stray_attempts_vanish(tmp_path):
    run, temp = tmp_path / "run", tmp_path / "run" / ".temp-x"
    temp.mkdir(parents=True)
    rows = hand_rows(4)
    committed = [
        ("manifest", _temp_file(temp, "manifest-b.parquet", rows[2:])),
        ("manifest", _temp_file(temp, "manifest-a.parquet", rows[:2])),
    ]
    _temp_file(temp, "manifest-failed-attempt.parquet", rows)  # a retried bundle's first try
    final = {name: str(run / name) for name in schema.TABLES}

    named = list(name_table_files(committed, temp=str(temp), final=final))

    manifest = [str(run / "manifest" / f"part-0000{i}-of-00002.parquet") for i in range(2)]
    assert [p for p in named if "/manifest/" in p] == manifest
    read = [pq.read_table(p)["chunk_id"].to_pylist() for p in manifest]
    assert read == [[r["chunk_id"] for r in rows[:2]], [r["chunk_id"] for r in rows[2:]]]
    for name in set(schema.TABLES) - {"manifest"}:
        (empty,) = (run / name).iterdir()
        assert pq.read_table(empty).num_rows == 0
        assert pq.read_schema(empty).equals(schema.TABLES[name])
    assert not temp.exists()
    assert sorted(p.name for p in run.iterdir()) == sorted(schema.TABLES)


def test_naming_again_after_a_retry_changes_nothing(tmp_path):
    run, temp = tmp_path / "run", tmp_path / "run" / ".temp-x"
    temp.mkdir(parents=True)
    committed = [("manifest", _temp_file(temp, "manifest-a.parquet", hand_rows(3)))]
    final = {name: str(run / name) for name in schema.TABLES}
    first = list(name_table_files(committed, temp=str(temp), final=final))
    before = {p: Path(p).read_bytes() for p in first}

    again = list(name_table_files(committed, temp=str(temp), final=final))

    assert again == first
    assert {p: Path(p).read_bytes() for p in again} == before


def test_rows_written_where_they_are_decided_fill_one_file_per_table_in_large_row_groups(
    tmp_path,
):
    rows = hand_rows(6)
    table = pa.Table.from_pylist(rows, schema=schema.MANIFEST)
    one_row = table.slice(0, 1).get_total_buffer_size()
    files = TableFiles(str(tmp_path), row_group_bytes=3 * one_row)
    for i in range(6):
        files.write("manifest", table.slice(i, 1))
    files.write("removed", schema.REMOVED.empty_table())  # no rows: no file

    ((name, path),) = files.close()

    assert name == "manifest" and Path(path).parent == tmp_path
    parquet = pq.ParquetFile(path)
    assert [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)] == [
        3,
        3,
    ]
    assert parquet.read()["chunk_id"].to_pylist() == [r["chunk_id"] for r in rows]
    assert parquet.schema_arrow.equals(schema.MANIFEST)


def _chunk_rows(n: int) -> pa.Table:
    rows = hand_rows(n)
    for i, row in enumerate(rows):
        del row["is_new"]
        row.update(text=f"text of chunk {i} " * 50, text_with_context=None)
        row["section_path"] = ["Intro", "Usage"]
    return pa.Table.from_pylist(rows, schema=schema.CHUNKS)


def test_the_text_of_chunks_is_its_file_named_again_not_written_twice(tmp_path):
    chunks = _chunk_rows(5)
    files = TableFiles(str(tmp_path / "temp"), text=True)
    files.write("chunks", chunks)

    written = dict(files.close())

    source, text = Path(written["chunks"]), Path(written[textstore.TEXT])
    assert source != text and text.read_bytes() == source.read_bytes()
    assert os.path.samefile(source, text)  # local disk: one file, two names
    source.unlink()  # a run folder deleted by runs gc leaves the store's name of it
    store = pq.read_table(text, columns=textstore.TEXT_SCHEMA.names)
    assert store.cast(textstore.TEXT_SCHEMA).equals(chunks.select(textstore.TEXT_SCHEMA.names))


def test_files_skip_dictionaries_of_unique_columns_and_statistics_of_text(tmp_path):
    path = str(tmp_path / "chunks.parquet")
    file = TableFile(path, schema.CHUNKS)
    file.write(_chunk_rows(40))
    file.close()

    group = pq.ParquetFile(path).metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    dictionary = {p for p, c in columns.items() if "RLE_DICTIONARY" in c.encodings}
    with_statistics = {p for p, c in columns.items() if c.is_stats_set}
    assert not dictionary & {"chunk_id", "chunk_hash", "text", "text_with_context"}
    # Repeated values keep theirs, a list's leaf too (named as the writer names it).
    assert {"doc_id", "strategy", "char_start", "section_path.list.item"} <= dictionary
    assert with_statistics == set(columns) - {"text", "text_with_context"}
    assert pq.read_table(path).equals(_chunk_rows(40))


def _rows_of(written: list[tuple[str, str]], name: str) -> list[str]:
    return sorted(
        c
        for table, path in written
        if table == name
        for c in pq.read_table(path)["chunk_id"].to_pylist()
    )


def test_rows_of_two_tables_are_written_once_while_every_row_is_both(tmp_path):
    table = pa.Table.from_pylist(hand_rows(4), schema=schema.MANIFEST)
    files = TableFiles(str(tmp_path))
    files.write("manifest", table.slice(0, 2), also="added")
    files.write("manifest", table.slice(2), also="added")

    written = files.close()

    paths = dict(written)
    assert sorted(t for t, _ in written) == ["added", "manifest"]
    assert os.path.samefile(paths["manifest"], paths["added"])
    assert (
        _rows_of(written, "added")
        == _rows_of(written, "manifest")
        == sorted(table["chunk_id"].to_pylist())
    )
    assert pq.read_schema(paths["added"]).equals(schema.ADDED)


def test_tables_that_part_ways_keep_the_rows_each_was_given(tmp_path):
    table = pa.Table.from_pylist(hand_rows(6), schema=schema.MANIFEST)
    a, b, c, d, e, f = (table.slice(i, 1) for i in range(6))
    ids = [r["chunk_id"] for r in table.to_pylist()]
    files = TableFiles(str(tmp_path))
    files.write("manifest", a, also="added")
    files.write("manifest", b, also="added")
    files.write("added", c)  # a row of added alone: the shared file so far is both tables'
    files.write("manifest", d, also="added")
    files.write("manifest", e)

    written = files.close()

    assert _rows_of(written, "manifest") == sorted([ids[0], ids[1], ids[3], ids[4]])
    assert _rows_of(written, "added") == sorted(ids[:4])
    # A table given rows of its own first never shares its file.
    files = TableFiles(str(tmp_path))
    files.write("manifest", e)
    files.write("manifest", f, also="added")
    written = files.close()
    assert _rows_of(written, "manifest") == sorted(ids[4:]) and _rows_of(written, "added") == [
        ids[5]
    ]


ODD_TYPES = pa.schema(
    [
        ("m", pa.map_(pa.string(), pa.int32())),
        ("s", pa.struct([("a", pa.list_(pa.field("x", pa.string()))), ("b", pa.int64())])),
        ("l", pa.large_list(pa.int8())),
        ("f", pa.list_(pa.int16(), 2)),
        ("d", pa.dictionary(pa.int32(), pa.string())),
    ]
)


@pytest.mark.parametrize("table_schema", [*schema.TABLES.values(), ODD_TYPES])
def test_the_writer_settings_name_each_column_as_a_written_file_does(table_schema):
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, table_schema, **parquet_io._BEAM_SETTINGS).close()
    written = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    paths = [written.column(i).path for i in range(len(written))]
    assert parquet_io._leaves(table_schema, frozenset()) == paths
    first = table_schema.names[0]
    assert parquet_io._leaves(table_schema, frozenset({first})) == [
        p for p in paths if p.split(".", 1)[0] != first
    ]
