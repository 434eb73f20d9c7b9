"""The plan of a run, by doc-id bucket: the listing as Arrow rows (``SplitListing``), joined
with the prior manifest's summaries and the prior run's failures (``PlanDocs``).

A listed document unchanged by its listing is decided in the join, in Arrow, and is no
element after it; only a document to read (or to fail again) leaves as work, one element per
document. A prior document no longer listed is removed, unless a folder above it could not
be listed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics
from apache_beam.transforms import window

from chunkmill import document, ids, prior_summary
from chunkmill.items import (
    KEEP,
    REMOVE,
    ListedDocs,
    ListingError,
    PriorError,
    PriorSummary,
    Skipped,
    SourceFile,
    Verdict,
    WorkItem,
)
from chunkmill.redact import redact_uri
from chunkmill.transforms import prior, sources, storage
from chunkmill.transforms.counts import (
    COUNTS,
    METRICS_NAMESPACE,
    PROGRESS_DONE,
    PROGRESS_LISTED,
    VERDICTS,
    PerBundle,
    in_global_window,
    update_each,
)
from chunkmill.transforms.sources import LISTING

# The listing side of the progress counters (``counts``).
_DOCS_LISTED = Metrics.counter(METRICS_NAMESPACE, "docs_listed")
_BYTES_LISTED = Metrics.counter(METRICS_NAMESPACE, "bytes_listed")

# Tags of the listing's skipped objects and errors, before (``_ASIDE``) and after they are
# told apart.
_SKIPPED = "skipped"
_LIST_ERRORS = "list_errors"
_ASIDE = "aside"

# Tags of the values grouped by doc-id bucket. Values cross the shuffle as Arrow IPC messages
# (the listing's documents, the prior's summaries) or plain tuples of strings (the prior's
# failures, which are few), which Beam's coder encodes natively.
_LISTED, _SUMMARY, _FAILED_BEFORE = 0, prior.SUMMARY_TAG, 2

# Carried-over documents' ids (~40 bytes each) held per prior part before they are sent to
# the part as one Arrow array.
_KEPT_HOLD = 200_000
# Listed documents and prior summaries (~200 bytes each) the join holds before planning
# them: a bucket of a small corpus holds a few dozen, too few for Arrow to be worth its
# cost per call; a bucket of a large one, all it needs.
_PLAN_HOLD = 100_000


def _prior_error_by_bucket(
    element: tuple[str, PriorError],
) -> tuple[str, tuple[int, tuple[Any, ...]]]:
    doc, error = element
    return prior.doc_bucket(doc), (_FAILED_BEFORE, (doc, *error))


def _latest_failure(failures: list[PriorError]) -> PriorError | None:
    """The one prior failure of a document (two only if a prior run wrote two rows for it;
    the choice then does not depend on grouping order)."""
    if not failures:
        return None
    return max(failures, key=lambda e: tuple("" if v is None else v for v in e))


def under_failed_listing(uri: str | None, failed_prefixes: Iterable[str]) -> bool:
    """Whether a document with source ``uri`` may be missing from the listing only because a
    folder above it could not be listed. A document whose URI is unknown is under any
    failure: a failure must never remove."""
    prefixes = list(failed_prefixes)
    if not prefixes:
        return False
    if uri is None:
        return True
    return any(uri == p.rstrip("/") or uri.startswith(p.rstrip("/") + "/") for p in prefixes)


class _BatchListing(beam.DoFn):
    """The listing → its documents as ``(bucket, (_LISTED, IPC message of LISTING))``, its
    skipped objects and listing errors tagged ``_ASIDE`` as ``(kind, *fields)``.
    ``ListFiles`` sends documents already as ``ListedDocs``, each one such message; a
    ``SourceFile`` (a listing given by hand, as a test gives it) is held over the bundle
    and cut by bucket the same way (``sources.ListingHold``)."""

    def start_bundle(self) -> None:
        self._held = sources.ListingHold()

    def process(self, element: Any):
        if isinstance(element, ListedDocs):
            yield _listed(element)
        elif isinstance(element, Skipped):
            yield beam.pvalue.TaggedOutput(_ASIDE, (_SKIPPED, *element))
        elif isinstance(element, ListingError):
            yield beam.pvalue.TaggedOutput(_ASIDE, (_LIST_ERRORS, *element))
        else:
            for docs in self._held.add(element):
                yield _listed(docs)

    def finish_bundle(self):
        for docs in self._held.release():
            yield window.GlobalWindows.windowed_value(_listed(docs))


def _listed(docs: ListedDocs) -> tuple[str, tuple[int, bytes]]:
    return docs.bucket, (_LISTED, docs.message)


def _one_per_doc(listing: pa.Table) -> pa.Table:
    """The listing with one row per doc_id: an object listed twice (matched by two patterns)
    is one document. Two listings of one object carry the same metadata; the largest
    ``(uri, size_bytes, version)`` only makes the choice independent of order if a store
    answered differently."""
    if listing.num_rows < 2 or pc.count_distinct(listing["doc_id"]).as_py() == listing.num_rows:
        return listing
    keyed = listing.append_column("version_or_empty", pc.fill_null(listing["version"], ""))
    order = pc.sort_indices(
        keyed,
        sort_keys=[
            ("doc_id", "ascending"),
            ("uri", "descending"),
            ("size_bytes", "descending"),
            ("version_or_empty", "descending"),
        ],
    )
    ordered = listing.take(order).combine_chunks()
    docs = ordered["doc_id"].chunk(0)
    first = pa.concat_arrays([pa.array([True]), pc.not_equal(docs[1:], docs[:-1])])
    return ordered.filter(first)


def as_work(item: WorkItem) -> tuple[str, tuple[Any, ...]]:
    """A WorkItem keyed by doc_id, as plain tuples (encoded natively, not pickled)."""
    return _work(item.doc_id, item.uri, item.size_bytes, item.prior, item.version, item.prior_error)


def _work(
    doc: str,
    uri: str,
    size_bytes: int,
    prior_summaries: Iterable[PriorSummary],
    version: str | None,
    prior_error: PriorError | None,
) -> tuple[str, tuple[Any, ...]]:
    """``as_work`` of the WorkItem of these fields, without making it (a first run plans
    every document)."""
    error = None if prior_error is None else tuple(prior_error)
    summaries = tuple(tuple(s) for s in prior_summaries)
    return doc, (uri, size_bytes, summaries, version, error)


def work_item(doc: str, work: tuple[Any, ...]) -> WorkItem:
    uri, size_bytes, summaries, version, error = work
    return WorkItem(
        doc_id=doc,
        uri=uri,
        size_bytes=size_bytes,
        prior=tuple(PriorSummary._make(s) for s in summaries),
        version=version,
        prior_error=None if error is None else PriorError._make(error),
    )


class _PlanBucket(PerBundle):
    """Joins the listing with the prior summaries and failures, a doc-id bucket at a time,
    in Arrow. A listed document unchanged by its listing (``prior_summary.unchanged_by_listing``,
    the carry-over rule over arrays) is carried over here: it is counted, and its doc_id
    joins the Arrow array of kept documents sent to each part it has rows in (tagged
    ``VERDICTS``: ``(part, IPC message of prior.KEPT_DOCS)``), so it costs no element. Every
    other listed document becomes a WorkItem keyed by doc_id (``as_work``), which the grouping
    after spreads across workers. A prior document no longer listed is removed whole (a
    REMOVE verdict for each part it has rows in), unless it lies under a folder whose listing
    failed (``failed_prefixes``): then its rows are kept (``docs_kept_unlisted``)."""

    def __init__(self, fingerprint: str) -> None:
        self._fingerprint = fingerprint
        self._carried = Metrics.counter(METRICS_NAMESPACE, f"docs_{document.CARRIED_OVER}")

    def start_bundle(self) -> None:
        super().start_bundle()
        self._kept: dict[str, list[pa.Array]] = {}
        self._kept_n = 0
        self._listed_batches: list[pa.RecordBatch] = []
        self._summaries: list[tuple[str, pa.RecordBatch]] = []
        self._pending_n = 0
        self._failures: dict[str, list[PriorError]] = {}
        self._failed_prefixes: list[str] = []

    def process(
        self, element: tuple[str, Iterable[tuple[int, Any]]], failed_prefixes: Iterable[str] = ()
    ):
        """Holds the bucket: buckets are planned together, in one Arrow pass over many, since
        Arrow's cost per call outweighs its cost per row for a small bucket."""
        _, values = element
        self._failed_prefixes = list(failed_prefixes)
        for tag, payload in values:
            if tag == _FAILED_BEFORE:
                doc, *error = payload
                self._failures.setdefault(doc, []).append(PriorError._make(error))
                continue
            if tag == _LISTED:
                batch = prior.from_ipc(payload, LISTING)
                self._listed_batches.append(batch)
            else:
                part, batch = prior.summary_message(payload)
                self._summaries.append((part, batch))
            self._pending_n += batch.num_rows
        if self._pending_n >= _PLAN_HOLD:
            yield from self._plan()
            yield from self._release_kept()

    def finish_bundle(self):
        yield from in_global_window(itertools.chain(self._plan(), self._release_kept()))
        yield from super().finish_bundle()

    def _plan(self):
        """Plans the held buckets (whole buckets: every document's listing, summaries and
        failures are in them)."""
        listing = pa.Table.from_batches(self._listed_batches, schema=LISTING).combine_chunks()
        listing = _one_per_doc(listing)
        summary = prior.summaries_table(self._summaries).combine_chunks()
        failures = self._failures
        self._listed_batches, self._summaries, self._pending_n, self._failures = [], [], 0, {}
        # Each summary row's listed document (null: no longer listed), found once for the
        # carried-over, the listed and the unlisted documents' rows alike.
        listed_at = pc.index_in(summary["doc_id"], value_set=listing["doc_id"])
        yield from self._listed(listing, summary, listed_at, failures)
        yield from self._unlisted(summary.filter(pc.is_null(listed_at)), self._failed_prefixes)

    def _listed(
        self,
        listing: pa.Table,
        summary: pa.Table,
        listed_at: pa.Array,
        failures: dict[str, list[PriorError]],
    ):
        n = listing.num_rows
        if not n:
            return
        sizes = listing["size_bytes"]
        _DOCS_LISTED.inc(n)
        _BYTES_LISTED.inc(pc.sum(sizes).as_py())
        update_each(PROGRESS_LISTED, sizes.to_pylist())
        self._tally["docs_listed"] += n
        states, at = _listed_states(summary, listed_at, listing["doc_id"])
        self._tally["docs_prior"] += n - at.null_count
        carried = prior_summary.unchanged_by_listing(
            listing["version"],
            pc.take(states["rows"], at),
            pc.take(states["source_version"], at),
            pc.take(states["config_fingerprint"], at),
            self._fingerprint,
        )
        # Per summary row: whether its document is carried over (null where unlisted, which
        # both filters below drop).
        row_carried = pc.take(carried, listed_at)
        n_carried = pc.sum(carried).as_py() or 0
        if n_carried:
            self._carried.inc(n_carried)
            self._tally[f"docs_{document.CARRIED_OVER}"] += n_carried
            update_each(PROGRESS_DONE, itertools.repeat(0, n_carried))
            # Only what ``_keep`` reads: the summaries' other columns are most of their bytes.
            yield from self._keep(summary.select(["doc_id", "part"]).filter(row_carried))
        rest = listing.filter(pc.invert(carried)) if n_carried else listing
        if not rest.num_rows:
            return
        parts = _by_doc(summary.filter(pc.invert(row_carried)))
        for doc, uri, size, version in zip(
            *(rest[name].to_pylist() for name in LISTING.names), strict=True
        ):
            failure = _latest_failure(failures[doc]) if doc in failures else None
            yield _work(doc, uri, size, parts.get(doc, ()), version, failure)

    def _keep(self, kept: pa.Table):
        """Holds the doc_ids of ``kept`` (summary rows of carried-over documents) per part;
        sends them on when the buffer fills."""
        if not kept.num_rows:
            return
        # Ordered by each part's number, not its key: a key is a path, long and slow to
        # compare, and a table's parts are few.
        parts = pc.dictionary_encode(kept["part"].combine_chunks())
        order = pc.sort_indices(parts.indices)
        docs = kept["doc_id"].combine_chunks().take(order)
        counts = np.bincount(parts.indices.to_numpy(), minlength=len(parts.dictionary))
        start = 0
        for part, count in zip(parts.dictionary.to_pylist(), counts.tolist(), strict=True):
            self._kept.setdefault(part, []).append(docs.slice(start, count))
            start += count
        self._kept_n += kept.num_rows
        if self._kept_n >= _KEPT_HOLD:
            yield from self._release_kept()

    def _release_kept(self):
        for part, arrays in sorted(self._kept.items()):
            batch = pa.RecordBatch.from_arrays([pa.concat_arrays(arrays)], schema=prior.KEPT_DOCS)
            yield beam.pvalue.TaggedOutput(VERDICTS, (part, prior.to_ipc(batch)))
        self._kept, self._kept_n = {}, 0

    def _unlisted(self, gone: pa.Table, failed_prefixes: Iterable[str]):
        """Removes (or, under a failed listing, keeps) each document of ``gone``, the summary
        rows of prior documents no longer listed."""
        for doc, summaries in sorted(_by_doc(gone).items()):
            self._tally["docs_prior"] += 1
            uri = next((s.source_uri for s in summaries if s.source_uri), None)
            if under_failed_listing(uri, failed_prefixes):
                self._tally["docs_kept_unlisted"] += 1
                verdict = Verdict(doc, KEEP)
            else:
                self._tally["docs_removed"] += 1
                verdict = Verdict(doc, REMOVE)
            for s in summaries:
                yield from self._hold(VERDICTS, s.part, verdict)


