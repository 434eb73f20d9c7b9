"""The prior manifest's rows are proven where they enter a run: page checksums verified,
ids and hashes validated, a damaged file named in one line (``RunRefused``), never passed on.
The files are written here with pyarrow, by hand: the tests are about reading."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from chunkmill import schema
from chunkmill.items import PriorPart
from chunkmill.refusal import RunRefused, refusal_line
from chunkmill.transforms import digests, parquet_io, prior, sinks


def hand_rows(n: int) -> list[dict]:
    """``n`` manifest rows of one document, every value literal or a plain SHA-256."""
    doc = hashlib.sha256(b"/c/doc.md").hexdigest()[:32]
    rows = []
    for i in range(n):
        h = hashlib.sha256(f"chunk {i}".encode()).hexdigest()
        rows.append(
            {
                "chunk_id": hashlib.sha256(f"{doc}{h}".encode()).hexdigest()[:32],
                "chunk_hash": h,
                "doc_id": doc,
                "source_uri": "/c/doc.md",
                "chunk_index": i,
                "char_start": 10 * i,
                "char_end": 10 * i + 9,
                "token_count": 3,
                "strategy": "paragraph",
                "config_fingerprint": "f" * 32,
                "content_sha256": "c" * 64,
                "doc_format": "markdown",
                "is_new": False,
            }
        )
    return rows


def write(path: Path, rows: list[dict], *, checksums: bool = True) -> Path:
    table = pa.Table.from_pylist(rows, schema=schema.MANIFEST)
    pq.write_table(table, path, compression="none", write_page_checksum=checksums)
    return path


def flip_a_hash(path: Path, rows: list[dict], *, twice: bool = False) -> str:
    """Changes one hex digit of a chunk_hash inside the file's data (not its footer's
    statistics: a hash neither the smallest nor the largest); the file keeps its size and
    the hash stays 64 hex characters. Returns the hash that was flipped."""
    hashes = sorted(r["chunk_hash"] for r in rows)
    victim = hashes[len(hashes) // 2]
    data = bytearray(path.read_bytes())
    at = data.find(victim.encode())
    # Once in the chunk_hash column; ``twice``: once more, in a column that quotes it.
    assert at >= 0 and (data.find(victim.encode(), at + 1) >= 0) == twice
    for _ in range(2 if twice else 1):
        data[at + 10] = ord("0") if data[at + 10] != ord("0") else ord("1")
        at = data.find(victim.encode(), at + 1)
    path.write_bytes(bytes(data))
    return victim


def test_flipped_bytes_in_a_prior_part_refuse_the_run_naming_the_file(tmp_path):
    rows = hand_rows(20)
    path = write(tmp_path / "part-0.parquet", rows)
    flip_a_hash(path, rows)
    with pytest.raises(RunRefused) as info:
        prior.read_part(PriorPart(str(path), 0), ["doc_id", "chunk_hash"])
    line = info.value.line
    assert str(path) in line and "--prior-manifest" in line and "\n" not in line
    assert "checksum" in line.lower() or "crc" in line.lower()


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("chunk_hash", "A" * 64, ["chunk_hash", "64 lowercase hex"]),
        ("chunk_hash", "ab" * 31, ["chunk_hash", "64 lowercase hex"]),
        ("chunk_id", "z" * 32, ["chunk_id", "32 lowercase hex"]),
        ("doc_id", "0" * 64, ["doc_id", "32 lowercase hex"]),
    ],
)
def test_ids_and_hashes_of_the_wrong_shape_refuse_the_run(tmp_path, column, value, words):
    rows = hand_rows(5)
    rows[3][column] = value
    path = write(tmp_path / "part-0.parquet", rows)
    with pytest.raises(RunRefused) as info:
        prior.read_part(PriorPart(str(path), 0), list(schema.OCCURRENCE_FIELDS))
    assert str(path) in info.value.line and "row 3" in info.value.line
    for word in words:
        assert word in info.value.line


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["ab" * 16, None, "0123456789abcdef" * 2], True),
        (["ab" * 16, "ab" * 15 + "aé"], False),  # 32 bytes, 31 characters
        (["ab" * 16, "ab" * 15 + "ag"], False),
        (["ab" * 16, "AB" * 16], False),
        (["ab" * 16, "ab" * 17], False),
        ([None, None], True),
    ],
)
def test_the_hex_check_reads_sliced_and_chunked_columns_as_the_pattern_does(values, expected):
    chunked = pa.chunked_array(
        [pa.array(["zz"] + values, pa.string()).slice(1), pa.array([], pa.string())]
    )
    assert digests.is_hex(chunked, 16) is expected
    # The pattern it stands for (nulls are invalid_rows' other check).
    found = prior.invalid_rows(pa.table({"chunk_id": pc.drop_null(chunked)}))
    assert (found is None) is expected


def test_a_null_in_a_required_column_refuses_the_run(tmp_path):
    rows = hand_rows(3)
    # Written with a schema that lets the column be null: a manifest from elsewhere.
    nullable = pa.schema([f.with_nullable(True) for f in schema.MANIFEST])
    rows[1]["source_uri"] = None
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=nullable), path)
    with pytest.raises(RunRefused, match="source_uri is null in row 1"):
        prior.read_part(PriorPart(str(path), 0), list(schema.OCCURRENCE_FIELDS))


def test_a_sound_part_reads_back_as_written(tmp_path):
    rows = hand_rows(4)
    path = write(tmp_path / "part-0.parquet", rows)
    table = prior.read_part(PriorPart(str(path), 0), ["chunk_hash", "doc_id"])
    assert table.to_pylist() == [
        {"chunk_hash": r["chunk_hash"], "doc_id": r["doc_id"]} for r in rows
    ]


@pytest.mark.parametrize("threaded_from", [0, prior.THREADED_PART_BYTES])
def test_a_part_reads_the_same_on_one_thread_and_on_many(tmp_path, monkeypatch, threaded_from):
    rows = hand_rows(6)
    path = write(tmp_path / "part-0.parquet", rows)
    monkeypatch.setattr(prior, "THREADED_PART_BYTES", threaded_from)
    table = prior.read_part(PriorPart(str(path), 0), list(schema.OCCURRENCE_FIELDS))
    fields = list(schema.OCCURRENCE_FIELDS)
    assert table.select(fields).to_pylist() == [{f: r.get(f) for f in fields} for r in rows]
    flip_a_hash(path, rows)
    with pytest.raises(RunRefused, match="(?i)checksum|crc"):
        prior.read_part(PriorPart(str(path), 0), ["chunk_hash"])


def test_a_prior_file_gone_after_preflight_refuses_the_run_naming_it(tmp_path):
    with pytest.raises(RunRefused) as info:
        list(prior.list_parts(str(tmp_path / "part-9.parquet")))
    assert str(tmp_path / "part-9.parquet") in info.value.line


def test_report_and_plan_reads_verify_page_checksums(tmp_path):
    rows = hand_rows(20)
    path = write(tmp_path / "part-0.parquet", rows)
    flip_a_hash(path, rows)
    with pytest.raises(OSError, match="(?i)checksum|crc"):
        list(parquet_io.read_parquet_batches([str(path)], ["chunk_hash"]))


@pytest.mark.parametrize("damage", ["cut_short", "not_parquet"])
def test_report_and_plan_reads_name_a_file_that_is_not_whole_parquet(tmp_path, damage):
    path = write(tmp_path / "part-0.parquet", hand_rows(20))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "cut_short" else b"not parquet")
    with pytest.raises(parquet_io.UnreadableTable, match=str(path)):
        list(parquet_io.read_parquet_batches([str(path)], ["chunk_hash"]))


def test_refusal_line_survives_pickling_and_wrapping():
    import pickle

    refused = pickle.loads(pickle.dumps(RunRefused("a\nb  c")))
    assert refused.line == "a b c" and str(refused).count("a b c") == 1
    try:
        try:
            raise refused
        except RunRefused as e:
            raise RuntimeError("step failed") from e
    except RuntimeError as wrapped:
        assert refusal_line(wrapped) == "a b c"


def _write_with_beam(table: pa.Table, prefix: str) -> Path:
    with TestPipeline(runner="FnApiRunner") as p:
        _ = (
            p
            | beam.Create([table])
            | beam.io.WriteToParquetBatched(prefix, schema.MANIFEST, shard_name_template="")
        )
    return Path(prefix)


def _write_tables(manifest: pa.Table, output: Path) -> dict[str, list[Path]]:
    """Every table of a run written by ``WriteTables``: ``manifest`` in the manifest table,
    no rows in the others; each table's files by name."""
    with TestPipeline(runner="FnApiRunner") as p:
        inputs = {
            name: p | f"Rows{name}" >> beam.Create([manifest] if name == "manifest" else [])
            for name in schema.TABLES
        }
        _ = inputs | sinks.WriteTables(str(output), "r1")
    run = output / "runs" / "r1"
    assert sorted(f.name for f in run.iterdir()) == sorted(schema.TABLES)  # no temporary folder
    return {name: sorted((run / name).iterdir()) for name in schema.TABLES}


