"""The text store's index (transforms/textstore.py): what a damaged ``_TEXT`` is, when
``runs gc`` compacts, and which text files a run's index names."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill.transforms import textstore


def index_bytes(**changes) -> bytes:
    body = {
        "format": 1,
        "run_id": "r2",
        "files": [{"path": "text/r1/text-0.parquet", "rows": 10, "bytes": 100}],
        "dead": {"path": "text/r2/dead-0.parquet", "rows": 2, "bytes": 20},
    }
    return json.dumps({**body, **changes}).encode()


def test_an_index_names_its_files_and_counts_its_live_texts():
    index = textstore.parse_index(index_bytes())
    assert index.named() == {"text/r1/text-0.parquet", "text/r2/dead-0.parquet"}
    assert (index.rows, index.dead_rows, index.live) == (10, 2, 8)
    assert textstore.parse_index(index.to_json().encode()) == index


@pytest.mark.parametrize(
    "damage",
    [
        {"format": 2},
        {"files": "text/r1/text-0.parquet"},
        {"files": [{"path": "runs/r1/chunks/part-0.parquet", "rows": 1, "bytes": 1}]},
        {"files": [{"path": "text/../runs/x.parquet", "rows": 1, "bytes": 1}]},
        {"files": [{"path": "text/r1/a.parquet", "rows": -1, "bytes": 1}]},
        {"dead": {"path": "text/r1/dead.parquet"}},
    ],
)
def test_a_damaged_index_is_refused(damage):
    with pytest.raises(textstore.CorruptIndex):
        textstore.parse_index(index_bytes(**damage))
    with pytest.raises(textstore.CorruptIndex):
        textstore.parse_index(b"\x00not json")


def test_gc_compacts_past_a_quarter_of_dead_text_or_too_many_files():
    def index(rows: int, dead: int, files: int = 1) -> textstore.TextIndex:
        each = [{"path": f"text/r/t{i}", "rows": rows // files, "bytes": 1} for i in range(files)]
        entry = {"path": "text/r/dead", "rows": dead, "bytes": 1} if dead else None
        return textstore.TextIndex("r", tuple(each), entry)

    assert textstore.needs_compaction(index(100, 25)) is None
    assert textstore.needs_compaction(index(100, 26)) == "26 of its 100 texts are dead"
    assert textstore.needs_compaction(index(0, 0)) is None
    many = textstore.COMPACT_MAX_FILES + 1
    assert textstore.needs_compaction(index(many, 0, many)) == f"its text is in {many} files"


def _text_file(path, hashes: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"chunk_hash": h, "text": f"text {h}", "text_with_context": None} for h in hashes]
    pq.write_table(pa.Table.from_pylist(rows, schema=textstore.TEXT_SCHEMA), path)
    return str(path)


def _chunks_file(path, hashes: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    texts = [f"text {h}" for h in hashes]
    table = pa.table(
        {"chunk_hash": hashes, "text": texts, "text_with_context": [None] * len(hashes)}
    )
    pq.write_table(table.cast(textstore.TEXT_SCHEMA), path)
    return str(path)


FIRST = {"run_id": "r1", "prior": {"mode": "none", "run_id": None}}


def _run_written_in(out, files: int, per_file: int) -> tuple[list[str], list[str]]:
    """Run r1's hashes, and what it wrote: its chunks/ file of them all, then ``files`` text
    files of ``per_file`` of them each, as FinishStaged writes them."""
    hashes = [f"{i:064x}" for i in range(per_file * files)]
    chunks = _chunks_file(out / "runs" / "r1" / "chunks" / "part-00000-of-00001.parquet", hashes)
    text = [
        _text_file(
            out / "text" / "r1" / f"part-{i:05d}-of-{files:05d}.parquet",
            hashes[per_file * i : per_file * (i + 1)],
        )
        for i in range(files)
    ]
    return hashes, [chunks, *text]


@pytest.mark.parametrize("files", [1, textstore.NAMED_AS_WRITTEN])
def test_a_run_s_text_written_with_its_rows_is_named_as_it_is(tmp_path, files):
    out = tmp_path / "out"
    hashes, written = _run_written_in(out, files, per_file=3)
    text = written[1:]
    index = textstore.write_run_text(str(out), "r1", FIRST, written)
    assert index is not None and index.rows == len(hashes)
    assert index.named() == {t[len(str(out)) + 1 :] for t in text}


def test_a_run_s_text_in_many_files_is_gathered_into_one(tmp_path):
    out = tmp_path / "out"
    hashes, written = _run_written_in(out, textstore.NAMED_AS_WRITTEN + 1, per_file=2)
    index = textstore.write_run_text(str(out), "r1", FIRST, written)
    assert index is not None and index.named() == {"text/r1/text-0.parquet"}
    got = pq.read_table(out / "text" / "r1" / "text-0.parquet")
    assert sorted(got["chunk_hash"].to_pylist()) == hashes
    # The files read are not left beside the one that now holds their text.
    assert sorted(p.name for p in (out / "text" / "r1").iterdir()) == ["text-0.parquet"]


def test_text_files_that_do_not_hold_the_run_s_chunks_are_not_named(tmp_path):
    out = tmp_path / "out"
    hashes = [f"{i:064x}" for i in range(4)]
    chunks = _chunks_file(out / "runs" / "r1" / "chunks" / "part-00000-of-00001.parquet", hashes)
    partial = _text_file(out / "text" / "r1" / "part-00000-of-00001.parquet", hashes[:3])
    index = textstore.write_run_text(str(out), "r1", FIRST, [chunks, partial])
    # Its text is read from chunks/ instead, whole.
    assert index is not None and index.named() == {"text/r1/text-0.parquet"}
    got = pq.read_table(out / "text" / "r1" / "text-0.parquet")
    assert sorted(got["chunk_hash"].to_pylist()) == hashes
    # The files read are not left beside the one that now holds their text.
    assert sorted(p.name for p in (out / "text" / "r1").iterdir()) == ["text-0.parquet"]
