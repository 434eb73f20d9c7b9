"""The prior manifest, read where it lies: summaries in, verdicts applied in bulk.

A nightly run must cost in proportion to what changed, yet every prior row has to end up
somewhere (kept in the new manifest, removed, or superseded by a new occurrence). Moving the
prior rows through the pipeline one by one made a re-run with nothing changed cost a third
of a full run. Instead the prior manifest is read in parts (one row group of one file):

1. ``SummariseParts`` reads six small columns of a part and cuts the summary of each
   document in it (``SUMMARY``: rows, and the version, fingerprint and content hash they
   share) by doc-id bucket (``doc_bucket``), one Arrow message per bucket (the part's key
   beside it once, not in every row: ``SUMMARY_MESSAGE``, ``summaries_table``), plus the part's
   distinct chunk hashes with their row counts grouped into buckets for the hash join
   (``hash_bucket``), written to one file of the run's temporary folder: only the place of
   each bucket's message in it crosses the join (``write_by_bucket``, ``read_message``).
2. The summaries are joined with the listing a doc-id bucket at a time, in Arrow (``doc_plan``):
   an unchanged document is decided there, and its doc_id joins an Arrow array of the
   documents kept whole in each part (``KEPT_DOCS``); every other document's fate becomes
   one ``Verdict`` per part it has rows in.
3. ``ApplyVerdicts`` groups the verdicts by part, reads the whole part again and keeps,
   re-versions or removes its rows with Arrow compute, a part at a time, never a row at a
   time. A row whose document got no verdict is a bug that would lose data: it fails the run.
   The kept and removed rows are written there, into files of the run's tables
   (``sinks.TableFiles``): only the files' names travel on.

No element is per unchanged document: summaries and kept documents travel as Arrow messages
per bucket and part, the prior's hash counts as the place of such a message in a file, and
the prior's rows not at all.
"""

from __future__ import annotations

import itertools
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from chunkmill import carryover, schema
from chunkmill.items import EMPTIED, KEEP, REMOVE, REPLACE, PriorPart, PriorSummary, Verdict
from chunkmill.refusal import RunRefused
from chunkmill.transforms import digests, parquet_io, runstate, sinks, staging
from chunkmill.transforms.parquet_batches import ROW_GROUP_BUFFER_BYTES

# Hex digits of chunk_hash that name its bucket in the hash join: 256 buckets, so a bucket
# of a manifest of a hundred million distinct hashes holds ~400,000 (~30 MB as Arrow
# strings, what MarkNew holds of a bucket), and this run's occurrences, batched per bucket,
# travel in batches of a useful size.
BUCKET_CHARS = 2

# Tagged outputs of SummariseParts and ApplyVerdicts.
HASHES = "hashes"
GONE = "gone"  # per-hash counts of the removed rows, by hash bucket
PERSISTING = "persisting"  # ids of re-chunked documents' rows that are still current
COUNTS = "counts"
# Their tags among the values the hash join groups by hash bucket (``hash_join``, whose own
# occurrences are tagged 0): given tagged, so the graph has no step to tag them.
HASHES_TAG, GONE_TAG, PERSISTING_TAG = 1, 2, 3
# The files of the prior's hash counts by bucket, in the run's temporary folder.
BUCKETS_PREFIX = "prior-hashes-"

# Where a message lies in a file of ``write_by_bucket``: path, offset, length, CRC-32.
MessageRef = tuple[str, int, int, int]
# Messages of one file closer than this are read in one read (``read_messages``).
READ_GAP_BYTES = 1024 * 1024
# The messages of ``write_by_bucket`` go to its file about this many bytes at a time.
WRITE_BYTES = 1024 * 1024

ReadPart = Callable[[PriorPart, Sequence[str]], pa.Table]
# A part smaller than this (a small corpus's whole manifest) decodes on the calling thread:
# Arrow's thread pools cost their start and hand-offs, more than its columns take to decode
# (a night reads its part twice, one call each); a larger one decodes its columns in parallel.
THREADED_PART_BYTES = 16 * 1024 * 1024


def hash_bucket(chunk_hash: str) -> str:
    return chunk_hash[:BUCKET_CHARS]


def doc_bucket(doc_id: str) -> str:
    """The bucket of the join by doc_id: hex like a hash, so the same cut serves both."""
    return doc_id[:BUCKET_CHARS]