def test_tables_are_written_with_page_checksums_and_otherwise_as_beam_writes_them(tmp_path):
    rows = hand_rows(50)
    table = pa.Table.from_pylist(rows, schema=schema.MANIFEST)
    written = _write_tables(table, tmp_path / "out")
    (ours,) = written["manifest"]
    assert ours.name == "part-00000-of-00001.parquet"
    for name, files in written.items():  # an empty table still has a file, with its schema
        assert len(files) == 1
        assert pq.ParquetFile(files[0]).schema_arrow.equals(schema.TABLES[name])
    beams = _write_with_beam(table, str(tmp_path / "beam.parquet"))
    a, b = pq.ParquetFile(ours), pq.ParquetFile(beams)
    assert a.schema_arrow.equals(b.schema_arrow, check_metadata=True)
    assert a.schema_arrow.metadata == b.schema_arrow.metadata  # schema version, writer
    assert a.metadata.num_row_groups == b.metadata.num_row_groups == 1
    assert a.read().equals(b.read())
    # The same damage: Beam's file passes it on, ours refuses to be read.
    flip_a_hash(beams, rows)
    flip_a_hash(ours, rows)
    read_back = pq.ParquetFile(beams, page_checksum_verification=True).read()
    assert read_back["chunk_hash"].to_pylist() != [r["chunk_hash"] for r in rows]
    with pytest.raises(OSError, match="(?i)crc|checksum"):
        pq.ParquetFile(ours, page_checksum_verification=True).read()


