"""process_document: the fate of one document, without Beam."""

from __future__ import annotations

import pytest

from tests.helpers import SMALL, make_pdf, manifest_rows, paragraphs
from transforms import document, ids, schema
from transforms.config import Chunking, ChunkingConfig
from transforms.types import WorkItem

URI = "/corpus/a.md"


def item(prior=(), data=b"") -> WorkItem:
    return WorkItem(ids.doc_id(URI), URI, len(data), tuple(prior))


def run(data: bytes, prior=(), config: ChunkingConfig = SMALL) -> document.DocOutcome:
    return document.process_document(item(prior, data), data, Chunking(config))


def test_new_document_is_chunked_with_exact_offsets_and_ids():
    data = paragraphs("alpha", "beta", "gamma")
    out = run(data)
    assert out.status == document.PROCESSED
    text = data.decode()
    assert [o["chunk_index"] for o in out.occurrences] == list(range(len(out.occurrences)))
    for o in out.occurrences:
        assert o["text"] == text[o["char_start"] : o["char_end"]]
        assert o["chunk_hash"] == ids.chunk_hash(o["text"])
        assert o["doc_id"] == ids.doc_id(URI)
        assert o["content_sha256"] == ids.sha256_hex(data)
        assert o["config_fingerprint"] == SMALL.fingerprint
        assert o["token_count"] == (len(o["text"]) + 3) // 4
        assert o["page_start"] is None and o["doc_format"] == "markdown"
    assert set(schema.CHUNKS.names) <= set(out.occurrences[0])


def test_repeated_chunks_get_distinct_deterministic_ids():
    data = paragraphs("same", "same", "same")
    first, second = run(data), run(data)
    chunk_ids = [o["chunk_id"] for o in first.occurrences]
    assert len(set(o["chunk_hash"] for o in first.occurrences)) == 1
    assert len(set(chunk_ids)) == len(chunk_ids) == 3
    assert chunk_ids == [o["chunk_id"] for o in second.occurrences]


def test_unchanged_document_is_carried_over_without_extraction():
    data = paragraphs("alpha", "beta")
    prior = manifest_rows(URI, data)
    out = run(data, prior)
    assert out.status == document.CARRIED_OVER
    assert out.occurrences == [] and out.removed == []
    assert [r["chunk_id"] for r in out.carried] == [r["chunk_id"] for r in prior]
    assert all(r["is_new"] is False for r in out.carried)


def test_config_change_rechunks_an_unchanged_document():
    data = paragraphs("alpha", "beta")
    prior = manifest_rows(URI, data)
    bigger = ChunkingConfig.create("paragraph", max_tokens=700, overlap_tokens=0)
    out = run(data, prior, bigger)
    assert out.status == document.PROCESSED
    assert out.occurrences[0]["config_fingerprint"] == bigger.fingerprint != SMALL.fingerprint


def test_edit_keeps_ids_of_untouched_chunks_and_removes_only_the_edited_one():
    old = paragraphs("alpha", "beta", "gamma")
    new = paragraphs("alpha", "BETA", "gamma")
    prior = manifest_rows(URI, old)
    out = run(new, prior)
    assert out.status == document.PROCESSED
    old_ids = {r["chunk_id"] for r in prior}
    new_ids = {o["chunk_id"] for o in out.occurrences}
    assert len(old_ids & new_ids) == len(prior) - 1
    assert [r["removed_reason"] for r in out.removed] == [schema.DOCUMENT_CHANGED]
    assert out.removed[0]["chunk_id"] in old_ids - new_ids


@pytest.mark.parametrize(
    ("uri", "data", "reason"),
    [
        ("/corpus/a.pdf", b"%PDF-1.7 truncated", "corrupt"),
        ("/corpus/a.md", b"", "empty"),
        ("/corpus/a.txt", bytes(range(1, 256)) * 4, "undecodable"),
    ],
)
def test_failure_yields_one_error_and_keeps_prior_rows(uri, data, reason):
    good = make_pdf(["alpha " * 30, "beta " * 30]) if uri.endswith(".pdf") else paragraphs("a", "b")
    prior = manifest_rows(uri, good)
    doc = WorkItem(ids.doc_id(uri), uri, len(data), tuple(prior))
    out = document.process_document(doc, data, Chunking(SMALL))
    assert out.status == document.FAILED
    assert out.error["reason"] == reason and out.error["source_uri"] == uri
    assert "\n" not in out.error["message"]
    assert set(out.error) == set(schema.ERRORS.names)
    assert out.removed == [] and out.occurrences == []
    assert [r["chunk_id"] for r in out.carried] == [r["chunk_id"] for r in prior]


def test_chunker_crash_is_an_error_row_not_an_exception():
    class Boom:
        name = "boom"

        def params(self):
            return {}

        def split(self, text):
            raise RuntimeError("bad\nthing")

    class BoomChunking(Chunking):
        def chunker_for(self, fmt, uri=""):
            return Boom()

    data = paragraphs("alpha")
    out = document.process_document(item((), data), data, BoomChunking(SMALL))
    assert out.status == document.FAILED
    assert (out.error["stage"], out.error["reason"]) == ("chunk", "chunker_error")
    assert out.error["message"] == "RuntimeError: bad thing"


V1, V2 = "size=10;mtime=1.5", "size=10;mtime=2.5"


def _versioned(version, prior_version=V1, config=SMALL, n_mismatch=0):
    data = paragraphs("alpha", "beta", "gamma")
    prior = [{**r, "source_version": prior_version} for r in manifest_rows(URI, data, config)]
    for r in prior[:n_mismatch]:
        r["source_version"] = V2
    return WorkItem(ids.doc_id(URI), URI, len(data), tuple(prior), version=version)


@pytest.mark.parametrize(
    ("it", "unchanged"),
    [
        (_versioned(V1), True),
        (_versioned(V2), False),  # the listing reports another version
        (_versioned(None), False),  # the store reported nothing usable: read and hash
        (_versioned(V1, prior_version=None), False),  # rows from before versions were kept
        (_versioned(V1, n_mismatch=1), False),  # every prior row must agree
        (_versioned(V1, config=ChunkingConfig.create("sentence")), False),  # config changed
        (WorkItem(ids.doc_id(URI), URI, 10, (), version=V1), False),  # new document
    ],
)
def test_unchanged_by_listing_needs_same_version_and_config_on_every_prior_row(it, unchanged):
    assert document.is_unchanged_by_listing(it, SMALL) is unchanged


def test_same_bytes_under_new_listing_metadata_carry_over_with_the_new_version():
    it = _versioned(V2)
    data = paragraphs("alpha", "beta", "gamma")
    out = document.process_document(it, data, Chunking(SMALL))
    assert out.status == document.CARRIED_OVER
    assert {r["source_version"] for r in out.carried} == {V2}
    assert [r["chunk_id"] for r in out.carried] == [r["chunk_id"] for r in it.prior]


def test_new_rows_record_the_listing_version():
    data = paragraphs("fresh")
    it = WorkItem(ids.doc_id(URI), URI, len(data), (), version=V1)
    out = document.process_document(it, data, Chunking(SMALL))
    assert out.status == document.PROCESSED
    assert {o["source_version"] for o in out.occurrences} == {V1}
