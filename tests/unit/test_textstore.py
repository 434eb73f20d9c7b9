"""The text store's index (transforms/textstore.py): what a damaged ``_TEXT`` is, and when
``runs gc`` compacts."""

from __future__ import annotations

import json

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
