"""ChunkCorpus under TestPipeline: the diff against a prior manifest, case by case."""

from __future__ import annotations

import tempfile

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import ids, schema
from chunkmill.config import ChunkingConfig
from chunkmill.items import ListingError, Skipped, SourceFile
from chunkmill.transforms import doc_plan, storage
from chunkmill.transforms import prior as prior_module
from chunkmill.transforms.core import ChunkCorpus
from chunkmill.transforms.counts import COUNTS, VERDICTS
from tests.helpers import (
    SMALL,
    make_pdf,
    manifest_rows,
    paragraphs,
    table_rows,
    whole_tables,
    write_prior,
)


class FakeStore:
    """In-memory object store standing in for FileSystems (picklable, so workers get it)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def __call__(self, uri: str, version=None, max_bytes=None) -> bytes:
        try:
            return self.objects[uri]
        except KeyError:
            raise FileNotFoundError(uri) from None


OLD = {
    "/c/unchanged.md": paragraphs("keep", "these"),
    "/c/edited.md": paragraphs("alpha", "beta", "gamma"),
    "/c/deleted.md": paragraphs("gone", "away"),
    "/c/breaks.pdf": make_pdf(["was " * 20, "fine " * 20]),
}
NEW = {
    "/c/unchanged.md": OLD["/c/unchanged.md"],
    "/c/edited.md": paragraphs("alpha", "BETA", "gamma"),
    "/c/breaks.pdf": b"%PDF-1.4 now corrupt",
    "/c/added.md": paragraphs("fresh", "keep"),  # "keep" paragraph exists in the prior run
}


def run_corpus(
    store: dict[str, bytes],
    prior: list[dict],
    *,
    row_group_rows: int = 3,
    config: ChunkingConfig = SMALL,
    also_listed=(),
):
    """Runs ChunkCorpus with ``prior`` as a prior manifest file (small row groups, so
    documents span parts) and returns its tables as lists of rows (collected through a side
    channel). ``also_listed``: skipped objects and listing errors the listing adds."""
    with tempfile.TemporaryDirectory() as d, TestPipeline(runner="FnApiRunner") as p:
        files = p | "Files" >> beam.Create(
            [SourceFile(u, len(b)) for u, b in sorted(store.items())] + list(also_listed)
        )
        parts = write_prior(prior, d, row_group_rows=row_group_rows)
        prior_pc = p | "Prior" >> beam.Create(parts)
        out = {"files": files, "prior": prior_pc} | ChunkCorpus(
            config=config, read_bytes=FakeStore(store)
        )
        for name, pc in out.items():
            (
                pc
                | f"Collect{name}" >> beam.combiners.ToList()
                | f"Keep{name}" >> beam.Map(_keep, name=name)
            )
    return {
        name: rows if name == "counts" else table_rows(rows) for name, rows in _collected().items()
    }


_COLLECTED: dict[str, list] = {}


def _collected() -> dict[str, list]:
    """What ``_keep`` collected, each table with the files of its rows read back (the
    prior's kept and removed rows, written where they were decided)."""
    collected = {n: _COLLECTED.pop(n) for n in list(_COLLECTED)}
    for name, path in collected.pop("table_files", []):
        collected[name].append(pq.read_table(path))
    return collected


def _keep(rows, name):
    # FnApiRunner in-process mode runs DoFns in this process; collecting here is safe.
    _COLLECTED[name] = rows


@pytest.fixture(scope="module")
def prior():
    return [row for uri, data in sorted(OLD.items()) for row in manifest_rows(uri, data)]


@pytest.fixture(scope="module")
def tables(prior):
    return run_corpus(NEW, prior)


def by_uri(rows, uri):
    return [r for r in rows if r["source_uri"] == uri]


def test_counts_account_for_every_listed_document(tables):
    (counts,) = tables["counts"]
    assert counts["docs_listed"] == 4
    assert counts["docs_processed"] == 2  # edited + added
    assert counts["docs_carried_over"] == 1
    assert counts["docs_failed"] == 1
    assert counts["failed_by_reason"] == {"corrupt": 1}
    assert counts["docs_listed"] == (
        counts["docs_processed"] + counts["docs_carried_over"] + counts["docs_failed"]
    )
    assert counts["docs_removed"] == 1
    assert counts["chunks_to_embed"] == len(tables["chunks"])
    assert counts["chunks_removed"] == len(tables["removed"])
    assert counts["chunks_total"] == len(tables["manifest"])
    assert counts["tokens_to_embed"] == sum(r["token_count"] for r in tables["chunks"])


def test_unchanged_document_carries_over_its_prior_rows(tables, prior):
    rows = by_uri(tables["manifest"], "/c/unchanged.md")
    expected = [{**r, "is_new": False} for r in by_uri(prior, "/c/unchanged.md")]
    assert sorted(rows, key=lambda r: r["chunk_id"]) == sorted(
        expected, key=lambda r: r["chunk_id"]
    )
    assert by_uri(tables["chunks"], "/c/unchanged.md") == []


def test_edited_document_only_its_changed_chunk_is_new(tables, prior):
    rows = by_uri(tables["manifest"], "/c/edited.md")
    new = [r for r in rows if r["is_new"]]
    assert (
        len(new) == 1
        and "BETA" in NEW["/c/edited.md"].decode()[new[0]["char_start"] : new[0]["char_end"]]
    )
    prior_ids = {r["chunk_id"] for r in by_uri(prior, "/c/edited.md")}
    assert {r["chunk_id"] for r in rows if not r["is_new"]} <= prior_ids
    removed = by_uri(tables["removed"], "/c/edited.md")
    assert [r["removed_reason"] for r in removed] == [schema.DOCUMENT_CHANGED]


def test_deleted_document_is_removed_whole(tables, prior):
    removed = by_uri(tables["removed"], "/c/deleted.md")
    assert sorted(r["chunk_id"] for r in removed) == sorted(
        r["chunk_id"] for r in by_uri(prior, "/c/deleted.md")
    )
    assert {r["removed_reason"] for r in removed} == {schema.DOCUMENT_REMOVED}
    assert by_uri(tables["manifest"], "/c/deleted.md") == []


def test_failed_document_keeps_prior_rows_and_removes_nothing(tables, prior):
    (error,) = tables["errors"]
    assert (error["source_uri"], error["reason"], error["stage"]) == (
        "/c/breaks.pdf",
        "corrupt",
        "extract",
    )
    kept = by_uri(tables["manifest"], "/c/breaks.pdf")
    assert sorted(r["chunk_id"] for r in kept) == sorted(
        r["chunk_id"] for r in by_uri(prior, "/c/breaks.pdf")
    )
    assert by_uri(tables["removed"], "/c/breaks.pdf") == []


def test_new_document_only_unseen_hashes_go_to_chunks(tables, prior):
    rows = by_uri(tables["manifest"], "/c/added.md")
    prior_hashes = {r["chunk_hash"] for r in prior}
    for r in rows:
        assert r["is_new"] == (r["chunk_hash"] not in prior_hashes)
    assert any(not r["is_new"] for r in rows), "the 'keep' paragraph was seen in the prior run"
    # chunks/ holds exactly the hashes the prior manifest lacks, once each.
    new_hashes = {r["chunk_hash"] for r in tables["manifest"] if r["is_new"]}
    assert sorted(r["chunk_hash"] for r in tables["chunks"]) == sorted(new_hashes)


def test_tables_match_their_schemas(tables):
    for name in ("manifest", "removed", "errors"):
        for row in tables[name]:
            assert set(row) >= set(schema.TABLES[name].names), name
    for row in tables["chunks"]:
        assert row["text"] and ids.chunk_hash(row["text"]) == row["chunk_hash"]


def test_duplicate_content_across_documents_is_embedded_once():
    store = {"/c/one.md": paragraphs("twin", "copy"), "/c/two.md": paragraphs("twin", "copy")}
    out = run_corpus(store, [])
    assert len(out["manifest"]) == 2 * len(out["chunks"])
    # The representative occurrence is the smallest chunk_id, whatever the grouping order.
    for chunk in out["chunks"]:
        same = [r["chunk_id"] for r in out["manifest"] if r["chunk_hash"] == chunk["chunk_hash"]]
        assert chunk["chunk_id"] == min(same)


def test_an_object_listed_twice_is_one_document():
    """Two patterns matching one object list it twice; the join by doc_id keeps one."""
    data = paragraphs("once", "only")
    with TestPipeline(runner="FnApiRunner") as p:
        files = p | beam.Create([SourceFile("/c/a.md", len(data), "v1")] * 2)
        out = {"files": files, "prior": p | "NoPrior" >> beam.Create([])} | ChunkCorpus(
            config=SMALL, read_bytes=FakeStore({"/c/a.md": data})
        )
        assert_that(
            out["counts"] | beam.Map(lambda c: (c["docs_listed"], c["docs_processed"])),
            equal_to([(1, 1)]),
        )
        assert_that(
            whole_tables(out, "manifest") | beam.FlatMap(lambda t: t["chunk_index"].to_pylist()),
            equal_to([0, 1]),
            label="ManifestOnce",
        )


def test_unreadable_document_is_a_read_failed_error():
    class Vanishing(FakeStore):
        def __call__(self, uri, version=None, max_bytes=None):
            raise FileNotFoundError(uri)

    with TestPipeline(runner="FnApiRunner") as p:
        files = p | beam.Create([SourceFile("/c/x.md", 10)])
        prior = p | "NoPrior" >> beam.Create([])
        out = {"files": files, "prior": prior} | ChunkCorpus(config=SMALL, read_bytes=Vanishing({}))
        assert_that(
            out["errors"]
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Map(lambda r: (r["source_uri"], r["stage"], r["reason"])),
            equal_to([("/c/x.md", "read", "read_failed")]),
        )


class ReadNothing:
    """A store that fails the test if anything is read from it."""

    def __call__(self, uri: str, version=None, max_bytes=None) -> bytes:
        raise AssertionError(f"{uri} was read")


def test_documents_whose_listing_version_is_unchanged_are_not_read(prior, tmp_path):
    uri = "/c/unchanged.md"
    versioned = [{**r, "source_version": "v1"} for r in prior if r["source_uri"] == uri]
    parts = write_prior(versioned, str(tmp_path))
    with TestPipeline(runner="FnApiRunner") as p:
        files = p | "Files" >> beam.Create([SourceFile(uri, len(OLD[uri]), "v1")])
        out = {"files": files, "prior": p | "Prior" >> beam.Create(parts)} | ChunkCorpus(
            config=SMALL, read_bytes=ReadNothing()
        )
        assert_that(
            out["counts"] | beam.Map(lambda c: (c["docs_read"], c["docs_carried_over"])),
            equal_to([(0, 1)]),
        )
        assert_that(
            whole_tables(out, "manifest")
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Map(lambda r: (r["chunk_id"], r["is_new"])),
            equal_to([(r["chunk_id"], False) for r in versioned]),
            label="Manifest",
        )


def test_chunks_over_the_model_window_are_counted():
    """all-MiniLM-L6-v2 reads 256 tokens: the chunks to embed longer than that (asked for
    with max_embed_tokens) are counted where the counts are gathered, and only those."""
    config = ChunkingConfig.create(
        "paragraph",
        tokenizer="all-minilm-l6-v2",
        max_tokens=400,
        overlap_tokens=0,
        max_embed_tokens=400,
    )
    words = " ".join(f"word{i}" for i in range(150))  # about 3 tokens a word
    store = {
        "/c/long.md": "\n\n".join([words, words.upper(), "short one"]).encode(),
        "/c/short.md": b"just a few words here, well under the window",
    }
    tables = run_corpus(store, [], config=config)
    (counts,) = tables["counts"]
    sizes = [r["token_count"] for r in tables["chunks"]]
    over = sum(n > 256 for n in sizes)
    assert 0 < over < len(sizes)
    assert counts["chunks_over_model_window"] == over


def test_no_model_window_is_known_for_chars4(tables):
    (counts,) = tables["counts"]
    assert counts["chunks_over_model_window"] == 0


SIGNED = "https://b.s3.amazonaws.com/c/s.md?X-Amz-Date={date}&X-Amz-Signature=SENTINEL{sig}"


class QuotingStore(FakeStore):
    """A store whose failures quote the URI, as HTTP clients' exceptions do."""

    def __call__(self, uri: str, version=None, max_bytes=None) -> bytes:
        if uri.endswith("fail"):
            raise PermissionError(f"403 Forbidden for url: {uri}")
        return super().__call__(uri)


def test_a_signed_url_is_known_by_its_redacted_uri_and_a_new_signature_is_the_same_doc(
    tmp_path,
):
    data = paragraphs("signed", "content")
    first = SIGNED.format(date="20260101", sig="aaa")
    rotated = SIGNED.format(date="20260102", sig="bbb")
    failing = SIGNED.format(date="20260102", sig="ccc") + "&x=fail"
    redacted = "https://b.s3.amazonaws.com/c/s.md?X-Amz-Date=***&X-Amz-Signature=***"

    prior_rows = [
        {**r, "is_new": True} for r in run_corpus({first: data}, [], row_group_rows=100)["manifest"]
    ]
    assert {r["source_uri"] for r in prior_rows} == {redacted}
    assert {r["doc_id"] for r in prior_rows} == {ids.doc_id(redacted)}

    parts = write_prior(prior_rows, str(tmp_path))
    with TestPipeline(runner="FnApiRunner") as p:
        files = p | "Files" >> beam.Create(
            [SourceFile(rotated, len(data)), SourceFile(failing, 10)]
        )
        out = {"files": files, "prior": p | "Prior" >> beam.Create(parts)} | ChunkCorpus(
            config=SMALL, read_bytes=QuotingStore({rotated: data})
        )
        for name, pc in out.items():
            (
                pc
                | f"Collect{name}" >> beam.combiners.ToList()
                | f"Keep{name}" >> beam.Map(_keep, name=name)
            )
    tables = _collected()
    (counts,) = tables.pop("counts")
    # Same bytes under a new signature: the same document, carried over, nothing to embed.
    assert counts["docs_carried_over"] == 1 and counts["docs_processed"] == 0
    assert counts["chunks_to_embed"] == 0 and counts["docs_removed"] == 0
    (error,) = table_rows(tables["errors"])
    assert error["reason"] == "read_failed"
    assert (
        "403 Forbidden for url: https://b.s3.amazonaws.com/c/s.md?X-Amz-Date=***"
        in (error["message"])
    )
    for name, t in tables.items():
        assert "SENTINEL" not in str(table_rows(t)), name


def test_a_folder_that_failed_to_list_removes_nothing_under_it():
    """A document missing from the listing because its folder could not be listed keeps its
    rows; one missing from a folder that was listed is removed. The failure is an errors/ row
    (stage list), skipped objects are counted apart from listed documents."""
    old = {
        "/c/top.md": paragraphs("top", "level"),
        "/c/sub/deep/a.md": paragraphs("under", "failed"),
        "/c/subway.md": paragraphs("sibling", "named", "alike"),  # not under /c/sub/
    }
    prior = [row for uri, data in sorted(old.items()) for row in manifest_rows(uri, data)]
    tables = run_corpus(
        {"/c/top.md": old["/c/top.md"]},
        prior,
        also_listed=[
            ListingError("/c/sub", storage.LIST_FAILED, "PermissionError: denied"),
            ListingError("/c/sub", storage.LIST_FAILED, "PermissionError: denied"),  # 2 patterns
            Skipped("/c/fig.svg", storage.UNSUPPORTED_FORMAT),
        ],
    )
    kept = by_uri(tables["manifest"], "/c/sub/deep/a.md")
    assert sorted(r["chunk_id"] for r in kept) == sorted(
        r["chunk_id"] for r in by_uri(prior, "/c/sub/deep/a.md")
    )
    assert by_uri(tables["removed"], "/c/sub/deep/a.md") == []
    assert {r["source_uri"] for r in tables["removed"]} == {"/c/subway.md"}
    assert [(e["source_uri"], e["stage"], e["reason"]) for e in tables["errors"]] == [
        ("/c/sub", "list", storage.LIST_FAILED)
    ]
    (counts,) = tables["counts"]
    assert counts["docs_kept_unlisted"] == 1
    assert counts["docs_removed"] == 1
    assert counts["docs_skipped"] == 1
    assert counts["skipped_by_reason"] == {storage.UNSUPPORTED_FORMAT: 1}
    assert counts["listing_errors_by_reason"] == {storage.LIST_FAILED: 1}
    assert counts["docs_listed"] == 1 == counts["docs_carried_over"]


def test_a_document_that_failed_at_the_listed_version_is_not_read_again(tmp_path):
    """The prior errors table joins the listing: a failure at the listed version under the
    same attempt key is repeated unread (the store has no bytes for it: a read would be a
    read_failed error); one at another version, or a transient one, is read again."""
    from chunkmill import document
    from chunkmill.items import PriorError

    key = document.attempt_key(SMALL)
    known, rewritten, transient = "/c/known.pdf", "/c/rewritten.md", "/c/flaky.md"
    store = {rewritten: paragraphs("fixed"), transient: paragraphs("back")}
    was_good = manifest_rows(known, make_pdf(["was " * 20]))  # before it broke
    versioned = [{**r, "source_version": "v0"} for r in was_good]
    errors = [
        (ids.doc_id(known), PriorError("v1", key, "extract", "corrupt", "bad xref", "s1")),
        (ids.doc_id(rewritten), PriorError("v1", key, "extract", "empty", "blank", "s2")),
        (ids.doc_id(transient), PriorError("v1", key, "read", "read_failed", "503", None)),
        (ids.doc_id("/c/gone.md"), PriorError("v1", key, "extract", "binary", "PNG", None)),
    ]
    listing = [SourceFile(known, 50, "v1"), SourceFile(rewritten, 9, "v2")]
    listing.append(SourceFile(transient, 9, "v1"))
    with TestPipeline(runner="FnApiRunner") as p:
        inputs = {
            "files": p | "Files" >> beam.Create(listing),
            "prior": p | "Prior" >> beam.Create(write_prior(versioned, str(tmp_path))),
            "prior_errors": p | "PriorErrors" >> beam.Create(errors),
        }
        out = inputs | ChunkCorpus(config=SMALL, read_bytes=FakeStore(store))
        assert_that(
            out["counts"]
            | beam.Map(
                lambda c: (
                    c["docs_read"],
                    c["docs_processed"],
                    c["docs_failed"],
                    c["docs_failed_not_retried"],
                    c["failed_by_reason"],
                )
            ),
            equal_to([(2, 2, 1, 1, {"corrupt": 1})]),
        )
        assert_that(
            out["errors"]
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Map(
                lambda r: (
                    r["source_uri"],
                    r["reason"],
                    r["message"],
                    r["content_sha256"],
                    r["source_version"],
                    r["attempt_key"],
                    r["attempted"],
                )
            ),
            equal_to([(known, "corrupt", "bad xref", "s1", "v1", key, False)]),
            label="Errors",
        )
        assert_that(  # the document's rows from before it broke are kept, as by any failure
            whole_tables(out, "manifest")
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Filter(lambda r: r["source_uri"] == known)
            | beam.Map(lambda r: (r["chunk_id"], r["source_version"])),
            equal_to([(r["chunk_id"], "v0") for r in versioned]),
            label="KeptRows",
        )


def test_a_document_unchanged_by_its_listing_is_no_element_past_the_join(prior, tmp_path):
    """The join by doc-id bucket decides the carried-over documents in Arrow: they leave it
    as one array of doc_ids per part, not as work; only a document to read is an element."""
    versioned = [{**r, "source_version": "v1"} for r in prior]
    parts = write_prior(versioned, str(tmp_path), row_group_rows=3)
    listed = [
        SourceFile("/c/unchanged.md", 9, "v1"),
        SourceFile("/c/edited.md", 9, "v2"),
        SourceFile("/c/breaks.pdf", 9, "v1"),
        SourceFile("/c/added.md", 9, "v1"),
    ]  # /c/deleted.md is gone
    batcher = doc_plan._BatchListing()
    batcher.start_bundle()
    assert list(batcher.process(SourceFile("/c/x.md", 1))) == []  # held, not an element
    batcher.start_bundle()
    for f in listed:
        assert list(batcher.process(f)) == []
    values = [wv.value[1] for wv in batcher.finish_bundle()]
    read = prior_module.SummariseParts()
    values += [
        e[1]  # (doc_plan._SUMMARY, message)
        for part in parts
        for e in read.process(part)
        if not isinstance(e, beam.pvalue.TaggedOutput)  # its hashes go to the hash join
    ]
    plan = doc_plan._PlanBucket(SMALL.fingerprint)
    plan.start_bundle()
    out = list(plan.process(("any", values)))
    out += [
        beam.pvalue.TaggedOutput(e.tag, e.value.value)
        if isinstance(e, beam.pvalue.TaggedOutput)
        else e.value
        for e in plan.finish_bundle()
    ]
    work = sorted(e[1][0] for e in out if not isinstance(e, beam.pvalue.TaggedOutput))
    assert work == ["/c/added.md", "/c/edited.md"]
    tagged = [e for e in out if isinstance(e, beam.pvalue.TaggedOutput)]
    counts = dict(e.value for e in tagged if e.tag == COUNTS)
    assert counts["docs_listed"] == 4 and counts["docs_carried_over"] == 2
    assert counts["docs_removed"] == 1 and counts["docs_prior"] == 4
    kept = {
        doc
        for e in tagged
        if e.tag == VERDICTS and isinstance(e.value[1], bytes)
        for doc in prior_module.from_ipc(e.value[1], prior_module.KEPT_DOCS)["doc_id"].to_pylist()
    }
    assert kept == {ids.doc_id("/c/unchanged.md"), ids.doc_id("/c/breaks.pdf")}
    removed = {
        v[0]
        for e in tagged
        if e.tag == VERDICTS and not isinstance(e.value[1], bytes)
        for v in e.value[1]
    }
    assert removed == {ids.doc_id("/c/deleted.md")}