def _listed_states(
    summary: pa.Table, listed_at: pa.Array | pa.ChunkedArray, listed_docs: pa.ChunkedArray
) -> tuple[pa.Table, pa.Array]:
    """The prior state of each listed document: a table of ``prior_summary.doc_states``'s
    columns and, per listed document, its row there (null: no prior rows). ``listed_at``
    (each summary row's listed document) already joins them: when no listed document has
    rows in two parts (the common case) each summary row is its document's state, found
    with no second lookup by doc_id."""
    n = len(listed_docs)
    if not len(listed_at):  # no prior (a first run): no state to find
        return summary, pa.nulls(n, pa.int64())
    if isinstance(listed_at, pa.ChunkedArray):
        listed_at = listed_at.combine_chunks()
    valid = pc.is_valid(listed_at)
    rows = pc.indices_nonzero(valid).to_numpy()
    listed = pc.filter(listed_at, valid).to_numpy()
    per_doc = np.bincount(listed, minlength=n)
    if per_doc.max(initial=0) > 1:
        states = prior_summary.doc_states(summary)
        return states, pc.index_in(listed_docs, value_set=states["doc_id"])
    at = np.zeros(n, np.int64)
    at[listed] = rows
    # Made from the NumPy arrays' bytes: ``pa.array`` of a NumPy array would load
    # ``numpy.ma`` on a process's first such call.
    has_prior = np.packbits(per_doc > 0, bitorder="little")
    buffers = [pa.py_buffer(has_prior), pa.py_buffer(at)]
    return summary, pa.Array.from_buffers(pa.int64(), n, buffers, null_count=n - len(listed))


