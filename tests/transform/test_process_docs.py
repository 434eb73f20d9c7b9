"""ProcessDocuments under TestPipeline, on its own: documents to read in, their chunk
occurrences staged (only hashes and ids sent on), verdicts on their prior rows, errors/ rows
and counts out."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import document, ids
from chunkmill.items import REPLACE, PriorError, WorkItem
from chunkmill.transforms import doc_plan, hash_join, prior, staging
from chunkmill.transforms.process_docs import ProcessDocuments
from tests.helpers import SMALL, manifest_rows, paragraphs, summarise
from tests.transform.test_core import FakeStore

STORE = {"/c/a.md": paragraphs("alpha", "beta"), "/c/edited.md": paragraphs("gamma")}
OLD_EDITED = paragraphs("gamma", "delta")


def _staged(element):
    """An occurrences element → its chunk ids, checked against the staged file they wait in."""
    bucket, (tag, (path, message)) = element
    assert tag == hash_join.CURRENT
    sent = hash_join.read_staged_ids(message)
    assert {prior.hash_bucket(h.hex()) for h in sent["chunk_hash"].to_pylist()} == {bucket}
    sent_ids = [chunk_id.hex() for chunk_id in sent["chunk_id"].to_pylist()]
    staged = set(staging.read(path)["chunk_id"].to_pylist())
    assert set(sent_ids) <= staged  # the text waits in the file
    return sent_ids


def _sum(pairs):
    total: dict[str, int] = {}
    for name, n in pairs:
        total[name] = total.get(name, 0) + n
    return {
        k: total.get(k, 0)
        for k in ("docs_read", "docs_processed", "docs_failed", "docs_failed_not_retried")
    }


def test_documents_are_read_chunked_staged_and_accounted_for(tmp_path):
    edited_prior = manifest_rows("/c/edited.md", OLD_EDITED)
    attempt = document.attempt_key(SMALL)
    known = PriorError("v1", attempt, "extract", "corrupt", "bad bytes", None)
    items = [
        WorkItem(ids.doc_id("/c/a.md"), "/c/a.md", len(STORE["/c/a.md"])),
        WorkItem(
            ids.doc_id("/c/edited.md"),
            "/c/edited.md",
            len(STORE["/c/edited.md"]),
            prior=summarise(edited_prior),
        ),
        WorkItem(ids.doc_id("/c/vanished.md"), "/c/vanished.md", 7),  # not in the store
        # Failed before at this version under the same attempt key: not read again.
        WorkItem(ids.doc_id("/c/bad.pdf"), "/c/bad.pdf", 9, version="v1", prior_error=known),
    ]
    expected_ids = [
        r["chunk_id"] for uri in ("/c/a.md", "/c/edited.md") for r in manifest_rows(uri, STORE[uri])
    ]
    with TestPipeline(runner="FnApiRunner") as p:
        out = (
            p
            | beam.Create([doc_plan.as_work(i) for i in items])
            | ProcessDocuments(
                config=SMALL, read_bytes=FakeStore(STORE), staged_folder=str(tmp_path)
            )
        )
        assert_that(
            out["occurrences"] | beam.FlatMap(_staged), equal_to(expected_ids), label="Staged"
        )
        assert_that(
            out["verdicts"] | beam.FlatMap(lambda e: [(e[0], v[0], v[1]) for v in e[1]]),
            equal_to(
                [
                    (
                        summarise(edited_prior)[0].part,
                        ids.doc_id("/c/edited.md"),
                        REPLACE,
                    )
                ]
            ),
            label="Verdicts",
        )
        assert_that(
            out["errors"] | beam.Map(lambda r: (r["source_uri"], r["reason"], r["attempted"])),
            equal_to([("/c/vanished.md", "read_failed", True), ("/c/bad.pdf", "corrupt", False)]),
            label="Errors",
        )
        assert_that(
            out["counts"] | beam.combiners.ToList() | beam.Map(_sum),
            equal_to(
                [
                    {
                        "docs_read": 3,
                        "docs_processed": 2,
                        "docs_failed": 2,
                        "docs_failed_not_retried": 1,
                    }
                ]
            ),
            label="Counts",
        )
