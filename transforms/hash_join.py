"""The join by hash bucket: this run's chunk occurrences against the prior state, into the
run's delta (``MarkNew``), and the staged occurrences read back once, as the rows of the
manifest, chunks/ and added/, written to files where they are decided (``FinishStaged``).

Only hashes and ids cross this join, as the bytes their hex spells (``digests``), and only a
byte of flags per occurrence comes back; the occurrences' text waits in staged files
(``staging``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.transforms import window

from chunkmill import schema
from chunkmill.transforms import digests, prior, sinks, staging
from chunkmill.transforms.counts import COUNTS, PerBundle, in_global_window

# Tags of the values grouped by hash bucket in the hash join: this run's occurrences, and
# what the prior gives tagged (``prior``).
CURRENT = 0
_PRIOR, _GONE, _PERSISTING = prior.HASHES_TAG, prior.GONE_TAG, prior.PERSISTING_TAG

# Tags of the outputs of the two steps.
_RETIRED = "retired"
_CHUNKS = "chunks"
_ADDED = "added"

# What of an occurrence crosses the hash join (the rest waits in its staged file): its hash
# and id decoded from hex (``digests``), a staged file's rows of one hash bucket in one
# message, in the order of the file's rows (``prior.bucket_runs``): the hashes' bytes, then
# the ids' (``staged_ids``, ``read_staged_ids``). Fixed widths need no framing: an IPC
# message's would cost more than the ~16 occurrences a message holds use of the bytes.
STAGED_IDS = pa.schema(
    [
        pa.field("chunk_hash", pa.binary(digests.HASH_BYTES), nullable=False),
        pa.field("chunk_id", pa.binary(digests.ID_BYTES), nullable=False),
    ]
)
# The join's decision on an occurrence, one byte of flags in the order of its STAGED_IDS
# message: its hash is new, it is an added occurrence, it is the one occurrence of a new hash
# that goes to chunks/.
IS_NEW, ADDED, CHOSEN = 1, 2, 4


_ROW_BYTES = digests.HASH_BYTES + digests.ID_BYTES

# Bytes of messages (occurrences, prior hash counts, removed rows' counts, persisting ids)
# that ``_MarkNew`` holds of the buckets of a bundle before deciding them together.
MARK_BATCH_BYTES = 16 * 1024 * 1024


def staged_ids(rows: pa.Table) -> list[tuple[str, bytes]]:
    """A staged file's rows (``schema.CHUNKS``) → ``(hash bucket, message of STAGED_IDS)``,
    one message per bucket, each bucket's rows in the file's order (``prior.bucket_runs``)."""
    if rows.num_rows == 0:
        return []
    order, runs = prior.bucket_runs(rows["chunk_hash"])
    hashes = digests.from_hex(rows["chunk_hash"], digests.HASH_BYTES).take(order)
    ids = digests.from_hex(rows["chunk_id"], digests.ID_BYTES).take(order)
    hash_bytes, id_bytes = (_value_bytes(a) for a in (hashes, ids))
    h, i = digests.HASH_BYTES, digests.ID_BYTES
    return [
        (bucket, hash_bytes[start * h : (start + n) * h] + id_bytes[start * i : (start + n) * i])
        for bucket, start, n in runs
    ]


def read_staged_ids(message: bytes) -> pa.RecordBatch:
    """A message of ``staged_ids`` as a record batch of ``STAGED_IDS`` (views of its bytes)."""
    buffer, split = pa.py_buffer(message), _occurrences(message) * digests.HASH_BYTES
    return _staged_ids_batch(buffer.slice(0, split), buffer.slice(split))


def _read_staged_ids_together(messages: list[bytes]) -> tuple[pa.RecordBatch, list[int]]:
    """Messages of ``staged_ids`` as one record batch of ``STAGED_IDS``, their rows end to
    end, and the number of rows of each: one batch for the buckets of a bundle, not one
    per message (Arrow's kernels over a table of hundreds of chunks pay per chunk). Their
    bytes are copied once, at most ``MARK_BATCH_BYTES`` of them."""
    counts = [_occurrences(message) for message in messages]
    views = [
        (memoryview(message), n * digests.HASH_BYTES)
        for message, n in zip(messages, counts, strict=True)
    ]
    hashes = b"".join(view[:split] for view, split in views)
    ids = b"".join(view[split:] for view, split in views)
    return _staged_ids_batch(pa.py_buffer(hashes), pa.py_buffer(ids)), counts


def _occurrences(message: bytes) -> int:
    n, extra = divmod(len(message), _ROW_BYTES)
    if extra:
        raise ValueError(f"a message of {len(message)} bytes is not whole occurrences")
    return n


def _staged_ids_batch(hash_bytes: pa.Buffer, id_bytes: pa.Buffer) -> pa.RecordBatch:
    """Occurrences' hashes and their ids, each end to end in a buffer, as a record batch of
    ``STAGED_IDS`` (views of the buffers' bytes)."""
    n = hash_bytes.size // digests.HASH_BYTES
    hashes = pa.FixedSizeBinaryArray.from_buffers(
        STAGED_IDS.field("chunk_hash").type, n, [None, hash_bytes]
    )
    ids = pa.FixedSizeBinaryArray.from_buffers(
        STAGED_IDS.field("chunk_id").type, n, [None, id_bytes]
    )
    return pa.RecordBatch.from_arrays([hashes, ids], schema=STAGED_IDS)


def _value_bytes(values: pa.FixedSizeBinaryArray) -> bytes:
    width = values.type.byte_width
    start = values.offset * width
    return values.buffers()[1].to_pybytes()[start : start + len(values) * width]


def _by_tag() -> dict[int, list[Any]]:
    return {CURRENT: [], _PRIOR: [], _GONE: [], _PERSISTING: []}


class _MarkNew(PerBundle):
    """Joins this run's chunk occurrences with the prior state by hash bucket, in Arrow, into
    the run's delta: which hashes are new, which occurrences were added, which hashes are
    gone from the current state. The buckets of a bundle are decided together, up to
    ``batch_bytes`` of their messages at a time: each decision is about one hash, and a hash
    is in one bucket, so a few Arrow calls over many buckets decide what one bucket at a
    time would, with a few hundred calls fewer (a run has 256 buckets).

    A bucket holds the hashes and ids of this run's occurrences (of the documents chunked
    this run, in staged files), where the prior rows' hash counts lie (read from their file
    only for a bucket with occurrences or removed rows), the hash counts of the rows this
    run removes (``_GONE``) and the ids of the re-chunked documents' prior rows that are
    still current (``_PERSISTING``). Every occurrence is decided (a byte of flags, ``IS_NEW``,
    ``ADDED``, ``CHOSEN``, per occurrence in the order of its message: ``(staged path,
    ((bucket, flags), ...))``, one element per staged file and batch of buckets): its hash
    is new
    when the prior state lacks it; each new hash has exactly one chosen occurrence, the one
    for chunks/ (the smallest chunk_id, so the choice does not depend on grouping order); an
    occurrence whose id is not among the persisting ones is added. A hash is retired when
    every prior row of it is removed and no occurrence of this run has it (prior - removed
    + this run's is 0: no term is negative, and a persisting row is not removed). A bucket
    with neither occurrences nor removed rows (every bucket of a run in which nothing
    changed) costs only its grouping.
    """

    def __init__(self, batch_bytes: int = MARK_BATCH_BYTES) -> None:
        self._batch_bytes = batch_bytes

    def start_bundle(self) -> None:
        super().start_bundle()
        self._waiting, self._waiting_bytes = _by_tag(), 0

    def process(self, element: tuple[str, Iterable[tuple[int, Any]]]):
        bucket, values = element
        parts = _by_tag()
        for tag, payload in values:
            parts[tag].append(payload)
        if not parts[CURRENT] and not parts[_GONE]:
            return
        waiting = self._waiting
        waiting[CURRENT] += [(bucket, path, message) for path, message in parts[CURRENT]]
        for tag in (_PRIOR, _GONE, _PERSISTING):
            waiting[tag] += parts[tag]
        self._waiting_bytes += (
            sum(len(message) for _, message in parts[CURRENT])
            + sum(ref[2] for ref in parts[_PRIOR])
            + sum(len(message) for message in parts[_GONE] + parts[_PERSISTING])
        )
        if self._waiting_bytes >= self._batch_bytes:
            yield from self._decide()

    def finish_bundle(self):
        yield from in_global_window(self._decide())
        yield from super().finish_bundle()

    def _decide(self):
        """Decides every occurrence of the buckets held, and finds their retired hashes."""
        parts = self._waiting
        self._waiting, self._waiting_bytes = _by_tag(), 0
        current = parts[CURRENT]
        batch, counts = _read_staged_ids_together([message for _, _, message in current])
        ids = pa.Table.from_batches([batch])
        prior_counts = _ipc_table(prior.read_messages(parts[_PRIOR]), prior.HASH_COUNTS)
        if parts[_GONE]:
            yield from self._retired(ids, prior_counts, parts[_GONE])
        if not current:
            return
        first = _first_ids(ids)
        # Membership needs no sum: a hash in several prior messages is in the prior once.
        seen = prior_counts["chunk_hash"]
        new = first.filter(pc.invert(pc.is_in(first["chunk_hash"], value_set=seen)))
        persisting_ids = _ipc_table(parts[_PERSISTING], prior.IDS)["chunk_id"]
        persisting = digests.from_hex(persisting_ids, digests.ID_BYTES)
        flags = _flags(
            (IS_NEW, pc.is_in(ids["chunk_hash"], value_set=new["chunk_hash"])),
            (ADDED, pc.invert(pc.is_in(ids["chunk_id"], value_set=persisting))),
            (CHOSEN, pc.is_in(ids["chunk_id"], value_set=new["chunk_id"])),
        )
        # One element per staged file: its buckets' decisions travel together, not as an
        # element each (a night's few changed documents touch nearly every bucket).
        by_path: dict[str, list[tuple[str, bytes]]] = {}
        start = 0
        for (bucket, path, _), n in zip(current, counts, strict=True):
            by_path.setdefault(path, []).append((bucket, flags[start : start + n]))
            start += n
        for path, decisions in sorted(by_path.items()):
            yield path, tuple(decisions)

    def _retired(self, ids: pa.Table, prior_counts: pa.Table, gone_counts: list[bytes]):
        """The ``retired/`` rows of the buckets: hashes of removed rows left with no current
        occurrence (``ids``: this run's occurrences; ``prior_counts``: the prior rows' hash
        counts). Only the rows of those hashes are counted, over whole arrays: the work is
        in proportion to what was removed and to the rows, not to the messages."""
        gone = _ipc_table(gone_counts, prior.HASH_COUNTS)
        candidates = pc.unique(gone["chunk_hash"].combine_chunks())
        total = np.zeros(len(candidates), np.int64)

        def count(hashes: pa.ChunkedArray, rows: pa.ChunkedArray | None, sign: int) -> None:
            at = pc.index_in(hashes, value_set=candidates)
            among = pc.is_valid(at)
            where = pc.filter(at, among).to_numpy()
            n = 1 if rows is None else pc.filter(rows, among).to_numpy()
            np.add.at(total, where, sign * np.asarray(n, np.int64))

        count(prior_counts["chunk_hash"], prior_counts["rows"], 1)
        count(gone["chunk_hash"], gone["rows"], -1)
        count(ids["chunk_hash"], None, 1)
        # Bytes sort as their hex does.
        counted = zip(candidates.to_pylist(), total.tolist(), strict=True)
        retired = sorted(h for h, n in counted if n == 0)
        if retired:
            self._tally["hashes_retired"] += len(retired)
            hashes = digests.to_hex(pa.array(retired, pa.binary(digests.HASH_BYTES)))
            table = pa.table([hashes], schema=schema.RETIRED)
            yield beam.pvalue.TaggedOutput(_RETIRED, table)


def staged_tables(path: str, decided: Iterable[tuple[str, bytes]]) -> dict[str, pa.Table]:
    """A staged file's rows split by their decisions (``(bucket, flags)`` of ``MarkNew``):
    ``{"manifest": every row, flagged is_new; "added": its added occurrences; "chunks": the
    chosen ones, text included}``, each in the file's row order; "added" is the manifest's
    table itself when every row is added (a first run). Every staged row has exactly one
    decision (it is in one bucket), or ``RuntimeError``."""
    rows = staging.read(path)
    flags = _row_flags(path, rows, decided)
    is_new, added, chosen = (_flag(flags, f) for f in (IS_NEW, ADDED, CHOSEN))
    tables = {"manifest": prior.as_table(rows, schema.MANIFEST, is_new=is_new)}
    if pc.all(added).as_py():
        tables[_ADDED] = tables["manifest"]  # the same columns: ADDED is MANIFEST's schema
    elif pc.any(added).as_py():
        added_rows, added_new = _where(added, rows, is_new)
        tables[_ADDED] = prior.as_table(added_rows, schema.ADDED, is_new=added_new)
    else:
        tables[_ADDED] = schema.ADDED.empty_table()
    (tables[_CHUNKS],) = _where(chosen, rows)
    return tables


class _FinishStaged(PerBundle):
    """``(staged path, [((bucket, flags), ...)])`` (the decisions of a staged file, from as
    many elements as batches of buckets decided them) → ``(table, path)`` of the files its bundle
    wrote under ``temp`` (``sinks.TableFiles``): the staged file's rows as manifest rows
    flagged ``is_new``, its added occurrences and its chosen ones, text included
    (``staged_tables``), written where they are decided, for ``WriteTables`` to name, each
    row once: rows that are both manifest and added rows (all of a first run's) are written
    once for both tables; with ``text``, each chunks/ file is also the text store's file of
    its rows (``textstore.TEXT``), for the run's publishing step to name instead of reading
    chunks/ back.

    With ``model_window`` (the embedding model's input window in tokens, where the tokenizer
    tells it, so that ``token_count`` is in the model's own tokens), it also counts the chunks
    to embed longer than that window: the model would read only their start.
    """

    def __init__(self, temp: str, model_window: int | None = None, *, text: bool = False) -> None:
        self._temp = temp
        self._model_window = model_window
        self._text = text

    def start_bundle(self) -> None:
        super().start_bundle()
        # New files for every attempt: a failed one's are never named.
        self._files = sinks.TableFiles(self._temp, text=self._text)

    def process(self, element: tuple[str, Iterable[Iterable[tuple[str, bytes]]]]) -> None:
        path, decided = element
        tables = staged_tables(path, itertools.chain.from_iterable(decided))
        manifest, embed = tables["manifest"], tables[_CHUNKS]
        tally = self._tally
        tally["chunks_total"] += manifest.num_rows
        tally["chunks_new_occurrences"] += pc.sum(manifest["is_new"]).as_py() or 0
        tally["occurrences_added"] += tables[_ADDED].num_rows
        if embed.num_rows:
            tally["chunks_to_embed"] += embed.num_rows
            tally["tokens_to_embed"] += pc.sum(embed["token_count"]).as_py()
            if self._model_window is not None:
                over = pc.greater(embed["token_count"], self._model_window)
                tally["chunks_over_model_window"] += pc.sum(over).as_py() or 0
        if tables[_ADDED] is manifest:  # every row added: its rows written once for both
            self._files.write("manifest", manifest, also=_ADDED)
        else:
            self._files.write("manifest", manifest)
            self._files.write(_ADDED, tables[_ADDED])
        self._files.write(_CHUNKS, embed)

    def finish_bundle(self):
        yield from super().finish_bundle()
        for written in self._files.close():
            yield window.GlobalWindows.windowed_value(written)


def _where(mask: pa.ChunkedArray, *data: Any) -> list[Any]:
    """Each of ``data`` filtered by ``mask``, not copied when the mask keeps every row (on
    a first run every occurrence is added and most are chosen)."""
    if pc.all(mask).as_py():
        return list(data)
    return [d.filter(mask) for d in data]


def _flags(*named: tuple[int, pa.Array | pa.ChunkedArray]) -> bytes:
    """Boolean columns of equal length as one byte a row: the flag of each set where its
    column is true."""
    out = np.zeros(len(named[0][1]), np.uint8)
    for flag, column in named:
        out |= np.asarray(column, dtype=bool).astype(np.uint8) * np.uint8(flag)
    return out.tobytes()


def _row_flags(path: str, rows: pa.Table, decided: Iterable[tuple[str, bytes]]) -> np.ndarray:
    """The flags of each row of a staged file, in row order, from its decisions by bucket
    (each in the order of the file's rows of that bucket, as ``staged_ids`` sent them).
    Every row has exactly one decision, or ``RuntimeError``."""
    order, runs = prior.bucket_runs(rows["chunk_hash"])
    decisions = list(decided)
    by_bucket = dict(decisions)
    in_order = np.zeros(rows.num_rows, np.uint8)
    found = 0
    for bucket, start, count in runs:
        answer = by_bucket.pop(bucket, b"")
        if len(answer) == count:
            in_order[start : start + count] = np.frombuffer(answer, np.uint8)
            found += count
    if found != rows.num_rows or by_bucket or len(decisions) != len(runs):
        raise RuntimeError(
            f"staged file {path}: {rows.num_rows} occurrences, {found} of them decided"
            + (f", decisions for buckets it lacks: {sorted(by_bucket)}" if by_bucket else "")
        )
    by_row = np.empty(rows.num_rows, np.uint8)
    by_row[np.asarray(order)] = in_order
    return by_row


def _flag(flags: np.ndarray, flag: int) -> pa.Array:
    """Where ``flag`` is set in ``flags``, as an Arrow boolean array made from the NumPy
    array's bytes: ``pa.array`` of a NumPy array would load ``numpy.ma`` on a process's
    first call, 15-20 ms that a night paid only when something changed."""
    is_set = np.ascontiguousarray(flags & np.uint8(flag))
    values = pa.Array.from_buffers(pa.uint8(), len(is_set), [None, pa.py_buffer(is_set)])
    return pc.cast(values, pa.bool_())


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


class MarkNew(beam.PTransform):
    """``{"occurrences": (bucket, (CURRENT, (staged path, message of STAGED_IDS)))}`` (what
    ``ProcessDocuments`` stages) and, when there is a prior, ``"prior_hashes"`` (where the
    prior rows' hash counts lie: ``(bucket, (prior.HASHES_TAG, prior.MessageRef))``),
    ``"gone"`` (the hash counts of the rows this run removes, ``(bucket, (prior.GONE_TAG,
    IPC message))``) and ``"persisting"`` (ids of re-chunked documents' prior rows still
    current, ``(bucket, (prior.PERSISTING_TAG, IPC message))``), each tagged by the step
    that makes it (``prior``) → ``{"decided": (staged path, ((bucket, flags), ...)), "retired":
    retired/ tables, "counts": (name, n)}``, by hash bucket (``_MarkNew``)."""

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        names = ("occurrences", "prior_hashes", "gone", "persisting")
        by_bucket = [inputs[name] for name in names if name in inputs]
        marked = (
            tuple(by_bucket)
            | "FlattenByBucket" >> beam.Flatten()
            | "GroupByBucket" >> beam.GroupByKey()
            | "Mark" >> beam.ParDo(_MarkNew()).with_outputs(_RETIRED, COUNTS, main="decided")
        )
        return {"decided": marked.decided, "retired": marked[_RETIRED], "counts": marked[COUNTS]}


@beam.typehints.with_input_types(tuple[str, tuple[tuple[str, bytes], ...]])
class FinishStaged(beam.PTransform):
    """``(staged path, ((bucket, flags), ...))`` (``MarkNew``'s) → ``{"files": (table, path),
    "counts": (name, n)}``: each staged file read once, its rows split by their decisions and
    written under ``temp`` where they are decided (``_FinishStaged``): the manifest/,
    chunks/ and added/ rows, and with ``text`` the text store's rows of chunks/.
    ``model_window``: the embedding model's input window in tokens, where it is known."""

    def __init__(self, temp: str, *, model_window: int | None = None, text: bool = False) -> None:
        super().__init__()
        self._temp = temp
        self._model_window = model_window
        self._text = text

    def expand(
        self, decided: beam.PCollection[tuple[str, tuple[tuple[str, bytes], ...]]]
    ) -> dict[str, beam.PCollection]:
        finish = _FinishStaged(self._temp, self._model_window, text=self._text)
        finished = (
            decided
            | "GroupByStagedFile" >> beam.GroupByKey()
            | "Finish" >> beam.ParDo(finish).with_outputs(COUNTS, main="files")
        )
        return {"files": finished.files, "counts": finished[COUNTS]}