def _by_doc(summary: pa.Table) -> dict[str, list[PriorSummary]]:
    """The rows of a ``prior.SUMMARY`` table per document, in order of part."""
    out: dict[str, list[PriorSummary]] = {}
    for doc, s in prior.summary_rows(summary):
        out.setdefault(doc, []).append(s)
    for summaries in out.values():
        summaries.sort(key=lambda s: s.part)
    return out


def _split_aside(element: tuple[str, ...]):
    """Skipped objects (main) and listing errors (tagged ``_LIST_ERRORS``) apart."""
    kind, *fields = element
    if kind == _LIST_ERRORS:
        yield beam.pvalue.TaggedOutput(_LIST_ERRORS, tuple(fields))
    else:
        yield tuple(fields)


def _skipped_counts(skipped: tuple[str, str]) -> list[tuple[str, int]]:
    return [("docs_skipped", 1), (f"skipped:{skipped[1]}", 1)]


def _listing_error_counts(error: tuple[str, str, str]) -> list[tuple[str, int]]:
    return [("listing_errors", 1), (f"listing_error:{error[1]}", 1)]


def _listing_error_row(error: tuple[str, str, str]) -> dict[str, Any]:
    uri, reason, message = error
    item = WorkItem(ids.doc_id(redact_uri(uri)), uri, 0)  # known by its redacted URI
    return document.error_row(item, "list", reason, message) | {"size_bytes": None}