def to_ipc(batch: pa.RecordBatch) -> bytes:
    """A record batch as an Arrow IPC message without its schema (the receiver knows it):
    what crosses a shuffle in place of its rows, a few buffers instead of every field of
    every row encoded apart."""
    return batch.serialize().to_pybytes()


def from_ipc(payload: bytes, batch_schema: pa.Schema) -> pa.RecordBatch:
    return pa.ipc.read_record_batch(pa.py_buffer(payload), batch_schema)


# What crosses the hash-bucket shuffle besides this run's occurrences: per-hash row counts
# (of the prior rows, and of the rows this run removes), each hash as the 32 bytes its hex
# spells (``digests``: a prior of millions of hashes sends every one of them each night), and
# occurrence ids.
HASH_COUNTS = pa.schema(
    [
        pa.field("chunk_hash", pa.binary(digests.HASH_BYTES), nullable=False),
        pa.field("rows", pa.int32(), nullable=False),
    ]
)
IDS = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("chunk_hash", pa.string(), nullable=False),
    ]
)
# What a part holds of each document (a ``PriorSummary`` per row, with its doc_id), and the
# documents of a part whose rows are all kept as they are (carried over unread).
SUMMARY = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("part", pa.string(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        *(pa.field(name, pa.string()) for name in carryover.SHARED_COLUMNS),
    ]
)
# A part's SUMMARY rows as they cross the join by doc-id bucket: without ``part``, the one
# value of every row of the message, which travels beside it once (``summaries_table``): a
# part's key is a path, longer than the rest of a summary row but for its hashes.
SUMMARY_MESSAGE = pa.schema([field for field in SUMMARY if field.name != "part"])
KEPT_DOCS = pa.schema([pa.field("doc_id", pa.string(), nullable=False)])
# The tag of a SUMMARY message among the values the join by doc-id bucket groups
# (``doc_plan``): SummariseParts gives them tagged, so the graph has no step to tag them.
SUMMARY_TAG = 1


def list_parts(path: str) -> Iterator[PriorPart]:
    """Every row group of the prior manifest file ``path`` (its footer only is read). A file
    that is gone or unreadable refuses the run (``RunRefused``), naming it."""
    try:
        with parquet_io.open_input(path) as f:
            groups = pq.ParquetFile(f).metadata.num_row_groups
    except Exception as e:
        raise RunRefused(_corrupt(path, f"{type(e).__name__}: {e}")) from e
    for i in range(groups):
        yield PriorPart(path, i)


def read_part(part: PriorPart, columns: Sequence[str]) -> pa.Table:
    """The given columns of one prior part (``parquet_io.open_input``: local, gs://, s3://), with
    its page checksums verified and its ids and hashes validated (``invalid_rows``): the
    prior's rows enter the new manifest here, so a flipped byte or a foreign row stops the
    run (``RunRefused``, one line naming the file) instead of reaching every later run. A
    nullable column of ``schema.MANIFEST`` that a prior written before it existed lacks is
    null; a missing required one refuses the run."""
    try:
        with parquet_io.open_input(part.path) as f:
            parquet = pq.ParquetFile(f, page_checksum_verification=True)
            present = set(parquet.schema_arrow.names)
            group = parquet.metadata.row_group(part.row_group)
            table = parquet.read_row_group(
                part.row_group,
                columns=[c for c in columns if c in present],
                use_threads=group.total_byte_size > THREADED_PART_BYTES,
            )
    except Exception as e:
        raise RunRefused(_corrupt(part.path, f"{type(e).__name__}: {e}")) from e
    missing = [c for c in columns if c not in present and c not in _OPTIONAL]
    if missing:
        raise RunRefused(_corrupt(part.path, f"it has no column {missing[0]}"))
    # A manifest of an older schema version lacks the nullable columns added since.
    table = schema.with_absent_nulls(table, _fields(schema.MANIFEST, columns))
    problem = invalid_rows(table)
    if problem is not None:
        raise RunRefused(_corrupt(part.path, f"row group {part.row_group}: {problem}"))
    return table


def _fields(table: pa.Schema, names: Sequence[str]) -> list[pa.Field]:
    return [table.field(name) for name in names if name in table.names]


def _corrupt(path: str, problem: str) -> str:
    return (
        f"prior manifest file {path} cannot be used ({problem}); nothing was published. "
        f"Restore the file, or {runstate.RECOVER_PRIOR}"
    )


