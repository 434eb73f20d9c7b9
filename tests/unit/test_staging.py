"""Chunk occurrences wait in staged files while only their hashes and ids cross the hash join
(``transforms/staging.py``); each staged file is read back once, and every row of it must
have been decided."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest

from chunkmill import ids
from chunkmill.items import WorkItem
from chunkmill.transforms import doc_plan, hash_join, prior, process_docs, staging
from tests.helpers import SMALL, paragraphs

DOC = paragraphs("alpha", "beta", "gamma", "alpha")  # "alpha" twice: one hash, two occurrences


def _process(tmp_path: Path, documents: dict[str, bytes]) -> list[beam.pvalue.TaggedOutput]:
    fn = process_docs._ProcessDocuments(
        SMALL, lambda uri, version, limit: documents[uri], str(tmp_path)
    )
    fn.setup()
    try:
        fn.start_bundle()
        out = [
            o
            for uri, data in documents.items()
            for o in fn.process(_spread(WorkItem(ids.doc_id(uri), uri, len(data))))
        ]
        # What finish_bundle emits carries its window: TaggedOutput(tag, WindowedValue).
        out += [
            beam.pvalue.TaggedOutput(o.tag, o.value.value)
            for o in fn.finish_bundle()
            if isinstance(o, beam.pvalue.TaggedOutput)
        ]
    finally:
        fn.teardown()
    return [o for o in out if isinstance(o, beam.pvalue.TaggedOutput)]


def _spread(item: WorkItem) -> tuple[str, list[tuple]]:
    """``item`` as SpreadWork hands it to the step: its doc_id and its one work."""
    doc, work = doc_plan.as_work(item)
    return doc, [work]


def _occurrences(outputs: list[beam.pvalue.TaggedOutput]) -> list[tuple[str, str, pa.RecordBatch]]:
    found = []
    for o in outputs:
        if o.tag != process_docs._OCCURRENCES:
            continue
        bucket, (tag, (path, message)) = o.value
        assert tag == hash_join.CURRENT
        found.append((bucket, path, prior.from_ipc(message, hash_join.STAGED_IDS)))
    return found


def test_only_hashes_and_ids_go_to_the_join_and_the_text_waits_in_a_staged_file(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC, "/c/b.md": DOC}))

    (path,) = {p for _, p, _ in occurrences}  # one bundle, under the staging row limit
    staged = staging.read(path)
    assert Path(path).parent == tmp_path
    joined = pa.Table.from_batches([b for _, _, b in occurrences])
    assert joined.schema.names == ["chunk_hash", "chunk_id"]  # no text crosses the shuffle
    assert sorted(joined["chunk_id"].to_pylist()) == sorted(staged["chunk_id"].to_pylist())
    assert staged.num_rows == 8
    assert {text.split()[0] for text in staged["text"].to_pylist()} == {"alpha", "beta", "gamma"}
    for bucket, _, batch in occurrences:  # each message holds its bucket's hashes only
        assert {prior.hash_bucket(h) for h in batch["chunk_hash"].to_pylist()} == {bucket}


def test_a_bundle_over_the_row_limit_stages_several_files(tmp_path, monkeypatch):
    monkeypatch.setattr(process_docs, "_STAGE_ROWS", 3)
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC, "/c/b.md": DOC}))
    paths = {p for _, p, _ in occurrences}
    assert len(paths) == 2  # staged when a document took the held rows to 3 or more
    assert sum(staging.read(p).num_rows for p in paths) == 8


def _decisions(chunk_ids: list[str]) -> bytes:
    n = len(chunk_ids)
    table = pa.table(
        [chunk_ids, [True] * n, [True] * n, [False] * n], schema=hash_join.DECISIONS
    ).combine_chunks()
    return prior.to_ipc(table.to_batches()[0])


def test_every_staged_row_is_decided_or_the_run_stops(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    chunk_ids = staging.read(path)["chunk_id"].to_pylist()
    finish = hash_join._FinishStaged()
    finish.start_bundle()

    manifest, *_ = finish.process((path, [_decisions(chunk_ids[:2]), _decisions(chunk_ids[2:])]))
    assert manifest.num_rows == len(chunk_ids) and all(manifest["is_new"].to_pylist())

    with pytest.raises(RuntimeError, match="4 occurrences, 3 of them decided"):
        list(finish.process((path, [_decisions(chunk_ids[1:])])))


def test_a_damaged_staged_file_stops_the_run(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    data = bytearray(Path(path).read_bytes())
    at = data.find(b"alpha alpha")
    data[at] ^= 0x20  # a flipped bit inside a page of text
    Path(path).write_bytes(bytes(data))
    with pytest.raises(OSError, match="(?i)checksum|crc"):
        staging.read(path)
