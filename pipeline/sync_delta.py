"""The incremental path of ``chunkmill sync``: an index that holds run R, when LATEST's chain
reaches R, changes by what the runs since R changed, read from the runs' own tables instead
of comparing the whole index with the whole manifest (docs/index-sync.md).

The documents those runs touched are the ``doc_id`` of their ``added/`` and ``removed/``
rows, and the documents whose content or chunking config differs between R's manifest and
LATEST's: a document re-chunked into the same texts at other offsets (an edit between two
chunks) adds and removes nothing, yet its chunks moved. Those documents' rows in R's manifest
and in LATEST's give the ids to delete and the rows to write (new ids, and ids whose
metadata changed). ``retired/`` lists hashes gone from the state: an index keyed by chunk_id
deletes by the ids of ``removed/``, so it needs none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from chunkmill import index_digest, vector_index
from chunkmill.pipeline.runs import RunInfo, StateFiles, list_runs
from chunkmill.transforms import lineage, parquet_io, runstate

# The per-document columns whose change means a document was chunked again.
_DOCUMENT = ("doc_id", "content_sha256", "config_fingerprint")


class NoShortcut(Exception):
    """Why the runs since the index's run cannot tell the drift: one line."""


@dataclass(frozen=True)
class Delta:
    since: str  # the run the index held
    runs: list[str]  # the runs after it, oldest first, LATEST last
    documents: int  # documents touched
    drift: vector_index.Drift
    rows: pa.Table  # LATEST's rows to write: chunk_id and the metadata
    state_rows: int  # rows of LATEST's state


def delta(output: str, state: StateFiles, applied: tuple[str, str] | None, model_key: str) -> Delta:
    """What changes an index holding run ``applied`` (``(run_id, model_key)``) into LATEST's
    state ``state``; ``NoShortcut`` when that cannot be told from the runs in between."""
    if applied is None:
        raise NoShortcut("the index records no run")
    since, key = applied
    if key != model_key:
        raise NoShortcut(f"the index holds vectors of model key {key}, not {model_key}")
    chain: list[str] = []
    for run in lineage.walk(output, state.run_id):
        if run == since:
            break
        chain.append(run)
    else:
        raise NoShortcut(
            f"the index's run {since} is not on LATEST's chain (a run between them is gone, "
            "or the index holds another output's run)"
        )
    finished = {r.run_id: r for r in list_runs(output) if r.finished}
    for run in [since, *chain]:
        if run not in finished:
            raise NoShortcut(f"run {run} is gone or unfinished")
    state_rows = sum(parquet_io.footer_rows(path) for path in state.manifest)
    if not chain:
        empty = pa.array([], pa.string())
        drift = vector_index.Drift(empty, empty, empty, empty, empty, empty, empty)
        return Delta(since, [], 0, drift, pa.table({"chunk_id": empty}), state_rows)
    try:
        touched = _touched(output, [finished[r] for r in chain])
        before = _files(output, finished[since], "manifest")
        touched = _unique([touched, _changed_documents(before, state.manifest)])
        columns = ["chunk_id", *vector_index.METADATA]
        was = _rows_of(before, columns, touched)
        now = _rows_of(state.manifest, columns, touched)
    except parquet_io.UnreadableTable as e:
        raise NoShortcut(f"a table of the runs in between cannot be read: {e}") from None
    _, rows, drift = index_digest.state_delta(was, now)
    return Delta(since, chain[::-1], len(touched), drift, rows, state_rows)


def _files(output: str, run: RunInfo, table: str) -> list[str]:
    listed = (run.tables or {}).get(table)
    if listed is None:
        raise NoShortcut(f"run {run.run_id} has no {table}/ table (written by an older release)")
    base = runstate.run_dir(output, run.run_id)
    return [FileSystems.join(base, f["path"]) for f in listed]


def _touched(output: str, runs: Sequence[RunInfo]) -> pa.Array:
    """The documents of every ``added/`` and ``removed/`` row of ``runs``."""
    found: list[pa.Array] = []
    for run in runs:
        for table in ("added", "removed"):
            for batch in parquet_io.read_parquet_batches(_files(output, run, table), ["doc_id"]):
                found.append(pc.unique(batch["doc_id"]).cast(pa.string()))
    return _unique(found)


def _documents(paths: Sequence[str]) -> pa.Table:
    """One row per document of a manifest: ``doc_id`` and ``key``, its content and config."""
    parts = [pa.table({"doc_id": pa.array([], pa.string()), "key": pa.array([], pa.string())})]
    for batch in parquet_io.read_parquet_batches(paths, _DOCUMENT):
        key = pc.binary_join_element_wise(*(batch[c] for c in _DOCUMENT), "\x1f")
        found = pa.table({"doc_id": batch["doc_id"], "key": key})
        parts.append(found.group_by(["doc_id", "key"]).aggregate([]).select(["doc_id", "key"]))
    merged = pa.concat_tables(parts)
    return merged.group_by(["doc_id", "key"]).aggregate([]).select(["doc_id", "key"])


def _changed_documents(before: Sequence[str], after: Sequence[str]) -> pa.Array:
    """The documents whose content or config differs between two manifests (or that only
    one of them has)."""
    was, now = _documents(before), _documents(after)
    gone = was.filter(pc.invert(pc.is_in(was["key"], value_set=now["key"])))["doc_id"]
    new = now.filter(pc.invert(pc.is_in(now["key"], value_set=was["key"])))["doc_id"]
    return _unique([gone, new])


def _rows_of(paths: Sequence[str], columns: Sequence[str], documents: pa.Array) -> pa.Table:
    """The rows of a manifest whose document is one of ``documents``."""
    from chunkmill import schema

    kept = [pa.table({c: pa.array([], schema.MANIFEST.field(c).type) for c in columns})]
    for batch in parquet_io.read_parquet_batches(paths, columns):
        rows = batch.filter(pc.is_in(batch["doc_id"], value_set=documents))
        if rows.num_rows:
            kept.append(rows.cast(kept[0].schema))
    return pa.concat_tables(kept)


def _unique(arrays: Iterable[pa.Array | pa.ChunkedArray]) -> pa.Array:
    chunks = [c for a in arrays for c in (a.chunks if isinstance(a, pa.ChunkedArray) else [a])]
    unique: pa.Array = pc.unique(pa.chunked_array(chunks, pa.string()))
    return unique