def _failed_prefix(error: tuple[str, str, str]) -> list[str]:
    """The folder of a listing error that is a failure to list it, redacted as the prior
    rows' source_uri it is compared with."""
    uri, reason, _ = error
    return [redact_uri(uri)] if reason == storage.LIST_FAILED else []


@beam.typehints.with_input_types(ListedDocs | SourceFile | Skipped | ListingError)
class SplitListing(beam.PTransform):
    """The listing (``ListedDocs``, ``Skipped``, ``ListingError``: what ``ListFiles`` yields;
    or ``SourceFile``s in place of ``ListedDocs``)
    → ``{"listed": (bucket, (_LISTED, IPC message of LISTING)), "list_errors": (uri, reason,
    message), "error_rows": errors/ rows of stage list, "counts": (name, n)}``. A skipped
    object or a listing error two patterns found is counted once."""

    def expand(
        self, files: beam.PCollection[ListedDocs | SourceFile | Skipped | ListingError]
    ) -> dict[str, beam.PCollection]:
        split = files | "BatchListing" >> beam.ParDo(_BatchListing()).with_outputs(
            _ASIDE, main="files"
        )
        aside = (
            split[_ASIDE]
            | "DistinctAside" >> beam.Distinct()
            | "SplitAside" >> beam.FlatMap(_split_aside).with_outputs(_LIST_ERRORS, main="skipped")
        )
        list_errors = aside[_LIST_ERRORS]
        counts = (
            aside.skipped | "CountSkipped" >> beam.FlatMap(_skipped_counts),
            list_errors | "CountListingErrors" >> beam.FlatMap(_listing_error_counts),
        ) | "FlattenCounts" >> beam.Flatten()
        return {
            "listed": split.files,
            "list_errors": list_errors,
            "error_rows": list_errors | "ListingErrorRows" >> beam.Map(_listing_error_row),
            "counts": counts,
        }


