"""The core composite: listed files and the prior manifest in, every output table out.

I/O stays at the edges (``transforms.io``); ``ChunkCorpus`` takes PCollections and returns
PCollections, so a test feeds it with ``beam.Create``.

Both joins against the prior manifest are CoGroupByKey (it can hold hundreds of millions of
rows); there is no side input here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import document, ids, isolation, schema, storage
from transforms.config import Chunking, ChunkingConfig
from transforms.types import SourceFile, WorkItem

# One metrics namespace for the whole project.
METRICS_NAMESPACE = "chunkmill"

# Progress counters, with stable names in the one namespace so Dataflow's and Flink's UIs
# show them while a job runs: docs_listed and bytes_listed (the listing side of the join),
# docs_read and bytes_read, and docs_processed, docs_carried_over and docs_failed (their sum
# is the documents done).
_DOCS_LISTED = Metrics.counter(METRICS_NAMESPACE, "docs_listed")
_BYTES_LISTED = Metrics.counter(METRICS_NAMESPACE, "bytes_listed")
# The same figures for a local run's progress line (pipeline/progress.py). A bundle's counters
# reach the launching process only when the bundle's stage ends, but a process-wide metric
# cell is updated in place, so a thread of the launcher reads it live when the DoFns run in
# that process (DirectRunner/FnApiRunner in memory). Distributions, because only they can be
# process-wide and add up: count is documents, sum is bytes (or failures).
PROGRESS_LISTED = "progress_listed"  # one value per listed document: its size
PROGRESS_READ = "progress_read"  # one value per document read: its size
PROGRESS_DONE = "progress_done"  # one value per document done: 1 if it failed, else 0
_PROGRESS_LISTED = Metrics.distribution(METRICS_NAMESPACE, PROGRESS_LISTED, process_wide=True)
_PROGRESS_READ = Metrics.distribution(METRICS_NAMESPACE, PROGRESS_READ, process_wide=True)
_PROGRESS_DONE = Metrics.distribution(METRICS_NAMESPACE, PROGRESS_DONE, process_wide=True)

# Tags of multi-output steps.
_REMOVED = "removed"
_OCCURRENCES = "occurrences"
_CARRIED = "carried"
_ERRORS = "errors"
_COUNTS = "counts"
_CHUNKS = "chunks"

ReadBytes = Callable[[str], bytes]


# Reads a whole object from any store (local, gs://, s3://, fsspec), pinned to the version
# the listing saw where the store allows it (``transforms.storage.read_object``). Compression
# is never inferred from the name: a ``.gz`` document is bytes to extract, not a stream.
read_file = storage.ObjectReader()


def _key_listed(f: SourceFile) -> tuple[str, SourceFile]:
    _DOCS_LISTED.inc()
    _BYTES_LISTED.inc(f.size_bytes)
    _PROGRESS_LISTED.update(f.size_bytes)
    return ids.doc_id(f.uri), f


class _PlanDocs(beam.DoFn):
    """Joins the listing with the prior manifest by doc_id: a listed document becomes a
    WorkItem carrying its prior rows; a prior document no longer listed is removed whole."""

    def process(self, element: tuple[str, dict[str, Iterable[Any]]]):
        doc, grouped = element
        listed: list[SourceFile] = sorted(grouped["listed"], key=lambda f: f.uri)
        prior = sorted(grouped["prior"], key=lambda r: (r["chunk_index"], r["chunk_id"]))
        if listed:
            f = listed[0]
            yield WorkItem(
                doc_id=doc,
                uri=f.uri,
                size_bytes=f.size_bytes,
                prior=tuple(prior),
                version=f.version,
            )
            return
        if prior:
            yield beam.pvalue.TaggedOutput(_COUNTS, ("docs_removed", 1))
        for row in prior:
            yield beam.pvalue.TaggedOutput(
                _REMOVED,
                {**document.occurrence_fields(row), "removed_reason": schema.DOCUMENT_REMOVED},
            )


class _ProcessDocuments(beam.DoFn):
    def __init__(self, config: ChunkingConfig, read_bytes: ReadBytes) -> None:
        self._config = config
        self._read_bytes = read_bytes
        self._outcomes = {
            status: Metrics.counter(METRICS_NAMESPACE, f"docs_{status}")
            for status in (document.PROCESSED, document.CARRIED_OVER, document.FAILED)
        }
        self._read = Metrics.counter(METRICS_NAMESPACE, "docs_read")
        self._bytes_read = Metrics.counter(METRICS_NAMESPACE, "bytes_read")

    def setup(self) -> None:
        self._chunking = Chunking(self._config)
        # One long-lived parser child per DoFn instance (transforms/isolation.py).
        self._extractor = isolation.Extractor(
            self._config.limits, pdf_engine=self._config.pdf_engine
        )

    def teardown(self) -> None:
        self._extractor.close()

    def process(self, item: WorkItem):
        if document.is_unchanged_by_listing(item, self._config):
            # The nightly common case: nothing about the object changed, so not a byte of it
            # is read.
            carried = document.carried_rows(item.prior)
            outcome = document.DocOutcome(document.CARRIED_OVER, carried=carried)
        else:
            # Over --max-document-bytes is decided from the listing: the bytes are never read.
            too_large = document.too_large(item, self._config.limits.max_document_bytes)
            if too_large is not None:
                outcome = too_large
            else:
                self._read.inc()
                yield beam.pvalue.TaggedOutput(_COUNTS, ("docs_read", 1))
                outcome = self._read_and_process(item)
        self._outcomes[outcome.status].inc()
        _PROGRESS_DONE.update(int(outcome.status == document.FAILED))
        yield beam.pvalue.TaggedOutput(_COUNTS, (f"docs_{outcome.status}", 1))
        if outcome.error is not None:
            yield beam.pvalue.TaggedOutput(_COUNTS, (f"failed:{outcome.error['reason']}", 1))
            yield beam.pvalue.TaggedOutput(_ERRORS, outcome.error)
        for row in outcome.occurrences:
            yield beam.pvalue.TaggedOutput(_OCCURRENCES, (row["chunk_hash"], row))
        for row in outcome.carried:
            yield beam.pvalue.TaggedOutput(_CARRIED, row)
        for row in outcome.removed:
            yield beam.pvalue.TaggedOutput(_REMOVED, row)

    def _read_and_process(self, item: WorkItem) -> document.DocOutcome:
        try:
            if getattr(self._read_bytes, "pins_versions", False):
                data = self._read_bytes(item.uri, item.version)  # type: ignore[call-arg]
            else:
                data = self._read_bytes(item.uri)
        except storage.SourceVanished as e:  # deleted since the listing
            return document.failed(item, "read", storage.VANISHED, str(e))
        except storage.SourceChanged as e:  # overwritten since the listing: read next run
            return document.failed(item, "read", storage.CHANGED, str(e))
        except Exception as e:  # permission denied, network: one document's loss
            return document.failed(item, "read", "read_failed", f"{type(e).__name__}: {e}")
        self._bytes_read.inc(len(data))
        _PROGRESS_READ.update(len(data))
        return document.process_document(item, data, self._chunking, self._extractor)


class _MarkNew(beam.DoFn):
    """Joins this run's chunk occurrences with the prior manifest by chunk_hash.

    Every occurrence becomes a manifest row flagged ``is_new`` when the prior manifest lacks
    its hash; each such hash also yields exactly one chunks/ row (the occurrence with the
    smallest chunk_id, so the choice does not depend on grouping order). Both sides are
    streamed: a boilerplate paragraph in a million documents is never held in a list.
    """

    def process(self, element: tuple[str, dict[str, Iterable[Any]]]):
        _, grouped = element
        is_new = next(iter(grouped["prior"]), _ABSENT) is _ABSENT
        first: dict[str, Any] | None = None
        for row in grouped["current"]:
            yield {**document.occurrence_fields(row), "is_new": is_new}
            if is_new and (first is None or row["chunk_id"] < first["chunk_id"]):
                first = row
        if first is not None:
            yield beam.pvalue.TaggedOutput(_CHUNKS, first)


_ABSENT = object()


def _finish_counts(counts: dict[str, int]) -> dict[str, Any]:
    """The run report's counts: every key present, failures broken down by reason."""
    keys = (
        "docs_listed",
        "docs_read",
        "docs_processed",
        "docs_carried_over",
        "docs_failed",
        "docs_removed",
        "chunks_total",
        "chunks_new_occurrences",
        "chunks_to_embed",
        "chunks_removed",
        "tokens_to_embed",
    )
    out: dict[str, Any] = {k: int(counts.get(k, 0)) for k in keys}
    out["failed_by_reason"] = {
        k.split(":", 1)[1]: int(v) for k, v in sorted(counts.items()) if k.startswith("failed:")
    }
    return out