# The shape of the ids and hashes chunkmill writes (transforms.ids): SHA-256 in lowercase hex,
# ids its first 32 characters.
_HEX_CHARS = {"chunk_hash": 64, "chunk_id": 32, "doc_id": 32}
_REQUIRED = frozenset(f.name for f in schema.MANIFEST if not f.nullable)
_OPTIONAL = frozenset(f.name for f in schema.MANIFEST if f.nullable)


def invalid_rows(table: pa.Table) -> str | None:
    """What is wrong with ``table`` (some columns of manifest rows), or ``None``: a null in
    a required column, or an id or hash that is not lowercase hex of its length. Names the
    column, the first bad row and its value."""
    for name in table.column_names:
        column = table[name]
        if name in _REQUIRED and column.null_count:
            row = pc.index(pc.is_null(column), True).as_py()
            return f"{name} is null in row {row}"
        chars = _HEX_CHARS.get(name)
        if chars is None or digests.is_hex(column, chars // 2):
            continue
        ok = pc.fill_null(pc.match_substring_regex(column, f"^[0-9a-f]{{{chars}}}$"), True)
        if not pc.all(ok).as_py():
            row = pc.index(ok, False).as_py()
            value = str(column[row].as_py())
            shown = value if len(value) <= 80 else value[:77] + "..."
            return f"{name} {shown!r} in row {row} is not {chars} lowercase hex characters"
    return None


def summary_table(table: pa.Table, part: str) -> pa.Table:
    """One ``SUMMARY`` row for every document with rows in ``table`` (one part): its rows,
    and the value each of the ``SHARED_COLUMNS`` has in all of them (null where they differ
    or any is null), as ``prior_summary.summarise`` and ``shared`` give it. Read off runs of
    a document's rows, a few Arrow passes instead of a hash aggregation of every shared
    column: a part holds each document's rows together, as the manifest is written, and is
    sorted by doc_id first where it does not. Arrow kernels only, no NumPy array made into
    an Arrow one (the first such call of a process loads ``numpy.ma``, tens of ms)."""
    if table.num_rows == 0:
        return SUMMARY.empty_table()
    docs = _plain(table["doc_id"])
    firsts = _run_firsts(docs)
    starts = pc.indices_nonzero(firsts)
    # Each document's rows are together iff no doc_id starts two runs: distinct counted
    # among the runs' first rows, a quarter of the rows.
    ids = docs.take(starts)
    if len(starts) != pc.count_distinct(ids).as_py():
        table = table.take(pc.sort_indices(docs))
        docs = _plain(table["doc_id"])
        firsts = _run_firsts(docs)
        starts = pc.indices_nonzero(firsts)
        ids = docs.take(starts)
    # Run i spans rows [bounds[i], bounds[i + 1]).
    bounds = pa.concat_arrays([starts, pa.array([table.num_rows], starts.type)])
    ends = bounds.slice(1)
    return pa.table(
        [
            ids,
            pa.repeat(pa.scalar(part, pa.string()), len(starts)),
            pc.cast(pc.subtract(ends, starts), pa.int64()),
            *(
                _shared_in_runs(_plain(table[name]), firsts, starts, ends)
                for name in carryover.SHARED_COLUMNS
            ),
        ],
        schema=SUMMARY,
    )


def _differs_from_previous(values: pa.Array) -> pa.Array:
    """Per row: whether its value differs from the row before (false for the first row; a
    null beside a value differs, two nulls do not)."""
    if len(values) < 2:
        return pa.repeat(pa.scalar(False), len(values))
    after, before = values.slice(1), values.slice(0, len(values) - 1)
    differs = pc.fill_null(pc.not_equal(after, before), False)
    differs = pc.or_(differs, pc.xor(pc.is_null(after), pc.is_null(before)))
    return pa.concat_arrays([pa.array([False]), differs])


def _run_firsts(docs: pa.Array) -> pa.Array:
    """Per row: whether it is the first of a run of equal doc_ids."""
    differs = _differs_from_previous(docs)
    return pa.concat_arrays([pa.array([True]), differs.slice(1)])


def _shared_in_runs(values: pa.Array, firsts: pa.Array, starts: pa.Array, ends: pa.Array):
    """Per run (``firsts`` marks each run's first row; run i spans rows ``starts[i]`` to
    ``ends[i]``): the value every row of the run has, or null if they differ or any is null.
    A row is bad if it is null or differs from the row before within its run; a run is
    mixed if it holds a bad row: a running count of bad rows, read at the run's bounds."""
    bad = pc.or_(pc.and_not(_differs_from_previous(values), firsts), pc.is_null(values))
    seen = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(pc.cast(bad, pa.int64()))]
    )
    mixed = pc.greater(pc.subtract(seen.take(ends), seen.take(starts)), 0)
    return pc.if_else(mixed, pa.scalar(None, values.type), values.take(starts))


