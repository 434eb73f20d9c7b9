"""Reading, extracting and chunking the documents a run must read (``ProcessDocuments``): one
element per document, spread across workers by doc_id, each read under its budgets, its chunk
occurrences staged in files (``staging``) and only their hashes and ids sent on to the hash
join (``hash_join``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics
from apache_beam.transforms import window

from chunkmill import carryover, document, isolation, schema, stores
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.items import WorkItem
from chunkmill.transforms import staging, storage
from chunkmill.transforms.counts import (
    COUNTS,
    DONE_PROGRESS,
    METRICS_NAMESPACE,
    READ_PROGRESS,
    VERDICTS,
    PerBundle,
)
from chunkmill.transforms.doc_plan import work_item
from chunkmill.transforms.hash_join import CURRENT, staged_ids

# How ChunkCorpus reads a document: ``read(uri, listed version, max_bytes)``. A reader pins
# the read to the listed version where its store can (raising ``stores.SourceChanged``
# otherwise) and returns at most ``max_bytes + 1`` bytes (``storage.read_object``).
ReadBytes = Callable[[str, str | None, int | None], bytes]


# Reads a whole object from any store (local, gs://, s3://, fsspec), pinned to the version
# the listing saw where the store allows it (``storage.read_object``). Compression
# is never inferred from the name: a ``.gz`` document is bytes to extract, not a stream.
read_file = storage.ObjectReader()


# Tags of the step's outputs beside the run-wide ones (``counts``).
_OCCURRENCES = "occurrences"
_ERRORS = "errors"

# How many chunk occurrences (rows with their text, ~2 KB) ProcessDocuments holds before
# staging them in a file (``staging``).
_STAGE_ROWS = 4_096
# Staged files being written while the next documents are read: each holds its rows'
# table (~10 MB) until written.
_WRITES_AHEAD = 2


def _no_rows() -> dict[str, list[Any]]:
    return {name: [] for name in schema.CHUNKS.names}


class _ProcessDocuments(PerBundle):
    """Listed documents to read or fail (``(doc_id, [WorkItem as _work's tuple])``) → their
    outcomes. The chunk occurrences are staged in files under
    ``staged_folder`` (``staging``), and each file's hashes and ids go to the hash join
    (tagged ``_OCCURRENCES``: ``(bucket, (CURRENT, (staged path, message of STAGED_IDS)))``)."""

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
        # Staged files are encoded and written here while the next documents are read
        # (Arrow, the checksum and the write leave Python's lock to this thread).
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="chunkmill-staging")

    def teardown(self) -> None:
        self._writer.shutdown()
        self._extractor.close()

    def start_bundle(self) -> None:
        super().start_bundle()
        # The held chunk rows, column by column (``schema.CHUNKS``).
        self._columns: dict[str, list[Any]] = _no_rows()
        self._rows = 0
        # Staged files being written, each with the messages that name it.
        self._writes: list[tuple[Future[None], list[tuple[str, Any]]]] = []

    def finish_bundle(self):
        yield from self._stage(window.GlobalWindows.windowed_value)
        # The bundle ends with its staged files whole, or fails.
        yield from self._written(0, window.GlobalWindows.windowed_value)
        yield from super().finish_bundle()

    def _written(self, ahead: int, wrap: Callable[[Any], Any] = lambda v: v):
        """Waits until at most ``ahead`` staged files are still being written, and sends on
        the messages of each file once it is whole: a step that reads a file named in a
        message finds it whole, fused with this one or not. A write that failed fails the
        bundle."""
        while len(self._writes) > ahead:
            write, messages = self._writes.pop(0)
            write.result()
            for value in messages:
                yield beam.pvalue.TaggedOutput(_OCCURRENCES, wrap(value))

    def _stage(self, wrap: Callable[[Any], Any] = lambda v: v):
        """The held occurrences to a staged file written behind (``_written``), while the
        next documents are read; their hashes and ids to the hash join once it is whole."""
        if not self._rows:
            return
        table = pa.Table.from_arrays(
            [pa.array(self._columns[f.name], f.type) for f in schema.CHUNKS], schema=schema.CHUNKS
        )
        self._columns, self._rows = _no_rows(), 0
        path = staging.new_path(self._staged_folder)
        yield from self._written(_WRITES_AHEAD - 1, wrap)
        messages = [(bucket, (CURRENT, (path, message))) for bucket, message in staged_ids(table)]
        self._writes.append((self._writer.submit(staging.write_to, path, table), messages))

    def process(self, element: tuple[str, Iterable[tuple[Any, ...]]]):
        doc, works = element
        for work in works:  # one: a document is planned once
            yield from self._process(work_item(doc, work))

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
        DONE_PROGRESS.update(int(outcome.status == document.FAILED))
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
        if outcome.chunks:
            for name, column in outcome.chunks.items():
                self._columns[name].extend(column)
            self._rows += len(outcome.chunks["chunk_id"])
            if self._rows >= _STAGE_ROWS:
                yield from self._stage()
        if item.prior:
            verdict = outcome.verdict(item.doc_id)
            for part in sorted({s.part for s in item.prior}):
                yield from self._hold(VERDICTS, part, verdict)

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
        READ_PROGRESS.update(len(data))
        return document.process_document(
            item, data, self._chunking, self._extractor, self._chunk_in_child
        )


@beam.typehints.with_input_types(tuple[str, tuple[Any, ...]])
class ProcessDocuments(beam.PTransform):
    """``(doc_id, work)`` (``PlanDocs``'s) → ``{"occurrences": (bucket, (CURRENT, (staged
    path, message of STAGED_IDS))), "verdicts": (part, verdicts), "errors": errors/ rows,
    "counts": (name, n)}``. Grouped by doc_id first, so the documents spread across workers
    and extraction fans out."""

    def __init__(
        self, *, config: ChunkingConfig, read_bytes: ReadBytes, staged_folder: str
    ) -> None:
        super().__init__()
        self._config = config
        self._read_bytes = read_bytes
        self._staged_folder = staged_folder

    def expand(
        self, work: beam.PCollection[tuple[str, tuple[Any, ...]]]
    ) -> dict[str, beam.PCollection]:
        docs = (
            work
            | "SpreadWork" >> beam.GroupByKey()
            | "ReadAndChunk"
            >> beam.ParDo(
                _ProcessDocuments(self._config, self._read_bytes, self._staged_folder)
            ).with_outputs(_OCCURRENCES, VERDICTS, _ERRORS, COUNTS)
        )
        return {
            "occurrences": docs[_OCCURRENCES],
            "verdicts": docs[VERDICTS],
            "errors": docs[_ERRORS],
            "counts": docs[COUNTS],
        }
