"""The core composite: listed files and the prior manifest in, every output table out.

I/O stays at the edges (``tables``); ``ChunkCorpus`` takes PCollections and returns
PCollections, so a test feeds it with ``beam.Create``.

Both joins against the prior manifest group by key (it can hold hundreds of millions of
rows); there is no side input here. Its rows never travel one by one: documents are joined as
summaries and their rows kept or removed in bulk where they lie (``prior``). The join by
doc_id is by doc-id bucket, in Arrow: a document unchanged by its listing is decided there and
is no element after it, so a nightly run costs Beam elements in proportion to what changed.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics
from apache_beam.transforms import window

from chunkmill import carryover, document, ids, isolation, prior_summary, schema, stores
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.items import (
    KEEP,
    REMOVE,
    ListingError,
    PriorError,
    PriorSummary,
    Skipped,
    Verdict,
    WorkItem,
)
from chunkmill.redact import redact_uri
from chunkmill.transforms import prior, staging, storage
from chunkmill.transforms.parquet_batches import ConcatTables, RowsToArrowTables

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
_OCCURRENCES = "occurrences"
_VERDICTS = "verdicts"
_ERRORS = "errors"
_COUNTS = "counts"
_CHUNKS = "chunks"
_ADDED = "added"
_RETIRED = "retired"
_SKIPPED = "skipped"
_LIST_ERRORS = "list_errors"
_ASIDE = "aside"  # skipped objects and listing errors, before they are told apart

# Tags of the values grouped by hash bucket in the hash join.
_CURRENT, _PRIOR, _GONE, _PERSISTING = 0, 1, 2, 3

# How ChunkCorpus reads a document: ``read(uri, listed version, max_bytes)``. A reader pins
# the read to the listed version where its store can (raising ``stores.SourceChanged``
# otherwise) and returns at most ``max_bytes + 1`` bytes (``storage.read_object``).
ReadBytes = Callable[[str, str | None, int | None], bytes]


# Reads a whole object from any store (local, gs://, s3://, fsspec), pinned to the version
# the listing saw where the store allows it (``storage.read_object``). Compression
# is never inferred from the name: a ``.gz`` document is bytes to extract, not a stream.
read_file = storage.ObjectReader()


# Tags of the values grouped by doc-id bucket. Values cross the shuffle as Arrow IPC messages
# (the listing's documents, the prior's summaries) or plain tuples of strings (the prior's
# failures, which are few), which Beam's coder encodes natively.
_LISTED, _SUMMARY, _FAILED_BEFORE = 0, 1, 2

# The listing's documents as they cross the join by doc_id: Arrow rows, not elements. A
# document is known by its redacted URI (``chunkmill.redact``): a re-signed URL of the same
# object is the same document, and no credential enters its doc_id. The listing's real URI
# travels on, to be read from.
LISTING = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("uri", pa.string(), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("version", pa.string()),
    ]
)
# Listed documents (~150 bytes each) a bundle holds before sending them on, cut by bucket:
# enough that a bucket's share travels in few messages, small enough to bound the buffer.
_LISTING_HOLD = 20_000
# Carried-over documents' ids (~40 bytes each) held per prior part before they are sent to
# the part as one Arrow array.
_KEPT_HOLD = 200_000
# Listed documents and prior summaries (~200 bytes each) the join holds before planning
# them: a bucket of a small corpus holds a few dozen, too few for Arrow to be worth its
# cost per call; a bucket of a large one, all it needs.
_PLAN_HOLD = 100_000


def _prior_summaries_by_bucket(element: tuple[str, bytes]) -> tuple[str, tuple[int, bytes]]:
    bucket, message = element
    return bucket, (_SUMMARY, message)


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


# How many values a DoFn holds before emitting them grouped by key: verdicts (~100 bytes
# each): enough that a key's values travel in few elements, small enough to bound the buffer.
_HOLD = {_VERDICTS: 20_000}
# How many chunk occurrences (rows with their text, ~2 KB) ProcessDocuments holds before
# staging them in a file (``staging``).
_STAGE_ROWS = 4_096

# The Arrow buffers of chunks/ rows (text included) gathered into one row group.
_TEXT_ROW_GROUP_BYTES = 8 * 1024 * 1024

# What of an occurrence crosses the hash join (the rest waits in its staged file), and the
# join's decision on each occurrence: its hash is new, it is an added occurrence, it is the
# one occurrence of a new hash that goes to chunks/.
STAGED_IDS = pa.schema([("chunk_hash", pa.string()), ("chunk_id", pa.string())])
DECISIONS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("is_new", pa.bool_()),
        ("added", pa.bool_()),
        ("chosen", pa.bool_()),
    ]
)


def _pack_verdicts(held: list[Verdict]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(v) for v in held)  # plain tuples: encoded natively


_PACK: dict[str, Callable[[list[Any]], Any]] = {_VERDICTS: _pack_verdicts}


class _PerBundle(beam.DoFn):
    """Outputs gathered over a bundle instead of emitted one by one: counts for the run
    report (tagged ``_COUNTS``; no count travels as an element per row or per document), and
    values bound for a grouping, held per key and emitted as one element per key when the
    buffer fills or the bundle ends: verdicts (tagged ``_VERDICTS``: ``(part, verdicts)``).
    Beam's cost is per element, so this takes most of it off the rows."""

    def start_bundle(self) -> None:
        self._tally: Counter[str] = Counter()
        self._held: dict[str, dict[str, list[Any]]] = {tag: {} for tag in _HOLD}
        self._held_n: Counter[str] = Counter()

    def _hold(self, tag: str, key: str, value: Any):
        """Holds ``value`` under ``key``; yields the held values of ``tag`` when full."""
        self._held[tag].setdefault(key, []).append(value)
        self._held_n[tag] += 1
        if self._held_n[tag] >= _HOLD[tag]:
            yield from self._release(tag, lambda v: v)

    def _release(self, tag: str, wrap):
        pack = _PACK[tag]
        for key, held in sorted(self._held[tag].items()):
            yield beam.pvalue.TaggedOutput(tag, wrap((key, pack(held))))
        self._held[tag], self._held_n[tag] = {}, 0

    def finish_bundle(self):
        for tag in _HOLD:
            yield from self._release(tag, window.GlobalWindows.windowed_value)
        for name, n in sorted(self._tally.items()):
            yield beam.pvalue.TaggedOutput(_COUNTS, window.GlobalWindows.windowed_value((name, n)))


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
    """The listing → its documents as Arrow rows (``LISTING``), one IPC message per doc-id
    bucket and batch: ``(bucket, (_LISTED, message))``; its skipped objects and listing
    errors tagged ``_ASIDE`` as ``(kind, *fields)``. ``ListFiles`` yields all three, a test
    may give documents only. The listing's only step with an element per document."""

    def start_bundle(self) -> None:
        self._rows: dict[str, list[Any]] = {name: [] for name in LISTING.names}

    def process(self, element: Any):
        if isinstance(element, Skipped):
            yield beam.pvalue.TaggedOutput(_ASIDE, (_SKIPPED, *element))
        elif isinstance(element, ListingError):
            yield beam.pvalue.TaggedOutput(_ASIDE, (_LIST_ERRORS, *element))
        else:
            rows = self._rows
            rows["doc_id"].append(ids.doc_id(redact_uri(element.uri)))
            rows["uri"].append(element.uri)
            rows["size_bytes"].append(element.size_bytes)
            rows["version"].append(element.version)
            if len(rows["doc_id"]) >= _LISTING_HOLD:
                yield from self._release(lambda v: v)

    def finish_bundle(self):
        yield from self._release(window.GlobalWindows.windowed_value)

    def _release(self, wrap: Callable[[Any], Any]):
        if not self._rows["doc_id"]:
            return
        table = pa.table(self._rows, schema=LISTING)
        self._rows = {name: [] for name in LISTING.names}
        for bucket, message in prior.by_bucket(table, "doc_id"):
            yield wrap((bucket, (_LISTED, message)))


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


