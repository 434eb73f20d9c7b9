"""ChunkCorpus under TestPipeline: the diff against a prior manifest, case by case."""

from __future__ import annotations

import tempfile

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from tests.helpers import SMALL, make_pdf, manifest_rows, paragraphs, table_rows, write_prior
from transforms import ids, schema
from transforms.core import ChunkCorpus
from transforms.types import SourceFile


class FakeStore:
    """In-memory object store standing in for FileSystems (picklable, so workers get it)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def __call__(self, uri: str) -> bytes:
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


def run_corpus(store: dict[str, bytes], prior: list[dict], *, row_group_rows: int = 3):
    """Runs ChunkCorpus with ``prior`` as a prior manifest file (small row groups, so
    documents span parts) and returns its tables as lists of rows (collected through a side
    channel)."""
    with tempfile.TemporaryDirectory() as d, TestPipeline(runner="FnApiRunner") as p:
        files = p | "Files" >> beam.Create(
            [SourceFile(u, len(b)) for u, b in sorted(store.items())]
        )
        parts = write_prior(prior, d, row_group_rows=row_group_rows)
        prior_pc = p | "Prior" >> beam.Create(parts)
        out = {"files": files, "prior": prior_pc} | ChunkCorpus(
            config=SMALL, read_bytes=FakeStore(store)
        )
        for name, pc in out.items():
            (
                pc
                | f"Collect{name}" >> beam.combiners.ToList()
                | f"Keep{name}" >> beam.Map(_keep, name=name)
            )
    return {
        name: rows if name == "counts" else table_rows(rows)
        for name, rows in ((n, _COLLECTED.pop(n)) for n in list(_COLLECTED))
    }


_COLLECTED: dict[str, list] = {}


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
            out["manifest"] | beam.FlatMap(lambda t: t["chunk_index"].to_pylist()),
            equal_to([0, 1]),
            label="ManifestOnce",
        )


def test_unreadable_document_is_a_read_failed_error():
    class Vanishing(FakeStore):
        def __call__(self, uri):
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

    def __call__(self, uri: str) -> bytes:
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
            out["manifest"]
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Map(lambda r: (r["chunk_id"], r["is_new"])),
            equal_to([(r["chunk_id"], False) for r in versioned]),
            label="Manifest",
        )


def test_a_document_that_failed_at_the_listed_version_is_not_read_again(tmp_path):
    """The prior errors table joins the listing: a failure at the listed version under the
    same attempt key is repeated unread (the store has no bytes for it: a read would be a
    read_failed error); one at another version, or a transient one, is read again."""
    from transforms import document
    from transforms.types import PriorError

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
            out["manifest"]
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Filter(lambda r: r["source_uri"] == known)
            | beam.Map(lambda r: (r["chunk_id"], r["source_version"])),
            equal_to([(r["chunk_id"], "v0") for r in versioned]),
            label="KeptRows",
        )
