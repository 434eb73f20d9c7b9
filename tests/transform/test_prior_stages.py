"""The prior manifest's two composites under TestPipeline, each on its own: SummarisePrior
(a summary per document and part, and the part's hash counts) and ApplyPriorVerdicts (each
part's rows kept or removed by the verdicts on its documents)."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import ids
from chunkmill.items import REMOVE
from chunkmill.transforms import prior
from tests.helpers import manifest_rows, paragraphs, write_prior

OLD = {"/c/kept.md": paragraphs("keep", "these"), "/c/gone.md": paragraphs("gone", "keep")}


def _prior(tmp_path):
    rows = [r for uri, data in sorted(OLD.items()) for r in manifest_rows(uri, data)]
    return rows, write_prior(rows, str(tmp_path))  # one part


def test_summarise_prior_gives_each_document_its_rows_and_each_hash_its_count(tmp_path):
    rows, parts = _prior(tmp_path)
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(parts) | prior.SummarisePrior()
        assert_that(
            out["summaries"]
            | "Docs" >> beam.FlatMap(lambda e: prior.from_ipc(e[1], prior.SUMMARY).to_pylist())
            | beam.Map(lambda s: (s["doc_id"], s["part"], s["rows"])),
            equal_to(
                [
                    (ids.doc_id(u), parts[0].key, sum(r["source_uri"] == u for r in rows))
                    for u in OLD
                ]
            ),
            label="Summaries",
        )
        hashes = [r["chunk_hash"] for r in rows]
        assert_that(
            out["hashes"]
            | "Hashes"
            >> beam.FlatMap(lambda e: prior.from_ipc(e[1], prior.HASH_COUNTS).to_pylist())
            | beam.Map(lambda h: (h["chunk_hash"].hex(), h["rows"])),
            equal_to([(h, hashes.count(h)) for h in set(hashes)]),
            label="HashCounts",
        )


def test_apply_prior_verdicts_keeps_and_removes_rows_where_they_lie(tmp_path):
    rows, parts = _prior(tmp_path)
    (part,) = parts
    kept_doc = {"doc_id": ids.doc_id("/c/kept.md")}  # carried over: decided in the plan
    keep = prior.to_ipc(pa.RecordBatch.from_pylist([kept_doc], schema=prior.KEPT_DOCS))
    remove = ((ids.doc_id("/c/gone.md"), REMOVE, None, ()),)
    gone_rows = [r for r in rows if r["source_uri"] == "/c/gone.md"]
    kept_hashes = {r["chunk_hash"] for r in rows if r["source_uri"] == "/c/kept.md"}
    with TestPipeline(runner="FnApiRunner") as p:
        # From two steps, as the plan and the processing give them.
        out = (
            p | "FromPlan" >> beam.Create([(part.key, keep)]),
            p | "FromProcessing" >> beam.Create([(part.key, remove)]),
        ) | prior.ApplyPriorVerdicts()
        assert_that(
            out["kept"] | "Kept" >> beam.FlatMap(lambda t: t["source_uri"].to_pylist()),
            equal_to([r["source_uri"] for r in rows if r["source_uri"] == "/c/kept.md"]),
            label="Kept",
        )
        assert_that(
            out["removed"] | "Removed" >> beam.FlatMap(lambda t: t["chunk_id"].to_pylist()),
            equal_to([r["chunk_id"] for r in gone_rows]),
            label="Removed",
        )
        # The removed rows' hashes go to the hash join, counted; "keep" is still current.
        assert_that(
            out["gone"]
            | "Gone" >> beam.FlatMap(lambda e: prior.from_ipc(e[1], prior.HASH_COUNTS).to_pylist())
            | beam.Map(
                lambda h: (h["chunk_hash"].hex(), h["rows"], h["chunk_hash"].hex() in kept_hashes)
            ),
            equal_to([(r["chunk_hash"], 1, r["chunk_hash"] in kept_hashes) for r in gone_rows]),
            label="Gone",
        )
        assert_that(
            out["counts"] | beam.CombinePerKey(sum),
            equal_to(
                [("chunks_total", len(rows) - len(gone_rows)), ("chunks_removed", len(gone_rows))]
            ),
            label="Counts",
        )