def _work(item: WorkItem) -> tuple[str, tuple[Any, ...]]:
    """A WorkItem keyed by doc_id, as plain tuples (encoded natively, not pickled)."""
    error = None if item.prior_error is None else tuple(item.prior_error)
    summaries = tuple(tuple(s) for s in item.prior)
    return item.doc_id, (item.uri, item.size_bytes, summaries, item.version, error)


def _work_item(doc: str, work: tuple[Any, ...]) -> WorkItem:
    uri, size_bytes, summaries, version, error = work
    return WorkItem(
        doc_id=doc,
        uri=uri,
        size_bytes=size_bytes,
        prior=tuple(PriorSummary._make(s) for s in summaries),
        version=version,
        prior_error=None if error is None else PriorError._make(error),
    )


class _PlanBucket(_PerBundle):
    """Joins the listing with the prior summaries and failures, a doc-id bucket at a time,
    in Arrow. A listed document unchanged by its listing (``prior_summary.unchanged_by_listing``,
    the carry-over rule over arrays) is carried over here: it is counted, and its doc_id
    joins the Arrow array of kept documents sent to each part it has rows in (tagged
    ``_VERDICTS``: ``(part, IPC message of prior.KEPT_DOCS)``), so it costs no element. Every
    other listed document becomes a WorkItem keyed by doc_id (``_work``), which the grouping
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
        self._pending: dict[int, list[pa.RecordBatch]] = {_LISTED: [], _SUMMARY: []}
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
            batch = prior.from_ipc(payload, LISTING if tag == _LISTED else prior.SUMMARY)
            self._pending[tag].append(batch)
            self._pending_n += batch.num_rows
        if self._pending_n >= _PLAN_HOLD:
            yield from self._plan()
            yield from self._release_kept()

    def finish_bundle(self):
        for out in itertools.chain(self._plan(), self._release_kept()):
            if isinstance(out, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(
                    out.tag, window.GlobalWindows.windowed_value(out.value)
                )
            else:
                yield window.GlobalWindows.windowed_value(out)
        yield from super().finish_bundle()

    def _plan(self):
        """Plans the held buckets (whole buckets: every document's listing, summaries and
        failures are in them)."""
        listing = _one_per_doc(pa.Table.from_batches(self._pending[_LISTED], schema=LISTING))
        summary = pa.Table.from_batches(self._pending[_SUMMARY], schema=prior.SUMMARY)
        failures = self._failures
        self._pending, self._pending_n, self._failures = {_LISTED: [], _SUMMARY: []}, 0, {}
        yield from self._listed(listing, summary, failures)
        yield from self._unlisted(listing, summary, self._failed_prefixes)

    def _listed(self, listing: pa.Table, summary: pa.Table, failures: dict[str, list[PriorError]]):
        n = listing.num_rows
        if not n:
            return
        sizes = listing["size_bytes"]
        _DOCS_LISTED.inc(n)
        _BYTES_LISTED.inc(pc.sum(sizes).as_py())
        for size in sizes.to_pylist():
            _PROGRESS_LISTED.update(size)
        self._tally["docs_listed"] += n
        states = prior_summary.doc_states(summary)
        at = pc.index_in(listing["doc_id"], value_set=states["doc_id"])
        self._tally["docs_prior"] += n - at.null_count
        carried = prior_summary.unchanged_by_listing(
            listing["version"],
            pc.take(states["rows"], at),
            pc.take(states["source_version"], at),
            pc.take(states["config_fingerprint"], at),
            self._fingerprint,
        )
        n_carried = pc.sum(carried).as_py() or 0
        if n_carried:
            self._carried.inc(n_carried)
            self._tally[f"docs_{document.CARRIED_OVER}"] += n_carried
            for _ in range(n_carried):
                _PROGRESS_DONE.update(0)
            kept = pc.filter(listing["doc_id"], carried)
            yield from self._keep(summary.filter(pc.is_in(summary["doc_id"], value_set=kept)))
        rest = listing.filter(pc.invert(carried)) if n_carried else listing
        if not rest.num_rows:
            return
        mine = summary.filter(pc.is_in(summary["doc_id"], value_set=rest["doc_id"]))
        parts = _by_doc(mine)
        for doc, uri, size, version in zip(
            *(rest[name].to_pylist() for name in LISTING.names), strict=True
        ):
            yield _work(
                WorkItem(
                    doc_id=doc,
                    uri=uri,
                    size_bytes=size,
                    prior=tuple(parts.get(doc, ())),
                    version=version,
                    prior_error=_latest_failure(failures.get(doc, [])),
                )
            )

    def _keep(self, kept: pa.Table):
        """Holds the doc_ids of ``kept`` (summary rows of carried-over documents) per part;
        sends them on when the buffer fills."""
        if not kept.num_rows:
            return
        kept = kept.sort_by("part")
        runs = pc.value_counts(kept["part"])
        start = 0
        docs = kept["doc_id"].combine_chunks()
        for part, count in zip(
            runs.field("values").to_pylist(), runs.field("counts").to_pylist(), strict=True
        ):
            self._kept.setdefault(part, []).append(docs.slice(start, count))
            start += count
        self._kept_n += kept.num_rows
        if self._kept_n >= _KEPT_HOLD:
            yield from self._release_kept()

    def _release_kept(self):
        for part, arrays in sorted(self._kept.items()):
            batch = pa.RecordBatch.from_arrays([pa.concat_arrays(arrays)], schema=prior.KEPT_DOCS)
            yield beam.pvalue.TaggedOutput(_VERDICTS, (part, prior.to_ipc(batch)))
        self._kept, self._kept_n = {}, 0

    def _unlisted(self, listing: pa.Table, summary: pa.Table, failed_prefixes: Iterable[str]):
        gone = summary.filter(pc.invert(pc.is_in(summary["doc_id"], value_set=listing["doc_id"])))
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
                yield from self._hold(_VERDICTS, s.part, verdict)


def _by_doc(summary: pa.Table) -> dict[str, list[PriorSummary]]:
    """The rows of a ``prior.SUMMARY`` table per document, in order of part."""
    out: dict[str, list[PriorSummary]] = {}
    for doc, s in prior.summary_rows(summary):
        out.setdefault(doc, []).append(s)
    for summaries in out.values():
        summaries.sort(key=lambda s: s.part)
    return out


class _ProcessDocuments(_PerBundle):
    """Listed documents to read or fail (``(doc_id, [WorkItem as _work's tuple])``) → their
    outcomes. The chunk occurrences are staged in files under
    ``staged_folder`` (``staging``), and each file's hashes and ids go to the hash join
    (tagged ``_OCCURRENCES``: ``(bucket, (_CURRENT, (staged path, IPC of STAGED_IDS)))``)."""

    def __init__(self, config: ChunkingConfig, read_bytes: ReadBytes, staged_folder: str) -> None:
        self._config = config
        self._read_bytes = read_bytes
        self._staged_folder = staged_folder
        self._outcomes = {
            status: Metrics.counter(METRICS_NAMESPACE, f"docs_{status}")
            for status in (document.PROCESSED, document.CARRIED_OVER, document.FAILED)
        }
        self._read = Metrics.counter(METRICS_NAMESPACE, "docs_read")
        self._bytes_read = Metrics.counter(METRICS_NAMESPACE, "bytes_read")
        self._not_retried = Metrics.counter(METRICS_NAMESPACE, "docs_failed_not_retried")

    def setup(self) -> None:
        self._chunking = Chunking(self._config)
        # On the worker: the parser libraries that would try the documents are these.
        self._attempt_key = document.attempt_key(self._config)
        # One long-lived parser child per DoFn instance (chunkmill/isolation.py).
        self._extractor = isolation.Extractor(self._config.limits, **self._config.extract_options())
        # Long documents are chunked in that child too, under the same budgets.
        self._chunk_in_child = document.ChunkInChild(self._extractor.call, self._config)

    def teardown(self) -> None:
        self._extractor.close()

    def start_bundle(self) -> None:
        super().start_bundle()
        self._occurrences: list[dict[str, Any]] = []

    def finish_bundle(self):
        yield from self._stage(window.GlobalWindows.windowed_value)
        yield from super().finish_bundle()

    def _stage(self, wrap: Callable[[Any], Any] = lambda v: v):
        """The held occurrences to a staged file; their hashes and ids to the hash join."""
        if not self._occurrences:
            return
        table = pa.Table.from_pylist(self._occurrences, schema=schema.CHUNKS)
        self._occurrences = []
        path = staging.write(self._staged_folder, table)
        for bucket, message in prior.by_bucket(table.select(STAGED_IDS.names)):
            value = (bucket, (_CURRENT, (path, message)))
            yield beam.pvalue.TaggedOutput(_OCCURRENCES, wrap(value))

    def process(self, element: tuple[str, Iterable[tuple[Any, ...]]]):
        doc, works = element
        for work in works:  # one: a document is planned once
            yield from self._process(_work_item(doc, work))

    def _process(self, item: WorkItem):
        fate = carryover.before_reading(
            item.version,
            carryover.PriorState.of_parts(item.prior),
            self._config.fingerprint,
            item.prior_error,
            self._attempt_key,
        )
        outcome: document.DocOutcome | None
        if fate == carryover.UNCHANGED:
            # The nightly common case: nothing about the object changed, so not a byte of it
            # is read.
            outcome = document.DocOutcome(document.CARRIED_OVER)
        elif fate == carryover.KNOWN_FAILED and item.prior_error is not None:
            self._not_retried.inc()
            self._tally["docs_failed_not_retried"] += 1
            outcome = document.repeat_failure(item, item.prior_error, self._attempt_key)
        else:
            outcome = document.too_large(item, self._config.limits.max_document_bytes)
            if outcome is None:
                self._read.inc()
                self._tally["docs_read"] += 1
                outcome = self._read_and_process(item)
        self._outcomes[outcome.status].inc()
        _PROGRESS_DONE.update(int(outcome.status == document.FAILED))
        self._tally[f"docs_{outcome.status}"] += 1
        if outcome.emptied:
            self._tally["docs_empty"] += 1
            if item.prior:  # its rows are removed: document_emptied
                self._tally["docs_emptied"] += 1
        if outcome.error is not None:
            self._tally[f"failed:{outcome.error['reason']}"] += 1
            # The failure is remembered under what it depended on, so the next run can tell
            # whether trying again could end differently.
            error = {**outcome.error, "attempt_key": self._attempt_key}
            yield beam.pvalue.TaggedOutput(_ERRORS, error)
        self._occurrences.extend(outcome.occurrences)
        if len(self._occurrences) >= _STAGE_ROWS:
            yield from self._stage()
        if item.prior:
            verdict = outcome.verdict(item.doc_id)
            for part in sorted({s.part for s in item.prior}):
                yield from self._hold(_VERDICTS, part, verdict)

    def _read_and_process(self, item: WorkItem) -> document.DocOutcome:
        limit = self._config.limits.max_document_bytes
        try:
            # The listed size is not trusted: a file may have grown, or be a FIFO or a device
            # whose listing said 0 bytes. The read itself stops past the limit.
            data = self._read_bytes(item.uri, item.version, limit)
        except stores.LinkTargetMissing as e:  # checked before SourceVanished, its base
            return document.failed(item, "read", storage.LINK_TARGET_MISSING, str(e))
        except stores.SourceVanished as e:  # deleted since the listing
            return document.failed(item, "read", storage.VANISHED, str(e))
        except stores.SourceChanged as e:  # overwritten since the listing: read next run
            return document.failed(item, "read", storage.CHANGED, str(e))
        except storage.SymlinkOutsideInput as e:  # swapped after the listing
            return document.failed(item, "read", storage.SYMLINK_OUTSIDE_INPUT, str(e))
        except stores.NotRegularFile as e:
            return document.failed(item, "read", storage.NOT_REGULAR, str(e))
        except stores.SourceTooLarge as e:
            return document.failed(item, "read", storage.TOO_LARGE, str(e))
        except Exception as e:  # permission denied, network: one document's loss
            message = storage.display_name(f"{type(e).__name__}: {e}")
            return document.failed(item, "read", "read_failed", message)
        if len(data) > limit:  # the byte past the limit: the document is over it
            return document.failed(item, "read", storage.TOO_LARGE, f"{len(data)} bytes")
        self._bytes_read.inc(len(data))
        _PROGRESS_READ.update(len(data))
        return document.process_document(
            item, data, self._chunking, self._extractor, self._chunk_in_child
        )


def _tagged(tag: int) -> Callable[[tuple[str, bytes]], tuple[str, tuple[int, bytes]]]:
    def tag_it(element: tuple[str, bytes]) -> tuple[str, tuple[int, bytes]]:
        bucket, payload = element
        return bucket, (tag, payload)

    return tag_it


class _MarkNew(_PerBundle):
    """Joins this run's chunk occurrences with the prior state, a hash bucket at a time, in
    Arrow, into the run's delta: which hashes are new, which occurrences were added, which
    hashes are gone from the current state.

    A bucket holds the hashes and ids of this run's occurrences (of the documents chunked
    this run, in staged files), the prior rows' hash counts, the hash counts of the rows this
    run removes (``_GONE``) and the ids of the re-chunked documents' prior rows that are
    still current (``_PERSISTING``). Every occurrence is decided (``DECISIONS``, one IPC
    message per staged file and bucket, keyed by the staged file's path): its hash is new
    when the prior state lacks it; each new hash has exactly one chosen occurrence, the one
    for chunks/ (the smallest chunk_id, so the choice does not depend on grouping order); an
    occurrence whose id is not among the persisting ones is added. A hash is retired when
    every prior row of it is removed and no occurrence of this run has it (prior - removed
    + this run's is 0: no term is negative, and a persisting row is not removed). A bucket
    with neither occurrences nor removed rows (every bucket of a run in which nothing
    changed) costs only its grouping.
    """

    def process(self, element: tuple[str, Iterable[tuple[int, Any]]]):
        _, values = element
        parts: dict[int, list[Any]] = {_CURRENT: [], _PRIOR: [], _GONE: [], _PERSISTING: []}
        for tag, payload in values:
            parts[tag].append(payload)
        if not parts[_CURRENT] and not parts[_GONE]:
            return
        paths = [path for path, _ in parts[_CURRENT]]
        batches = [prior.from_ipc(message, STAGED_IDS) for _, message in parts[_CURRENT]]
        persisting = _ipc_table(parts[_PERSISTING], prior.IDS)
        if parts[_GONE]:
            yield from self._retired(batches, parts[_PRIOR], parts[_GONE])
        if not batches:
            return
        ids = pa.Table.from_batches(batches, schema=STAGED_IDS)
        first = _first_ids(ids)
        # Membership needs no sum: a hash in several prior messages is in the prior once.
        seen = _ipc_table(parts[_PRIOR], prior.HASH_COUNTS)["chunk_hash"]
        new = first.filter(pc.invert(pc.is_in(first["chunk_hash"], value_set=seen)))
        decisions = pa.table(
            [
                ids["chunk_id"],
                pc.is_in(ids["chunk_hash"], value_set=new["chunk_hash"]),
                pc.invert(pc.is_in(ids["chunk_id"], value_set=persisting["chunk_id"])),
                pc.is_in(ids["chunk_id"], value_set=new["chunk_id"]),
            ],
            schema=DECISIONS,
        ).combine_chunks()
        start = 0
        for path, batch in zip(paths, batches, strict=True):
            (decided,) = decisions.slice(start, batch.num_rows).to_batches()
            start += batch.num_rows
            yield path, prior.to_ipc(decided)

    def _retired(
        self,
        batches: list[pa.RecordBatch],
        prior_counts: list[bytes],
        gone_counts: list[bytes],
    ):
        """The ``retired/`` rows of the bucket: hashes of removed rows left with no current
        occurrence. Only the rows of those hashes are counted, so the work is in proportion to
        what was removed, not to the bucket."""
        gone = _ipc_table(gone_counts, prior.HASH_COUNTS)
        candidates = pc.unique(gone["chunk_hash"])
        total: Counter[str] = Counter()

        def count(hashes: pa.ChunkedArray | pa.Array, rows: Any, sign: int) -> None:
            among = pc.is_in(hashes, value_set=candidates)
            kept = pc.filter(hashes, among).to_pylist()
            n = [1] * len(kept) if rows is None else pc.filter(rows, among).to_pylist()
            for h, k in zip(kept, n, strict=True):
                total[h] += sign * k

        prior_table = _ipc_table(prior_counts, prior.HASH_COUNTS)
        count(prior_table["chunk_hash"], prior_table["rows"], 1)
        count(gone["chunk_hash"], gone["rows"], -1)
        for b in batches:
            count(b.column(b.schema.get_field_index("chunk_hash")), None, 1)
        retired = sorted(h for h in candidates.to_pylist() if total[h] == 0)
        if retired:
            self._tally["hashes_retired"] += len(retired)
            table = pa.table([pa.array(retired, pa.string())], schema=schema.RETIRED)
            yield beam.pvalue.TaggedOutput(_RETIRED, table)


class _FinishStaged(_PerBundle):
    """``(staged path, [IPC of DECISIONS])`` → the staged file's rows as manifest rows
    flagged ``is_new``, tagged ``_ADDED`` its added occurrences and ``_CHUNKS`` its chosen
    ones, text included. Every staged row has exactly one decision (it is in one bucket).

    With ``model_window`` (the embedding model's input window in tokens, where the tokenizer
    tells it, so that ``token_count`` is in the model's own tokens), it also counts the chunks
    to embed longer than that window: the model would read only their start.
    """

    def __init__(self, model_window: int | None = None) -> None:
        self._model_window = model_window

    def process(self, element: tuple[str, Iterable[bytes]]):
        path, messages = element
        decisions = _ipc_table(list(messages), DECISIONS)
        rows = staging.read(path)
        at = pc.index_in(rows["chunk_id"], value_set=decisions["chunk_id"])
        if at.null_count or decisions.num_rows != rows.num_rows:
            raise RuntimeError(
                f"staged file {path}: {rows.num_rows} occurrences, "
                f"{rows.num_rows - at.null_count} of them decided"
            )
        is_new = pc.take(decisions["is_new"], at)
        added = pc.take(decisions["added"], at)
        chosen = pc.take(decisions["chosen"], at)
        tally = self._tally
        tally["chunks_total"] += rows.num_rows
        tally["chunks_new_occurrences"] += pc.sum(is_new).as_py() or 0
        yield prior.as_table(rows, schema.MANIFEST, is_new=is_new)
        if pc.any(added).as_py():
            added_rows, added_new = _where(added, rows, is_new)
            tally["occurrences_added"] += added_rows.num_rows
            table = prior.as_table(added_rows, schema.ADDED, is_new=added_new)
            yield beam.pvalue.TaggedOutput(_ADDED, table)
        (embed,) = _where(chosen, rows)
        if embed.num_rows:
            tally["chunks_to_embed"] += embed.num_rows
            tally["tokens_to_embed"] += pc.sum(embed["token_count"]).as_py()
            if self._model_window is not None:
                over = pc.greater(embed["token_count"], self._model_window)
                tally["chunks_over_model_window"] += pc.sum(over).as_py() or 0
            yield beam.pvalue.TaggedOutput(_CHUNKS, embed)


def _where(mask: pa.ChunkedArray, *data: Any) -> list[Any]:
    """Each of ``data`` filtered by ``mask``, not copied when the mask keeps every row (on
    a first run every occurrence is added and most are chosen)."""
    if pc.all(mask).as_py():
        return list(data)
    return [d.filter(mask) for d in data]


def _ipc_table(payloads: list[bytes], table_schema: pa.Schema) -> pa.Table:
    batches = [prior.from_ipc(p, table_schema) for p in payloads]
    return pa.Table.from_batches(batches, schema=table_schema)


def _first_ids(table: pa.Table) -> pa.Table:
    """``(chunk_hash, chunk_id)``: each hash of ``table`` once, with its smallest chunk_id.
    Sorted by both, the first row of each hash's run (cheaper than a grouping for the
    small tables of one bucket)."""
    order = pc.sort_indices(
        table, sort_keys=[("chunk_hash", "ascending"), ("chunk_id", "ascending")]
    )
    ordered = table.take(order).combine_chunks()
    if ordered.num_rows < 2:
        return ordered
    hashes = ordered["chunk_hash"].chunk(0)
    starts = pa.concat_arrays([pa.array([True]), pc.not_equal(hashes[1:], hashes[:-1])])
    return ordered.filter(starts)


def _split_aside(element: tuple[str, ...]):
    """Skipped objects (main) and listing errors (tagged ``_LIST_ERRORS``) apart."""
    kind, *fields = element
    if kind == _LIST_ERRORS:
        yield beam.pvalue.TaggedOutput(_LIST_ERRORS, tuple(fields))
    else:
        yield tuple(fields)


def _nothing(_: Any) -> tuple[()]:
    return ()


def _skipped_counts(skipped: tuple[str, str]) -> list[tuple[str, int]]:
    return [("docs_skipped", 1), (f"skipped:{skipped[1]}", 1)]


def _listing_error_counts(error: tuple[str, str, str]) -> list[tuple[str, int]]:
    return [("listing_errors", 1), (f"listing_error:{error[1]}", 1)]


def _listing_error_row(error: tuple[str, str, str]) -> dict[str, Any]:
    uri, reason, message = error
    item = WorkItem(ids.doc_id(redact_uri(uri)), uri, 0)  # known by its redacted URI
    return document.error_row(item, "list", reason, message) | {"size_bytes": None}


class _SumCounts(beam.CombineFn):
    """``(name, n)`` pairs → the run report's counts (``_finish_counts``), in one grouping."""

    def create_accumulator(self) -> Counter[str]:
        return Counter()

    def add_input(self, total: Counter[str], count: tuple[str, int]) -> Counter[str]:
        total[count[0]] += count[1]
        return total

    def merge_accumulators(self, totals: Iterable[Counter[str]]) -> Counter[str]:
        merged: Counter[str] = Counter()
        for total in totals:
            merged.update(total)
        return merged

    def extract_output(self, total: Counter[str]) -> dict[str, Any]:
        return _finish_counts(total)


def _finish_counts(counts: dict[str, int]) -> dict[str, Any]:
    """The run report's counts: every key present, failures, skips and listing errors broken
    down by reason. Skipped objects are not listed documents: ``docs_listed`` is still
    ``docs_processed + docs_carried_over + docs_failed``."""
    keys = (
        "docs_listed",
        "docs_read",
        "docs_processed",
        "docs_carried_over",
        "docs_failed",
        "docs_failed_not_retried",  # of docs_failed: failed before, unchanged, not read
        "docs_removed",
        # Of docs_processed: read whole and holding no text (0 bytes, whitespace only): no
        # chunk. Of those, docs_emptied had rows in the prior manifest, now removed
        # (document_emptied): they count with docs_removed against --max-removed-ratio.
        "docs_empty",
        "docs_emptied",
        "docs_prior",  # documents with rows in the prior manifest
        "docs_kept_unlisted",
        "docs_skipped",
        "listing_errors",
        "chunks_total",
        "chunks_new_occurrences",
        "chunks_to_embed",
        "chunks_removed",
        "occurrences_added",  # rows of added/: occurrences the prior state lacked
        "hashes_retired",  # rows of retired/: hashes no current occurrence has any more
        "tokens_to_embed",
        # Of the chunks to embed, those longer than the model's input window, where chunkmill
        # knows it (the run report's chunking.model_window); 0 where it does not.
        "chunks_over_model_window",
    )
    out: dict[str, Any] = {k: int(counts.get(k, 0)) for k in keys}
    out["failed_by_reason"] = {
        k.split(":", 1)[1]: int(v) for k, v in sorted(counts.items()) if k.startswith("failed:")
    }
    for prefix, name in (
        ("skipped:", "skipped_by_reason"),
        ("listing_error:", "listing_errors_by_reason"),
    ):
        out[name] = {
            k.split(":", 1)[1]: int(v) for k, v in sorted(counts.items()) if k.startswith(prefix)
        }
    return out


class ChunkCorpus(beam.PTransform):
    """``{'files': PCollection[SourceFile | Skipped | ListingError]}`` and optionally
    ``'prior': PCollection[PriorPart]`` (the prior manifest's parts; without it, a first run:
    nothing is diffed, and the graph has no step for the prior) and ``'prior_errors':
    PCollection[(doc_id, PriorError)]`` (the prior run's errors/ rows) →
    ``{'chunks', 'manifest', 'removed', 'errors', 'added', 'retired': PCollection[pa.Table],
    'counts': PCollection[dict] (one element)}``.

    The output contract (docs/design.md): chunks holds one row per hash the prior manifest lacks;
    manifest one row per chunk occurrence now (no text); removed every prior occurrence that
    no longer exists; added every occurrence the prior manifest lacked; retired every hash of
    the prior manifest that no occurrence has now; errors one row per failed document. Every
    listed document is exactly one of processed, carried over or failed, and ``counts`` says
    how many of each. A document that failed in the prior run at the version listed now,
    under the same attempt key (``carryover.is_known_failure``), is not read: it fails again
    with the same errors row, ``attempted`` false (``docs_failed_not_retried``). Tables come
    out as Arrow tables of ``chunkmill.schema``'s schemas, ready for ``WriteTables``.

    The listing's skipped objects are counted (``docs_skipped``, ``skipped_by_reason``), not
    listed documents; its errors are errors/ rows of stage ``list`` (``listing_errors``), and
    a prior document under a folder that could not be listed keeps its rows
    (``docs_kept_unlisted``) instead of being removed.

    ``read_prior(part, columns)`` reads one part of the prior manifest (default: the Parquet
    row group through FileSystems). The prior manifest is joined twice, both times with
    grouping, never a side input (it can hold hundreds of millions of rows): by doc-id bucket
    as Arrow batches of one summary per document and part, and by hash bucket as per-hash
    row counts; its rows are kept or removed a part at a time (``prior``). A worker holds one
    bucket of each join at a time.

    The chunk occurrences wait in staged files under ``staged_folder`` (``staging``; on a
    cluster a folder every worker reaches, such as the run's own; default: a local temporary
    folder) while only their hashes and ids cross the hash join.
    """

    def __init__(
        self,
        *,
        config: ChunkingConfig,
        read_bytes: ReadBytes = read_file,
        read_prior: prior.ReadPart = prior.read_part,
        staged_folder: str | None = None,
    ) -> None:
        super().__init__()
        self._config = config
        self._read_bytes = read_bytes
        self._read_prior = read_prior
        self._staged_folder = staged_folder

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        listing = inputs["files"]
        parts = inputs.get("prior")  # None: a first run, with nothing to diff against
        split = listing | "BatchListing" >> beam.ParDo(_BatchListing()).with_outputs(
            _ASIDE, main="files"
        )
        listed = split.files
        # Two patterns may find the same object or fail on the same folder: once each.
        aside = (
            split[_ASIDE]
            | "DistinctAside" >> beam.Distinct()
            | "SplitAside" >> beam.FlatMap(_split_aside).with_outputs(_LIST_ERRORS, main="skipped")
        )
        skipped, list_errors = aside.skipped, aside[_LIST_ERRORS]
        # A side input, not a join: folders that failed to list are few (a handful of
        # prefixes on a bad night, none on a good one), and every unlisted prior document
        # must be checked against all of them, which no key would group.
        failed_prefixes = beam.pvalue.AsList(
            list_errors
            | "FailedPrefixes"
            # Redacted, as the prior rows' source_uri they are compared with.
            >> beam.FlatMap(lambda e: [redact_uri(e[0])] if e[1] == storage.LIST_FAILED else [])
        )
        by_doc = [listed]
        if parts is not None:
            summarised = parts | "SummarisePrior" >> beam.ParDo(
                prior.SummariseParts(self._read_prior)
            ).with_outputs(prior.HASHES, main="summaries")
            by_doc.append(
                summarised.summaries | "TagPriorSummaries" >> beam.Map(_prior_summaries_by_bucket)
            )
        if "prior_errors" in inputs:
            by_doc.append(
                inputs["prior_errors"]
                | "KeyPriorErrorsByBucket" >> beam.Map(_prior_error_by_bucket)
            )
        planned = (
            tuple(by_doc)
            | "FlattenByDocBucket" >> beam.Flatten()
            | "JoinPriorByDocBucket" >> beam.GroupByKey()
            | "PlanDocs"
            >> beam.ParDo(
                _PlanBucket(self._config.fingerprint), failed_prefixes=failed_prefixes
            ).with_outputs(_VERDICTS, _COUNTS, main="work")
        )
        staged_folder = self._staged_folder or staging.local_folder()
        # Only documents to read or fail are elements here, one per document: grouped by
        # doc_id, they spread across workers, so extraction fans out.
        docs = (
            planned.work
            | "SpreadWork" >> beam.GroupByKey()
            | "ProcessDocuments"
            >> beam.ParDo(
                _ProcessDocuments(self._config, self._read_bytes, staged_folder)
            ).with_outputs(_OCCURRENCES, _VERDICTS, _ERRORS, _COUNTS)
        )
        by_bucket = [docs[_OCCURRENCES]]
        counted = [planned[_COUNTS], docs[_COUNTS]]
        if parts is not None:
            applied = (
                (planned[_VERDICTS], docs[_VERDICTS])
                | "FlattenVerdicts" >> beam.Flatten()
                | "GroupVerdictsByPart" >> beam.GroupByKey()
                | "ApplyVerdicts"
                >> beam.ParDo(prior.ApplyVerdicts(self._read_prior)).with_outputs(
                    prior.REMOVED, prior.GONE, prior.PERSISTING, prior.COUNTS, main="kept"
                )
            )
            by_bucket += [
                summarised[prior.HASHES] | "TagPriorHashes" >> beam.Map(_tagged(_PRIOR)),
                applied[prior.GONE] | "TagRemovedHashes" >> beam.Map(_tagged(_GONE)),
                applied[prior.PERSISTING] | "TagPersistingIds" >> beam.Map(_tagged(_PERSISTING)),
            ]
            counted.append(applied[prior.COUNTS])
        marked = (
            tuple(by_bucket)
            | "FlattenByBucket" >> beam.Flatten()
            | "GroupByBucket" >> beam.GroupByKey()
            | "MarkNew" >> beam.ParDo(_MarkNew()).with_outputs(_RETIRED, _COUNTS, main="decided")
        )
        finished = (
            marked.decided
            | "GroupByStagedFile" >> beam.GroupByKey()
            | "FinishStaged"
            >> beam.ParDo(_FinishStaged(self._config.model_window)).with_outputs(
                _CHUNKS, _ADDED, _COUNTS, main="manifest"
            )
        )
        counted += [marked[_COUNTS], finished[_COUNTS]]
        manifest = finished.manifest | "BatchManifest" >> beam.ParDo(ConcatTables())
        if parts is not None:
            # Batched before the Flatten: its two inputs come from different stages, so what
            # reaches the writer crosses a stage boundary, better as few large tables.
            manifest = (manifest, applied.kept) | "FlattenManifest" >> beam.Flatten()
            removed = applied[prior.REMOVED] | "BatchRemoved" >> beam.ParDo(ConcatTables())
        else:
            # Nothing to remove; an empty PCollection that costs no stage of its own.
            removed = docs[_ERRORS] | "NothingRemoved" >> beam.FlatMap(_nothing)
        # Row groups of chunks/ hold the text: smaller, so that a worker holds less of it.
        chunks = finished[_CHUNKS] | "BatchChunks" >> beam.ParDo(
            ConcatTables(row_group_buffer_bytes=_TEXT_ROW_GROUP_BYTES)
        )
        added = finished[_ADDED] | "BatchAdded" >> beam.ParDo(ConcatTables())
        retired = marked[_RETIRED] | "BatchRetired" >> beam.ParDo(ConcatTables())
        errors = (
            docs[_ERRORS],
            list_errors | "ListingErrorRows" >> beam.Map(_listing_error_row),
        ) | "FlattenErrors" >> beam.Flatten()
        errors = errors | "ErrorsToArrow" >> beam.ParDo(RowsToArrowTables(schema.ERRORS))

        counts = (
            (
                *counted,
                skipped | "CountSkipped" >> beam.FlatMap(_skipped_counts),
                list_errors | "CountListingErrors" >> beam.FlatMap(_listing_error_counts),
            )
            | "FlattenCounts" >> beam.Flatten()
            | "SumCounts" >> beam.CombineGlobally(_SumCounts())
        )
        return {
            "chunks": chunks,
            "manifest": manifest,
            "removed": removed,
            "errors": errors,
            "added": added,
            "retired": retired,
            "counts": counts,
        }
