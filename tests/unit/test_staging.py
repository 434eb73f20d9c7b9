"""Chunk occurrences wait in staged files while only their hashes and ids cross the hash join
(``transforms/staging.py``); each staged file is read back once, and every row of it must
have been decided."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest

from chunkmill import ids, schema
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
        found.append((bucket, path, hash_join.read_staged_ids(message)))
    return found


def test_only_hashes_and_ids_go_to_the_join_and_the_text_waits_in_a_staged_file(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC, "/c/b.md": DOC}))

    (path,) = {p for _, p, _ in occurrences}  # one bundle, under the staging row limit
    staged = staging.read(path)
    assert Path(path).parent == tmp_path
    joined = pa.Table.from_batches([b for _, _, b in occurrences])
    assert joined.schema.names == ["chunk_hash", "chunk_id"]  # no text crosses the shuffle
    # As the bytes their hex spells: 32 and 16 a row, no offsets.
    assert joined.schema.field("chunk_hash").type == pa.binary(32)
    assert joined.schema.field("chunk_id").type == pa.binary(16)
    assert staged.num_rows == 8
    assert {text.split()[0] for text in staged["text"].to_pylist()} == {"alpha", "beta", "gamma"}
    for bucket, _, batch in occurrences:
        # Each message holds its bucket's rows only, in the staged file's order.
        rows = staged.filter(
            pa.array([prior.hash_bucket(h) == bucket for h in staged["chunk_hash"].to_pylist()])
        )
        assert [h.hex() for h in batch["chunk_hash"].to_pylist()] == rows["chunk_hash"].to_pylist()
        assert [i.hex() for i in batch["chunk_id"].to_pylist()] == rows["chunk_id"].to_pylist()
    assert joined.num_rows == staged.num_rows
    with pytest.raises(ValueError, match="not whole occurrences"):
        hash_join.read_staged_ids(bytes(47))


def test_a_bundle_over_the_row_limit_stages_several_files(tmp_path, monkeypatch):
    monkeypatch.setattr(process_docs, "_STAGE_ROWS", 3)
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC, "/c/b.md": DOC}))
    paths = {p for _, p, _ in occurrences}
    assert len(paths) == 2  # staged when a document took the held rows to 3 or more
    assert sum(staging.read(p).num_rows for p in paths) == 8


NEW_ADDED = hash_join.IS_NEW | hash_join.ADDED


def test_every_staged_row_is_decided_or_the_run_stops(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    rows = staging.read(path)
    decided = [(bucket, bytes([NEW_ADDED] * batch.num_rows)) for bucket, _, batch in occurrences]
    assert len(decided) > 1  # the file's rows are in several buckets
    manifest = hash_join.staged_tables(path, decided)["manifest"]
    assert manifest["chunk_id"].to_pylist() == rows["chunk_id"].to_pylist()
    assert all(manifest["is_new"].to_pylist())

    (bucket, flags), *others = decided
    n = rows.num_rows
    with pytest.raises(RuntimeError, match=f"{n} occurrences, {n - len(flags)} of them decided"):
        hash_join.staged_tables(path, others)  # a bucket's decisions missing
    with pytest.raises(RuntimeError, match=f"{n} occurrences, {n - len(flags)} of them decided"):
        hash_join.staged_tables(path, [(bucket, flags[1:]), *others])  # one row short
    with pytest.raises(RuntimeError, match="decisions for buckets it lacks"):
        hash_join.staged_tables(path, [*decided, ("zz", b"\x01")])


def test_decisions_reach_the_rows_they_were_made_for(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC, "/c/b.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    rows = staging.read(path)
    # Only the occurrences of the ids picked are new; each bucket answers in the order sent.
    picked = set(rows["chunk_id"].to_pylist()[::3])
    decided = [
        (
            bucket,
            bytes(NEW_ADDED if i.hex() in picked else 0 for i in batch["chunk_id"].to_pylist()),
        )
        for bucket, _, batch in occurrences
    ]
    manifest = hash_join.staged_tables(path, decided)["manifest"]
    assert set(manifest.filter(manifest["is_new"])["chunk_id"].to_pylist()) == picked


def test_a_damaged_staged_file_stops_the_run(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    data = bytearray(Path(path).read_bytes())
    at = data.find(b"alpha alpha")
    data[at] ^= 0x20  # a flipped bit inside a page of text
    Path(path).write_bytes(bytes(data))
    with pytest.raises(OSError, match="(?i)checksum|crc"):
        staging.read(path)


def test_a_staged_file_cut_short_stops_the_run(tmp_path):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    data = Path(path).read_bytes()
    for kept in (len(data) - 1, 100, 3):
        Path(path).write_bytes(data[:kept])
        with pytest.raises(staging.StagedFileDamaged, match="(?i)checksum|too short"):
            staging.read(path)


def test_a_staged_file_reads_back_alike_through_any_file_system(tmp_path, monkeypatch):
    occurrences = _occurrences(_process(tmp_path, {"/c/a.md": DOC, "/c/b.md": DOC}))
    (path,) = {p for _, p, _ in occurrences}
    direct = staging.read(path)
    # As on an object store: through Beam's FileSystems, bytes rather than an Arrow buffer.
    monkeypatch.setattr(staging.stores, "local_path", lambda uri: None)
    assert staging.read(path).equals(direct)
    written = staging.write(str(tmp_path / "not-yet"), direct)
    assert staging.read(written).equals(direct)
    monkeypatch.undo()
    assert staging.read(staging.write(str(tmp_path / "new" / "folder"), direct)).equals(direct)
    assert direct.schema == schema.CHUNKS


def test_a_staged_file_that_cannot_be_written_fails_the_bundle(tmp_path, monkeypatch):
    """Staged files are written behind the documents; a write that fails still fails the
    bundle that named the file, at the latest when the bundle ends."""

    def refuse(path: str, table: pa.Table) -> None:
        raise OSError(f"no space left for {path}")

    monkeypatch.setattr(staging, "write_to", refuse)
    with pytest.raises(OSError, match="no space left"):
        _process(tmp_path, {"/c/a.md": DOC})
    monkeypatch.setattr(process_docs, "_STAGE_ROWS", 1)  # each document staged mid-bundle
    with pytest.raises(OSError, match="no space left"):
        _process(tmp_path, {f"/c/{i}.md": DOC for i in range(4)})
