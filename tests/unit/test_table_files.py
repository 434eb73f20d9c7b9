"""WriteTables' last step: temporary files become ``TABLE/part-SSSSS-of-NNNNN.parquet``, once,
whatever a retry or a failed bundle attempt left behind."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from chunkmill import schema
from chunkmill.transforms.parquet_io import TableFile
from chunkmill.transforms.sinks import name_table_files
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
