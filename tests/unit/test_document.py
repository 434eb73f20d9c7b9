"""process_document: the fate of one document, without Beam."""

from __future__ import annotations

import pytest

from chunkmill import carryover, document, ids, schema
from chunkmill.chunking.fitting import FittedChunker
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.items import KEEP, REPLACE, Verdict, WorkItem
from chunkmill.transforms import prior
from tests.helpers import SMALL, make_pdf, manifest_rows, manifest_table, paragraphs, summarise

URI = "/corpus/a.md"


def item(prior=(), data=b"") -> WorkItem:
    return WorkItem(ids.doc_id(URI), URI, len(data), summarise(list(prior)))


def applied(rows, out: document.DocOutcome, uri: str = URI):
    """The prior rows' fate under the outcome's verdict: (kept rows, removed rows)."""
    verdict = out.verdict(ids.doc_id(uri))
    kept, removed, _ = prior.apply_verdicts(manifest_table(rows), [verdict])
    return kept.to_pylist(), removed.to_pylist()


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
    # Column by column, as the chunks/ table's columns, in its order: what ProcessDocuments
    # makes its staged tables of.
    assert list(out.chunks) == schema.CHUNKS.names
    assert all(len(column) == len(out.occurrences) for column in out.chunks.values())


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
    assert out.occurrences == []
    assert out.verdict(ids.doc_id(URI)) == Verdict(ids.doc_id(URI), KEEP)
    kept, removed = applied(prior, out)
    assert kept == [{**r, "is_new": False} for r in prior] and removed == []


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
    assert out.verdict(ids.doc_id(URI)).kind == REPLACE
    kept, removed = applied(prior, out)
    assert kept == []  # superseded by this run's occurrences
    assert [r["removed_reason"] for r in removed] == [schema.DOCUMENT_CHANGED]
    assert [r["chunk_id"] for r in removed] == list(old_ids - new_ids)


@pytest.mark.parametrize(
    ("uri", "data", "reason"),
    [
        ("/corpus/a.pdf", b"%PDF-1.7 truncated", "corrupt"),
        ("/corpus/a.txt", bytes(range(1, 256)) * 4, "undecodable"),
        # No text layer (a scan): a later release may read its images, so rows stay.
        ("/corpus/a.pdf", make_pdf([""]), "no_text"),
    ],
)
def test_failure_yields_one_error_and_keeps_prior_rows(uri, data, reason):
    good = make_pdf(["alpha " * 30, "beta " * 30]) if uri.endswith(".pdf") else paragraphs("a", "b")
    prior = manifest_rows(uri, good)
    doc = WorkItem(ids.doc_id(uri), uri, len(data), summarise(prior))
    out = document.process_document(doc, data, Chunking(SMALL))
    assert out.status == document.FAILED
    assert out.error["reason"] == reason and out.error["source_uri"] == uri
    assert "\n" not in out.error["message"]
    assert set(out.error) == set(schema.ERRORS.names)
    assert out.occurrences == []
    kept, removed = applied(prior, out, uri)
    assert [r["chunk_id"] for r in kept] == [r["chunk_id"] for r in prior] and removed == []


def _docx(*paragraphs: str) -> bytes:
    import io

    import docx

    document_ = docx.Document()
    for text in paragraphs:
        document_.add_paragraph(text)
    out = io.BytesIO()
    document_.save(out)
    return out.getvalue()


def _good(uri: str) -> bytes:
    """A version of ``uri`` with text, as the prior run chunked it."""
    if uri.endswith(".pdf"):
        return make_pdf(["alpha " * 30, "beta " * 30])
    if uri.endswith(".json"):
        return b'{"title": "alpha beta gamma", "body": "delta epsilon"}'
    if uri.endswith(".docx"):
        return _docx("alpha " * 30, "beta " * 30)
    return paragraphs("a", "b")


@pytest.mark.parametrize(
    ("uri", "data"),
    [
        ("/corpus/a.md", b""),  # truncated to 0 bytes
        ("/corpus/a.pdf", b""),  # 0 bytes, whatever the format
        ("/corpus/a.md", b" \n\t\n  \n"),
        ("/corpus/a.txt", "\u3000\n\u2003".encode()),  # Unicode spaces only
        ("/corpus/a.html", b"<html><body> <p>  </p> </body></html>"),
        ("/corpus/a.json", b"{}"),
    ],
)
def test_an_emptied_document_has_no_chunk_and_every_prior_row_is_removed(uri, data):
    prior = manifest_rows(uri, _good(uri))
    doc = WorkItem(ids.doc_id(uri), uri, len(data), summarise(prior))
    out = document.process_document(doc, data, Chunking(SMALL))
    assert (out.status, out.emptied, out.error, out.occurrences) == (
        document.PROCESSED,
        True,
        None,
        [],
    )
    kept, removed = applied(prior, out, uri)
    assert kept == []
    assert sorted(r["chunk_id"] for r in removed) == sorted(r["chunk_id"] for r in prior)
    assert {r["removed_reason"] for r in removed} == {schema.DOCUMENT_EMPTIED}