class PlanDocs(beam.PTransform):
    """``{"listed", "list_errors"}`` (``SplitListing``'s) and optionally ``"summaries"``
    (``prior.SummarisePrior``'s, by doc-id bucket) and ``"prior_errors"`` (``(doc_id,
    PriorError)``) → ``{"work": (doc_id, work), "verdicts": (part, verdicts), "counts": (name,
    n)}``, joined by doc-id bucket (``_PlanBucket``). ``work`` is one element per document to
    read or to fail again (``work_item`` reads it back); ``verdicts`` go to the prior's parts."""

    def __init__(self, fingerprint: str) -> None:
        super().__init__()
        self._fingerprint = fingerprint

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        # A side input, not a join: folders that failed to list are few (a handful of
        # prefixes on a bad night, none on a good one), and every unlisted prior document
        # must be checked against all of them, which no key would group.
        failed_prefixes = beam.pvalue.AsList(
            inputs["list_errors"] | "FailedPrefixes" >> beam.FlatMap(_failed_prefix)
        )
        by_doc = [inputs["listed"]]
        if "summaries" in inputs:
            by_doc.append(inputs["summaries"])  # tagged by SummariseParts
        if "prior_errors" in inputs:
            by_doc.append(
                inputs["prior_errors"]
                | "KeyPriorErrorsByBucket" >> beam.Map(_prior_error_by_bucket)
            )
        planned = (
            tuple(by_doc)
            | "FlattenByDocBucket" >> beam.Flatten()
            | "JoinPriorByDocBucket" >> beam.GroupByKey()
            | "PlanBuckets"
            >> beam.ParDo(
                _PlanBucket(self._fingerprint), failed_prefixes=failed_prefixes
            ).with_outputs(VERDICTS, COUNTS, main="work")
        )
        return {"work": planned.work, "verdicts": planned[VERDICTS], "counts": planned[COUNTS]}