class ChunkCorpus(beam.PTransform):
    """``{'files': PCollection[SourceFile], 'prior': PCollection[manifest row dict]}`` →
    ``{'chunks', 'manifest', 'removed', 'errors': PCollection[row dict], 'counts':
    PCollection[dict] (one element)}``.

    The output contract of DESIGN.md: chunks holds one row per hash the prior manifest lacks;
    manifest one row per chunk occurrence now (no text); removed every prior occurrence that
    no longer exists; errors one row per failed document. Every listed document is exactly one
    of processed, carried over or failed, and ``counts`` says how many of each.
    """

    def __init__(self, *, config: ChunkingConfig, read_bytes: ReadBytes = read_file) -> None:
        super().__init__()
        self._config = config
        self._read_bytes = read_bytes

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        files, prior = inputs["files"], inputs["prior"]
        planned = (
            {
                "listed": files | "KeyFilesByDoc" >> beam.Map(_key_listed),
                "prior": prior | "KeyPriorByDoc" >> beam.Map(lambda r: (r["doc_id"], r)),
            }
            | "JoinPriorByDoc" >> beam.CoGroupByKey()
            | "PlanDocs" >> beam.ParDo(_PlanDocs()).with_outputs(_REMOVED, _COUNTS, main="work")
        )
        docs = planned.work | "ProcessDocuments" >> beam.ParDo(
            _ProcessDocuments(self._config, self._read_bytes)
        ).with_outputs(_OCCURRENCES, _CARRIED, _REMOVED, _ERRORS, _COUNTS)
        marked = (
            {
                "current": docs[_OCCURRENCES],
                "prior": prior | "KeyPriorByHash" >> beam.Map(lambda r: (r["chunk_hash"], None)),
            }
            | "JoinPriorByHash" >> beam.CoGroupByKey()
            | "MarkNew" >> beam.ParDo(_MarkNew()).with_outputs(_CHUNKS, main="manifest")
        )
        manifest = (marked.manifest, docs[_CARRIED]) | "FlattenManifest" >> beam.Flatten()
        removed = (planned[_REMOVED], docs[_REMOVED]) | "FlattenRemoved" >> beam.Flatten()
        chunks = marked[_CHUNKS]
        errors = docs[_ERRORS]

        counts = (
            (
                files | "CountListed" >> beam.Map(lambda _: ("docs_listed", 1)),
                planned[_COUNTS],
                docs[_COUNTS],
                manifest
                | "CountManifest"
                >> beam.FlatMap(
                    lambda r: [("chunks_total", 1), ("chunks_new_occurrences", int(r["is_new"]))]
                ),
                chunks
                | "CountChunks"
                >> beam.FlatMap(
                    lambda r: [("chunks_to_embed", 1), ("tokens_to_embed", r["token_count"])]
                ),
                removed | "CountRemoved" >> beam.Map(lambda _: ("chunks_removed", 1)),
            )
            | "FlattenCounts" >> beam.Flatten()
            | "SumCounts" >> beam.CombinePerKey(sum)
            | "CollectCounts" >> beam.combiners.ToDict()
            | "FinishCounts" >> beam.Map(_finish_counts)
        )
        return {
            "chunks": chunks,
            "manifest": manifest,
            "removed": removed,
            "errors": errors,
            "counts": counts,
        }