def test_a_docx_without_text_is_no_text_and_keeps_its_rows():
    uri = "/corpus/a.docx"
    prior = manifest_rows(uri, _good(uri))
    data = _docx()
    doc = WorkItem(ids.doc_id(uri), uri, len(data), summarise(prior))
    out = document.process_document(doc, data, Chunking(SMALL))
    assert out.status == document.FAILED and out.error["reason"] == "no_text"
    kept, removed = applied(prior, out, uri)
    assert len(kept) == len(prior) and removed == []


def test_chunker_crash_is_an_error_row_not_an_exception():
    class Boom:
        name = "boom"

        def params(self):
            return {}

        def split(self, text):
            raise RuntimeError("bad\nthing")

    class BoomChunking(Chunking):
        def chunker_for(self, fmt, uri=""):
            return FittedChunker(Boom(), max_embed_tokens=512, min_chunk_tokens=0)

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
    return WorkItem(ids.doc_id(URI), URI, len(data), summarise(prior), version=version)


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
    state = carryover.PriorState.of_parts(it.prior)
    assert carryover.unchanged_by_listing(it.version, state, SMALL.fingerprint) is unchanged


def test_same_bytes_under_new_listing_metadata_carry_over_with_the_new_version():
    it = _versioned(V2)
    data = paragraphs("alpha", "beta", "gamma")
    out = document.process_document(it, data, Chunking(SMALL))
    assert out.status == document.CARRIED_OVER
    rows = [{**r, "source_version": V1} for r in manifest_rows(URI, data)]
    kept, removed = applied(rows, out)
    assert {r["source_version"] for r in kept} == {V2}
    assert [r["chunk_id"] for r in kept] == [r["chunk_id"] for r in rows] and removed == []


def test_new_rows_record_the_listing_version():
    data = paragraphs("fresh")
    it = WorkItem(ids.doc_id(URI), URI, len(data), (), version=V1)
    out = document.process_document(it, data, Chunking(SMALL))
    assert out.status == document.PROCESSED
    assert {o["source_version"] for o in out.occurrences} == {V1}


SECTIONS = ChunkingConfig.create("section", max_tokens=512)


def _isolated_run(data: bytes, limits, uri: str = URI, config: ChunkingConfig = SMALL):
    from chunkmill.isolation import Extractor

    chunking = Chunking(config)
    extractor = Extractor(limits)
    try:
        in_child = document.ChunkInChild(extractor.call, config)
        doc = WorkItem(ids.doc_id(uri), uri, len(data))
        out = document.process_document(doc, data, chunking, extractor, in_child)
        # The same child (or its replacement) goes on with the next document.
        after = document.process_document(
            item(data=paragraphs("next")), paragraphs("next"), chunking, extractor, in_child
        )
    finally:
        extractor.close()
    assert after.status == document.PROCESSED
    return out


@pytest.mark.parametrize(
    ("memory_mb", "timeout", "reason"), [(128, 120.0, "memory"), (4096, 0.5, "timeout")]
)
def test_chunking_that_blows_a_budget_costs_that_document_only(memory_mb, timeout, reason):
    from chunkmill.config import Limits

    data = b"# h\n" * 1_000_000  # 4 MB: a million one-heading sections
    limits = Limits(memory_mb=memory_mb, timeout_seconds=timeout)
    out = _isolated_run(data, limits, config=SECTIONS)
    assert out.status == document.FAILED
    assert (out.error["stage"], out.error["reason"]) == ("chunk", reason)
    assert out.error["content_sha256"] == ids.sha256_hex(data)


def test_a_long_document_gets_the_whole_memory_budget_in_the_child():
    # What a request runs is imported before the child's limit is set, so a document that
    # needs less than the budget is chunked, even the first one in a fresh child.
    from chunkmill.config import Limits

    data = paragraphs(*(f"word{i} " * 30 for i in range(1500)))
    assert len(data) > document.CHUNK_IN_CHILD_ABOVE
    out = _isolated_run(data, Limits(memory_mb=48), config=SECTIONS)
    assert out.status == document.PROCESSED, out.error


@pytest.mark.parametrize("uri", ["/corpus/long.md", "/corpus/long.html"])
def test_a_long_document_chunked_in_the_child_gives_the_same_rows(uri):
    from chunkmill.config import Limits

    body = paragraphs(*(f"word{i} " * 30 for i in range(2000))).decode()
    if uri.endswith(".html"):  # extracted in the child, then chunked there from its text
        body = f"<html><body><p>{body.replace(chr(10) * 2, '</p><p>')}</p></body></html>"
    data = body.encode()
    assert len(data) > document.CHUNK_IN_CHILD_ABOVE
    isolated = _isolated_run(data, Limits(), uri)
    doc = WorkItem(ids.doc_id(uri), uri, len(data))
    here = document.process_document(doc, data, Chunking(SMALL))
    assert isolated.status == here.status == document.PROCESSED
    assert isolated.occurrences == here.occurrences
