"""The plan by doc-id bucket under TestPipeline, each composite on its own: SplitListing (the
listing as Arrow rows, its skipped objects and errors apart) and PlanDocs (the join with the
prior's summaries and failures)."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.typehints.decorators import TypeCheckError

from chunkmill import ids
from chunkmill.items import KEEP, REMOVE, ListingError, PriorError, Skipped, SourceFile
from chunkmill.transforms import doc_plan, prior, sources, storage
from chunkmill.transforms.counts import finish_counts
from tests.helpers import SMALL, manifest_rows, paragraphs, write_prior


def _listed_rows(element):
    bucket, (tag, message) = element
    assert tag == doc_plan._LISTED
    rows = prior.from_ipc(message, doc_plan.LISTING).to_pylist()
    assert {prior.doc_bucket(r["doc_id"]) for r in rows} == {bucket}
    return [(r["doc_id"], r["uri"], r["size_bytes"], r["version"]) for r in rows]


def test_split_listing_batches_documents_and_sets_aside_skips_and_errors_once():
    failed = ListingError("/c/locked", storage.LIST_FAILED, "permission denied")
    skipped = Skipped("/c/movie.mp4", "not_text")
    files = [SourceFile("/c/a.md", 3, "v1"), SourceFile("/c/b.md", 5), skipped, skipped]
    files += [failed, failed]  # two patterns met the same folder
    hold = sources.ListingHold()  # as ListFiles sends its documents: by bucket
    files += [*hold.add(SourceFile("/c/c.md", 7, "v3")), *hold.release()]
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(files) | doc_plan.SplitListing()
        assert_that(
            out["listed"] | beam.FlatMap(_listed_rows),
            equal_to(
                [
                    (ids.doc_id("/c/a.md"), "/c/a.md", 3, "v1"),
                    (ids.doc_id("/c/b.md"), "/c/b.md", 5, None),
                    (ids.doc_id("/c/c.md"), "/c/c.md", 7, "v3"),
                ]
            ),
            label="Listed",
        )
        assert_that(out["list_errors"], equal_to([tuple(failed)]), label="ListErrors")
        assert_that(
            out["error_rows"] | beam.Map(lambda r: (r["source_uri"], r["stage"], r["reason"])),
            equal_to([("/c/locked", "list", storage.LIST_FAILED)]),
            label="ErrorRows",
        )
        assert_that(
            out["counts"],
            equal_to(
                [
                    ("docs_skipped", 1),
                    ("skipped:not_text", 1),
                    ("listing_errors", 1),
                    (f"listing_error:{storage.LIST_FAILED}", 1),
                ]
            ),
            label="Counts",
        )


def test_split_listing_refuses_what_is_not_a_listing_when_the_graph_is_built():
    p = TestPipeline(runner="FnApiRunner")
    with pytest.raises(TypeCheckError, match="SplitListing"):
        _ = p | beam.Create(["/c/a.md"]) | "SplitListing" >> doc_plan.SplitListing()


OLD = {
    "/c/same.md": paragraphs("keep", "these"),
    "/c/edited.md": paragraphs("alpha", "beta"),
    "/c/deleted.md": paragraphs("gone"),
    "/c/locked/hidden.md": paragraphs("hidden"),
}


def _listing(files: list[SourceFile]) -> list[tuple[str, tuple[int, bytes]]]:
    table = pa.table(
        {
            "doc_id": [ids.doc_id(f.uri) for f in files],
            "uri": [f.uri for f in files],
            "size_bytes": [f.size_bytes for f in files],
            "version": [f.version for f in files],
        },
        schema=doc_plan.LISTING,
    )
    return [(b, (doc_plan._LISTED, m)) for b, m in prior.by_bucket(table, "doc_id")]


def _summaries(parts) -> list[tuple[str, tuple[int, tuple[str, bytes]]]]:
    read = prior.SummariseParts()
    return [
        e
        for part in parts
        for e in read.process(part)
        if not isinstance(e, beam.pvalue.TaggedOutput)
    ]


def _kept_docs(element):
    part, value = element
    if isinstance(value, bytes):
        return [(d, KEEP) for d in prior.from_ipc(value, prior.KEPT_DOCS)["doc_id"].to_pylist()]
    return []


def _verdicts(element):
    part, value = element
    return [] if isinstance(value, bytes) else [(v[0], v[1]) for v in value]


# Parts of two rows: edited.md's rows lie in two parts (a document's state is then its parts'
# summaries folded); parts of many rows: every document's rows lie in one.
@pytest.mark.parametrize(("row_group_rows", "edited_parts"), [(2, 2), (1000, 1)])
def test_plan_docs_decides_unchanged_documents_in_the_join_and_sends_the_rest_as_work(
    tmp_path, row_group_rows, edited_parts
):
    rows = [
        {**r, "source_version": "v1"}
        for uri, data in sorted(OLD.items())
        for r in manifest_rows(uri, data)
    ]
    parts = write_prior(rows, str(tmp_path), row_group_rows=row_group_rows)
    listed = [
        SourceFile("/c/same.md", 9, "v1"),  # unchanged by its listing: carried over
        SourceFile("/c/edited.md", 9, "v2"),  # work
        SourceFile("/c/new.md", 9, "v1"),  # work
        SourceFile("/c/flaky.md", 9, "v1"),  # work, with its prior failure
    ]  # deleted.md is gone; locked/hidden.md lies under a folder that failed to list
    failure = PriorError("v1", "key", "extract", "corrupt", "bad bytes", None)
    with TestPipeline(runner="FnApiRunner") as p:
        out = {
            "listed": p | "Listed" >> beam.Create(_listing(listed)),
            "list_errors": p
            | "ListErrors" >> beam.Create([("/c/locked", storage.LIST_FAILED, "denied")]),
            "summaries": p | "Summaries" >> beam.Create(_summaries(parts)),
            "prior_errors": p
            | "PriorErrors" >> beam.Create([(ids.doc_id("/c/flaky.md"), failure)]),
        } | doc_plan.PlanDocs(SMALL.fingerprint)
        work = out["work"] | beam.Map(lambda e: doc_plan.work_item(*e))
        assert_that(
            work | beam.Map(lambda w: (w.uri, w.version, len(w.prior), w.prior_error)),
            equal_to(
                [
                    ("/c/edited.md", "v2", edited_parts, None),
                    ("/c/new.md", "v1", 0, None),
                    ("/c/flaky.md", "v1", 0, failure),
                ]
            ),
            label="Work",
        )
        assert_that(
            out["verdicts"] | "Kept" >> beam.FlatMap(_kept_docs) | beam.Distinct(),
            equal_to([(ids.doc_id("/c/same.md"), KEEP)]),
            label="KeptInTheJoin",
        )
        assert_that(
            out["verdicts"] | "Verdicts" >> beam.FlatMap(_verdicts) | "Once" >> beam.Distinct(),
            equal_to(
                [(ids.doc_id("/c/deleted.md"), REMOVE), (ids.doc_id("/c/locked/hidden.md"), KEEP)]
            ),
            label="Verdicts",
        )
        counts = (
            out["counts"] | beam.combiners.ToList() | beam.Map(lambda c: finish_counts(dict_sum(c)))
        )
        assert_that(
            counts
            | beam.Map(
                lambda c: {
                    k: c[k]
                    for k in (
                        "docs_listed",
                        "docs_carried_over",
                        "docs_prior",
                        "docs_removed",
                        "docs_kept_unlisted",
                    )
                }
            ),
            equal_to(
                [
                    {
                        "docs_listed": 4,
                        "docs_carried_over": 1,
                        "docs_prior": 4,
                        "docs_removed": 1,
                        "docs_kept_unlisted": 1,
                    }
                ]
            ),
            label="Counts",
        )


def dict_sum(pairs: list[tuple[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for name, n in pairs:
        total[name] = total.get(name, 0) + n
    return total