def summaries(table: pa.Table, part: str) -> list[tuple[str, PriorSummary]]:
    """``(doc_id, PriorSummary)`` for every document with rows in ``table`` (one part)."""
    return summary_rows(summary_table(table, part))


def summary_message(payload: tuple[str, bytes]) -> tuple[str, pa.RecordBatch]:
    """A message of ``SummariseParts`` (``(part key, IPC message of SUMMARY_MESSAGE)``),
    decoded: its part's key and its rows."""
    part, message = payload
    return part, from_ipc(message, SUMMARY_MESSAGE)


def summaries_table(messages: Sequence[tuple[str, pa.RecordBatch]]) -> pa.Table:
    """Decoded messages of ``SummariseParts`` (``summary_message``) as one table of
    ``SUMMARY``: each message's part key in its rows' ``part``, put there by one ``take``
    for all the messages, not an array per message."""
    table = pa.Table.from_batches([batch for _, batch in messages], schema=SUMMARY_MESSAGE)
    keys = sorted({part for part, _ in messages})
    at = {key: i for i, key in enumerate(keys)}
    index = pa.array(
        [at[part] for part, batch in messages for _ in range(batch.num_rows)], pa.int32()
    )
    parts = pa.array(keys, pa.string()).take(index)
    return table.add_column(1, SUMMARY.field("part"), parts)


def summary_rows(summary: pa.Table) -> list[tuple[str, PriorSummary]]:
    """The rows of a ``SUMMARY`` table as ``(doc_id, PriorSummary)``."""
    columns = [summary[name].to_pylist() for name in SUMMARY.names]
    return [(row[0], PriorSummary._make(row[1:])) for row in zip(*columns, strict=True)]


def by_bucket(table: pa.Table, column: str = "chunk_hash") -> list[tuple[str, bytes]]:
    """``table`` cut by the bucket of its ``column`` (``hash_bucket``, ``doc_bucket``): one
    IPC message of its rows per bucket (read with ``from_ipc`` and the table's schema), each
    bucket's rows in their order in ``table``."""
    if table.num_rows == 0:
        return []
    order, runs = bucket_runs(table[column])
    (batch,) = table.take(order).combine_chunks().to_batches()
    return [(key, to_ipc(batch.slice(start, count))) for key, start, count in runs]


def bucket_runs(
    column: pa.Array | pa.ChunkedArray,
) -> tuple[pa.Array, list[tuple[str, int, int]]]:
    """The rows of ``column`` (hex ids or hashes, or hashes as bytes) by bucket: the row
    order that puts each bucket's rows together, each bucket's rows in their order in
    ``column`` (a stable sort), and ``(bucket, start, count)`` for each run in that order.
    ``by_bucket`` cuts by it, and the hash join finds a staged file's rows of a bucket by it.
    The buckets' prefixes are read off the column's buffers as small integers and sorted by
    NumPy (a few hundred µs for a part's 28,000 hashes, where Arrow's sort of the prefixes
    as strings or bytes takes milliseconds); a column they cannot be read off so (a null, a
    value shorter than its prefix or not ASCII there) is cut by Arrow's kernels."""
    values = _plain(column)
    keys = _bucket_keys(values)
    if keys is None:
        return _bucket_runs_arrow(values)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.diff(ordered)) + 1
    bounds = [0, *starts.tolist(), len(ordered)]
    binary = pa.types.is_fixed_size_binary(values.type)
    runs = []
    for start, end in itertools.pairwise(bounds):
        key = int(ordered[start])
        name = (
            key.to_bytes(BUCKET_CHARS // 2, "big").hex()
            if binary
            else key.to_bytes(BUCKET_CHARS, "big").decode("ascii")
        )
        runs.append((name, start, end - start))
    indices = pa.Array.from_buffers(
        pa.int64(), len(order), [None, pa.py_buffer(order.astype(np.int64, copy=False))]
    )
    return indices, runs


def _bucket_keys(values: pa.Array) -> np.ndarray | None:
    """Each value's bucket prefix (``BUCKET_CHARS`` characters of a hex string, the bytes
    they spell of a fixed-size binary) as a big-endian integer, or ``None`` where a prefix
    cannot be read off the buffers so."""
    n = len(values)
    if n == 0 or values.null_count:
        return None
    if pa.types.is_fixed_size_binary(values.type):
        width = values.type.byte_width
        prefix = BUCKET_CHARS // 2
        if width < prefix:
            return None
        raw = np.frombuffer(values.buffers()[1], np.uint8, width * n, values.offset * width)
        columns = [raw[i::width] for i in range(prefix)]
    elif pa.types.is_string(values.type):
        _, offsets_buffer, data = values.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, values.offset * 4)
        if (np.diff(offsets) < BUCKET_CHARS).any():
            return None
        raw = np.frombuffer(data, np.uint8)
        columns = [raw[offsets[:-1] + i] for i in range(BUCKET_CHARS)]
        if any((c >= 0x80).any() for c in columns):
            return None
    else:
        return None
    # Two bytes or fewer (256 buckets: one) fit 16 bits, which NumPy's stable sort sorts
    # by radix, twenty times faster than wider keys.
    keys: np.ndarray = np.zeros(n, np.uint16 if len(columns) <= 2 else np.uint64)
    for c in columns:
        keys = np.left_shift(keys, 8, dtype=keys.dtype) | c
    return keys