def test_a_refusal_rebuilt_from_a_runners_augmented_text_keeps_its_line():
    # What Beam does to an exception raised in a step: the same type, its text augmented.
    original = RunRefused("too many failed")
    rebuilt = RunRefused(f"{original} [while running 'Publish/WriteSuccessAndLatest']")
    assert rebuilt.line == "too many failed"
    assert refusal_line(rebuilt) == "too many failed"


def test_plan_on_a_prior_with_flipped_bytes_is_one_line_naming_the_file(tmp_path, capsys):
    from chunkmill.pipeline.cli import main
    from tests.helpers import write_finished_run

    rows = hand_rows(20)
    for row in rows:  # plan reads source_uri: make it distinct, as chunk_hash is
        row["source_uri"] = f"/c/doc-{row['chunk_hash']}.md"
    base = Path(
        write_finished_run(
            tmp_path / "out", "r1", [pa.Table.from_pylist(rows, schema=schema.MANIFEST)]
        )
    )
    flip_a_hash(base / "manifest" / "part-00000-of-00001.parquet", rows, twice=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nhello\n")
    code = main(
        ["plan", "--input", str(tmp_path / "docs" / "*"), "--output", str(tmp_path / "out")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "part-00000-of-00001.parquet" in err and "--prior-manifest" in err