def _bucket_runs_arrow(values: pa.Array) -> tuple[pa.Array, list[tuple[str, int, int]]]:
    if pa.types.is_fixed_size_binary(values.type):
        buckets = pc.binary_slice(values, 0, BUCKET_CHARS // 2)  # the bytes of the hex prefix
    else:
        buckets = pc.utf8_slice_codeunits(values, 0, BUCKET_CHARS)
    order = pc.sort_indices(buckets)  # stable: equal buckets keep their rows' order
    # Sorted, so value_counts gives each bucket's run in order of first appearance.
    counted = pc.value_counts(pc.take(buckets, order))
    runs, start = [], 0
    for key, count in zip(
        counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True
    ):
        runs.append((key.hex() if isinstance(key, bytes) else key, start, count))
        start += count
    return order, runs


def write_by_bucket(
    folder: str, messages: Sequence[tuple[str, bytes]]
) -> list[tuple[str, MessageRef]]:
    """``messages`` (``by_bucket``'s) one after another in one new file under ``folder``
    (a new name each time: a retried bundle's file is never one its successor names) →
    ``(bucket, where its message lies)``, what crosses a grouping in place of the message
    (``read_message``). On the local engine whatever crosses a stage boundary is held in
    memory whole; the prior's hash counts grow with the corpus, their places do not."""
    if not messages:
        return []
    path = FileSystems.join(folder, f"{BUCKETS_PREFIX}{uuid.uuid4().hex}.arrows")
    refs: list[tuple[str, MessageRef]] = []
    offset = 0
    # Written WRITE_BYTES at a time: a write per message of a few KiB is a system call each.
    pending: list[bytes] = []
    written = 0
    with FileSystems.create(
        path, mime_type="application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED
    ) as f:
        for bucket, message in messages:
            refs.append((bucket, (path, offset, len(message), zlib.crc32(message))))
            pending.append(message)
            offset += len(message)
            if offset - written >= WRITE_BYTES:
                f.write(b"".join(pending))
                pending, written = [], offset
        f.write(b"".join(pending))
    return refs


def read_message(ref: MessageRef) -> bytes:
    """The message of ``write_by_bucket`` that ``ref`` places (``read_messages``)."""
    (message,) = read_messages([ref])
    return message


def read_messages(refs: Sequence[MessageRef]) -> list[bytes]:
    """The messages of ``write_by_bucket`` that ``refs`` place, in their order: each file
    opened once, and messages less than ``READ_GAP_BYTES`` apart in it read in one read (on
    an object store a read costs tens of milliseconds, about what a MiB takes to arrive; a
    night needs nearly every bucket of a part's file). ``RuntimeError`` naming the file if a
    message's bytes are not those written (a worker's disk or an object store can corrupt a
    file as well as a table)."""
    by_path: dict[str, list[MessageRef]] = {}
    for ref in refs:
        by_path.setdefault(ref[0], []).append(ref)
    found: dict[MessageRef, bytes] = {}
    for path, placed in by_path.items():
        placed.sort(key=lambda ref: ref[1])
        runs: list[list[MessageRef]] = []
        for ref in placed:
            if runs and ref[1] - _end(runs[-1][-1]) < READ_GAP_BYTES:
                runs[-1].append(ref)
            else:
                runs.append([ref])
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for run in runs:
                start = run[0][1]
                f.seek(start)
                span = f.read(max(_end(ref) for ref in run) - start)
                for ref in run:
                    found[ref] = _checked(span[ref[1] - start : _end(ref) - start], ref)
    return [found[ref] for ref in refs]


def _end(ref: MessageRef) -> int:
    return ref[1] + ref[2]


def _checked(message: bytes, ref: MessageRef) -> bytes:
    path, offset, length, crc = ref
    if len(message) != length or zlib.crc32(message) != crc:
        raise RuntimeError(
            f"prior hash counts in {path} at byte {offset} are not those written "
            f"({len(message)} of {length} bytes read, checksum mismatch or truncated file)"
        )
    return message


def hash_counts(table: pa.Table) -> pa.Table:
    """Each distinct hash of ``table`` (hex) with its number of rows (``HASH_COUNTS``).
    Counted by ``value_counts``, a kernel of its own, not a grouping: a grouping would load
    Arrow's query engine (Acero and its dataset modules) on the run's first call, which only
    a night makes, and it is slower for one key column."""
    if table.num_rows == 0:
        return HASH_COUNTS.empty_table()
    # Decoded first: counting 32-byte values is cheaper than counting their 64-byte hex.
    counted = pc.value_counts(digests.from_hex(table["chunk_hash"], digests.HASH_BYTES))
    return pa.table(
        [counted.field("values"), pc.cast(counted.field("counts"), pa.int32())],
        schema=HASH_COUNTS,
    )


class SummariseParts(beam.DoFn):
    """``PriorPart`` → ``(doc bucket, (SUMMARY_TAG, (part key, IPC message of
    SUMMARY_MESSAGE rows)))`` (``summary_message`` reads it), one per
    doc-id bucket the part has documents in, as the join by doc-id bucket takes them;
    tagged ``HASHES``: ``(hash bucket, (HASHES_TAG, MessageRef))``, as the hash join takes
    them: the part's hashes in the bucket with their row counts (``HASH_COUNTS``), written
    into one file of the part under ``temp`` (``write_by_bucket``; default: a local
    temporary folder, for a test)."""

    def __init__(self, read: ReadPart = read_part, temp: str | None = None) -> None:
        self._read = read
        self._temp = temp

    def _folder(self) -> str:
        if self._temp is None:
            self._temp = staging.local_folder()
        return self._temp

    def process(self, part: PriorPart):
        table = self._read(part, ["doc_id", *carryover.SHARED_COLUMNS, "chunk_hash"])
        summary = summary_table(table, part.key).drop_columns(["part"])
        for bucket, message in by_bucket(summary, "doc_id"):
            yield bucket, (SUMMARY_TAG, (part.key, message))
        for bucket, ref in write_by_bucket(self._folder(), by_bucket(hash_counts(table))):
            yield beam.pvalue.TaggedOutput(HASHES, (bucket, (HASHES_TAG, ref)))


def _in(column: pa.ChunkedArray | pa.Array, values: Iterable[str]) -> pa.Array:
    return pc.is_in(column, value_set=pa.array(list(values), pa.string()))


def apply_verdicts(
    table: pa.Table,
    verdicts: Iterable[Verdict],
    kept_docs: pa.Array | pa.ChunkedArray | None = None,
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """One part's rows under its documents' verdicts → (manifest rows kept, removed rows,
    rows of re-chunked documents that are still current), as tables of ``schema.MANIFEST``,
    ``schema.REMOVED`` and ``IDS``: every prior row is in exactly one of them. ``kept_docs``
    are documents kept as they are (a ``KEEP`` verdict without a version each), as one
    array. Raises ``RuntimeError`` when a row's document has no verdict (every prior row
    must land somewhere)."""
    kept_docs = pa.array([], pa.string()) if kept_docs is None else kept_docs
    keep: list[str] = []
    versions: dict[str, str] = {}
    replaced: list[str] = []
    current: set[str] = set()
    gone: list[str] = []
    emptied: list[str] = []
    for v in verdicts:
        if v.kind == KEEP:
            keep.append(v.doc_id)
            if v.version is not None:
                versions[v.doc_id] = v.version
        elif v.kind == REPLACE:
            replaced.append(v.doc_id)
            current.update(v.current_ids)
        elif v.kind == REMOVE:
            gone.append(v.doc_id)
        elif v.kind == EMPTIED:
            gone.append(v.doc_id)
            emptied.append(v.doc_id)
        else:
            raise ValueError(f"unknown verdict kind {v.kind!r}")
    doc = table["doc_id"]
    kept_ids = _plain(kept_docs)
    if keep:
        kept_ids = pa.concat_arrays([pa.array(keep, pa.string()), kept_ids.cast(pa.string())])
    is_kept = pc.is_in(doc, value_set=kept_ids)
    if not (replaced or gone) and pc.all(is_kept).as_py():
        # The nightly common case: every document of the part is kept.
        manifest = _with_versions(table, versions)
        return (
            as_table(manifest, schema.MANIFEST, is_new=_falses(manifest.num_rows)),
            as_table(table.slice(0, 0), schema.REMOVED, removed_reason=pa.array([], pa.string())),
            IDS.empty_table(),
        )
    is_replaced, is_gone = _in(doc, replaced), _in(doc, gone)
    judged = pc.or_(pc.or_(is_kept, is_replaced), is_gone)
    if not pc.all(judged).as_py():
        lost = pc.filter(doc, pc.invert(judged)).unique().to_pylist()
        raise RuntimeError(
            f"prior manifest rows of {len(lost)} document(s) got no verdict (first: {lost[0]}); "
            "refusing to drop them"
        )

    kept = _with_versions(table.filter(is_kept), versions)
    manifest = as_table(kept, schema.MANIFEST, is_new=_falses(kept.num_rows))

    # The rest is decided among the rows of the documents not kept, a few of the part's
    # on a night: each filter below passes over them, not over every row of the part.
    others = table.filter(pc.or_(is_replaced, is_gone))
    is_replaced, is_gone = _in(others["doc_id"], replaced), _in(others["doc_id"], gone)
    is_current = _in(others["chunk_id"], current)
    changed = pc.and_(is_replaced, pc.invert(is_current))
    removed = others.filter(pc.or_(is_gone, changed))
    persisting = others.select(["chunk_id", "chunk_hash"]).filter(pc.and_(is_replaced, is_current))
    reason = pc.if_else(
        _in(removed["doc_id"], emptied),
        pa.scalar(schema.DOCUMENT_EMPTIED),
        pc.if_else(
            _in(removed["doc_id"], gone),
            pa.scalar(schema.DOCUMENT_REMOVED),
            pa.scalar(schema.DOCUMENT_CHANGED),
        ),
    )
    removed = as_table(removed, schema.REMOVED, removed_reason=reason)
    return manifest, removed, persisting.cast(IDS)


def _plain(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one array: a column of one chunk (a part read from one row group) is
    that chunk, not a copy (``combine_chunks`` copies even one chunk)."""
    if isinstance(values, pa.ChunkedArray):
        return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
    return values


def _falses(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(False), n)


def _with_versions(kept: pa.Table, versions: dict[str, str]) -> pa.Table:
    """``kept`` with the listing's version recorded on the rows of the documents in
    ``versions`` (the same bytes found under new metadata)."""
    if not versions or not kept.num_rows:
        return kept
    ids = pa.array(list(versions), pa.string())
    index = pc.index_in(kept["doc_id"], value_set=ids)
    new = pc.take(pa.array(list(versions.values()), pa.string()), index)
    column = pc.if_else(pc.is_null(index), kept["source_version"], new)
    return kept.set_column(kept.schema.get_field_index("source_version"), "source_version", column)


def as_table(table: pa.Table, target: pa.Schema, **extra: Any) -> pa.Table:
    """``table``'s occurrence columns plus ``extra``, as a table of ``target`` (the list
    column's item name, which Parquet may have changed, included). The columns are
    ``target``'s own, in its order: a nullable one that ``table`` lacks (a prior written
    before it existed) is null."""
    present = dict(zip(table.column_names, table.columns, strict=True))
    columns = [
        extra[f.name]
        if f.name in extra
        else present[f.name]
        if f.name in present
        else pa.nulls(table.num_rows, f.type)
        for f in target
    ]
    return pa.Table.from_arrays(
        [c if c.type == f.type else c.cast(f.type) for c, f in zip(columns, target, strict=True)],
        schema=target,
    )


class ApplyVerdicts(beam.DoFn):
    """``(part key, [batch of Verdicts as plain tuples, or IPC message of KEPT_DOCS])`` →
    ``(table, path)`` of the files its bundle wrote under ``temp`` (``sinks.TableFiles``):
    the kept manifest rows and the removed rows, written where they are decided, for
    ``WriteTables`` to name; tagged ``GONE`` and ``PERSISTING``: ``(bucket, (GONE_TAG or
    PERSISTING_TAG, IPC message))`` of the removed rows' hash counts and of the
    still-current rows' ids of re-chunked documents, as the hash join takes them; tagged
    ``COUNTS``: ``(name, n)``."""

    def __init__(
        self,
        temp: str,
        read: ReadPart = read_part,
        *,
        row_group_bytes: int = ROW_GROUP_BUFFER_BYTES,
    ) -> None:
        self._temp = temp
        self._read = read
        self._group_bytes = row_group_bytes

    def start_bundle(self) -> None:
        # New files for every attempt: a failed one's are never named.
        self._files = sinks.TableFiles(self._temp, row_group_bytes=self._group_bytes)

    def process(self, element: tuple[str, Iterable[bytes | Iterable[Verdict]]]):
        key, batches = element
        table = self._read(PriorPart.from_key(key), schema.OCCURRENCE_FIELDS)
        kept: list[pa.Array] = []
        tuples: list[Iterable[Verdict]] = []
        for batch in batches:
            if isinstance(batch, bytes):
                kept.append(from_ipc(batch, KEPT_DOCS).column(0))
            else:
                tuples.append(batch)
        verdicts = (Verdict._make(v) for v in itertools.chain.from_iterable(tuples))
        kept_docs = pa.concat_arrays(kept) if kept else None
        manifest, removed, persisting = apply_verdicts(table, verdicts, kept_docs)
        yield beam.pvalue.TaggedOutput(COUNTS, ("chunks_total", manifest.num_rows))
        yield beam.pvalue.TaggedOutput(COUNTS, ("chunks_removed", removed.num_rows))
        self._files.write("manifest", manifest)
        self._files.write("removed", removed)
        for bucket, counts in by_bucket(hash_counts(removed)):
            yield beam.pvalue.TaggedOutput(GONE, (bucket, (GONE_TAG, counts)))
        for bucket, ids in by_bucket(persisting):
            yield beam.pvalue.TaggedOutput(PERSISTING, (bucket, (PERSISTING_TAG, ids)))

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for written in self._files.close():
            yield GlobalWindows.windowed_value(written)


@beam.typehints.with_input_types(PriorPart)
class SummarisePrior(beam.PTransform):
    """``PriorPart`` → ``{"summaries": (doc bucket, (SUMMARY_TAG, (part key, IPC message of
    SUMMARY_MESSAGE rows))), "hashes": (hash bucket, (HASHES_TAG, MessageRef of HASH_COUNTS))}``
    (``SummariseParts``), read with ``read(part, columns)``; the hash counts' files are
    written under ``temp`` (a folder every worker reaches, such as the run's temporary
    folder; default: a local temporary folder)."""

    def __init__(self, read: ReadPart = read_part, temp: str | None = None) -> None:
        super().__init__()
        self._read = read
        self._temp = temp

    def expand(self, parts: beam.PCollection[PriorPart]) -> dict[str, beam.PCollection]:
        summarised = parts | "Summarise" >> beam.ParDo(
            SummariseParts(self._read, self._temp)
        ).with_outputs(HASHES, main="summaries")
        return {"summaries": summarised.summaries, "hashes": summarised[HASHES]}


@beam.typehints.with_input_types(tuple[str, Any])
class ApplyPriorVerdicts(beam.PTransform):
    """The verdicts of every step that gives them, ``(part key, [Verdicts, or IPC of
    KEPT_DOCS])`` → ``{"files": (table, path) of the kept manifest rows and the removed
    rows, written under ``temp``, "gone": (bucket, (GONE_TAG, IPC of HASH_COUNTS)),
    "persisting": (bucket, (PERSISTING_TAG, IPC of IDS)), "counts": (name, n)}``, a part at
    a time (``ApplyVerdicts``)."""

    def __init__(self, temp: str, read: ReadPart = read_part) -> None:
        super().__init__()
        self._temp = temp
        self._read = read

    def expand(self, verdicts: tuple[beam.PCollection, ...]) -> dict[str, beam.PCollection]:
        applied = (
            verdicts
            | "FlattenVerdicts" >> beam.Flatten()
            | "GroupVerdictsByPart" >> beam.GroupByKey()
            | "Apply"
            >> beam.ParDo(ApplyVerdicts(self._temp, self._read)).with_outputs(
                GONE, PERSISTING, COUNTS, main="files"
            )
        )
        return {
            "files": applied.files,
            "gone": applied[GONE],
            "persisting": applied[PERSISTING],
            "counts": applied[COUNTS],
        }
