"""``chunkmill sync`` and ``chunkmill verify``: a pgvector index kept equal to LATEST.

``verify`` compares every column of every index row with LATEST's manifest, the text of its
hash and the store's vector (``chunkmill.index_digest``): ids missing, ids extra, hashes,
model keys, texts, metadata and vectors. ``sync`` (and ``verify --repair``) mends all of it
in one transaction, with the text from the runs' chunks/ tables and the vectors from the
embedding store. When the index holds a run on LATEST's chain, ``sync`` applies only what
the runs since changed (``sync_delta``); otherwise, or with ``--full``, it reconciles the
whole manifest, which needs no run in between: a sync that missed nights, or whose runs were
deleted, still converges. docs/index-sync.md explains both paths.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import index_guard, vector_index
from chunkmill.pipeline.options import UsageError

if TYPE_CHECKING:
    from chunkmill.pipeline.commands.sync import SyncSettings


def _model_key(output: str, given: str | None) -> tuple[str, int]:
    """The model key to use and its dimension: the one given, else the only key with
    vectors (a key whose embed was stopped before its first vector file does not count)."""
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.transforms import embedstore

    root = FileSystems.join(output, embedstore.EMBEDDINGS)
    pattern = FileSystems.join(root, "*", embedstore.MODEL_INFO)
    keys = sorted(m.path.split("/")[-2] for m in FileSystems.match([pattern])[0].metadata_list)
    if given is None:
        with_vectors = [k for k in keys if embedstore.part_paths(output, k)]
        if not with_vectors:
            raise UsageError(f"no vectors in {root}: run chunkmill embed --output {output} first")
        if len(with_vectors) > 1:
            named = "; ".join(embedstore.label(output, k) for k in with_vectors)
            raise UsageError(
                f"{root} holds vectors of {len(with_vectors)} models ({named}); choose one "
                "with --model-key KEY"
            )
        given = with_vectors[0]
    info = embedstore.read_model_info(output, given)
    if info is None:
        raise UsageError(f"--model-key {given}: no vectors of that key in {root}")
    return given, int(info["dimension"])


@dataclass(frozen=True)
class Plan:
    run_id: str
    drift: vector_index.Drift
    rows: pa.Table  # the manifest's rows of the ids to write: chunk_id and the metadata
    state_rows: int  # rows of the state
    chunks_files: list[str]
    path: str  # how the drift was found, as sync reports it


def plan(
    settings: SyncSettings, index: vector_index.PgVectorIndex, model_key: str, why: str = ""
) -> Plan:
    """The drift between the whole index and the whole of LATEST's state, every column
    compared (``index_digest.compare``)."""
    from chunkmill import index_digest
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import embedstore, parquet_io

    state = state_files(settings.output, None)
    columns = ["chunk_id", *vector_index.METADATA]

    def manifest() -> Iterator[pa.Table]:
        return parquet_io.read_parquet_batches(state.manifest, columns)

    state_rows = sum(parquet_io.footer_rows(path) for path in state.manifest)

    def vectors(share: int, shares: int) -> index_digest.VectorDigests:
        stored = embedstore.read_vectors(settings.output, model_key)
        return index_digest.VectorDigests(index_digest.in_share(stored, share, shares))

    found = index_digest.compare(
        index.connection, index.table, manifest, (state_rows, index.count()), model_key, vectors
    )
    path = f"full reconciliation ({why})" if why else "full reconciliation"
    return Plan(state.run_id, found.drift, found.rows, state_rows, state.chunks, path)


def incremental_plan(
    settings: SyncSettings, index: vector_index.PgVectorIndex, model_key: str
) -> Plan:
    """The drift the runs since the index's run made (``sync_delta``); ``NoShortcut`` when
    they cannot tell it."""
    from chunkmill.pipeline import sync_delta
    from chunkmill.pipeline.runs import state_files

    state = state_files(settings.output, None)
    found = sync_delta.delta(settings.output, state, index.last_applied(), model_key)
    runs = f"{len(found.runs)} run{'' if len(found.runs) == 1 else 's'}"
    path = (
        f"incremental from run {found.since} ({runs} after it, {found.documents} documents touched)"
    )
    return Plan(state.run_id, found.drift, found.rows, found.state_rows, state.chunks, path)


def rows_to_write(settings: SyncSettings, planned: Plan, model_key: str) -> pa.Table | None:
    """The manifest rows to write, with ``text`` and ``vector`` (None when there are none);
    raises ``Missing`` naming what to run when a text or a vector is not there."""
    from chunkmill.transforms import embedstore, parquet_io

    ids = planned.drift.to_write
    if not len(ids):
        return None
    rows = planned.rows.filter(pc.is_in(planned.rows["chunk_id"], value_set=ids))
    hashes = pc.unique(rows["chunk_hash"])
    texts = _first_of(
        (
            t.select(["chunk_hash", "text", "text_with_context"])
            for t in parquet_io.read_parquet_batches(
                planned.chunks_files, ["chunk_hash", "text", "text_with_context"]
            )
        ),
        hashes,
    )
    vectors = _first_of(embedstore.read_vectors(settings.output, model_key, hashes), hashes)
    for what, found, remedy in (
        ("text", texts, index_guard.LOST_TEXT_REMEDY),
        ("vector", vectors, f"run chunkmill embed --output {settings.output}"),
    ):
        lacking = len(hashes) - found.num_rows
        if lacking:
            raise Missing(f"{lacking} chunks of run {planned.run_id} have no {what}; {remedy}")
    embedded = pc.coalesce(texts["text_with_context"], texts["text"])
    at_text = pc.index_in(rows["chunk_hash"], value_set=texts["chunk_hash"])
    at_vector = pc.index_in(rows["chunk_hash"], value_set=vectors["chunk_hash"])
    rows = rows.append_column("text", pc.take(embedded, at_text))
    return rows.append_column("vector", pc.take(vectors["vector"], at_vector)).combine_chunks()


class Missing(Exception):
    """A text or a vector the index needs is not there: one line saying what to run."""


def _first_of(batches: Iterator[pa.Table], hashes: pa.Array) -> pa.Table:
    """The first row of each of ``hashes`` found in ``batches``; stops reading when all are."""
    found: list[pa.Table] = []
    seen = pa.array([], pa.string())
    for batch in batches:
        wanted = pc.and_(
            pc.is_in(batch["chunk_hash"], value_set=hashes),
            pc.invert(pc.is_in(batch["chunk_hash"], value_set=seen)),
        )
        batch = batch.filter(wanted)
        if batch.num_rows:
            first = pc.unique(batch["chunk_hash"])
            index = pc.index_in(first, value_set=batch["chunk_hash"])
            batch = batch.take(index)
            found.append(batch)
            seen = pa.concat_arrays([seen, first.cast(pa.string())])
            if len(seen) == len(hashes):
                break
    if not found:
        return pa.table({"chunk_hash": pa.array([], pa.string())})
    return pa.concat_tables(found)


def command(name: str, settings: SyncSettings) -> int:
    """``chunkmill sync`` (``name`` "sync") or ``chunkmill verify``, with its settings parsed
    (``chunkmill.pipeline.commands.sync``)."""
    import psycopg

    from chunkmill.pipeline.preflight import prepare_filesystems

    started = time.monotonic()
    writes = name == "sync" or settings.repair
    opened = vector_index.connect if writes else vector_index.connect_read_only
    try:
        conn = opened(settings.url)  # before reading anything big
    except vector_index.IndexUnavailable as e:
        raise UsageError(str(e)) from None
    prepare_filesystems([])
    try:
        return _reconcile(name, settings, conn, started)
    except (vector_index.IndexUnavailable, index_guard.Refused) as e:
        raise UsageError(str(e)) from None
    except (vector_index.DatabaseError, psycopg.Error) as e:  # rolled back: a timeout, a
        line = index_guard.one_line(e, settings.url)  # lost connection, a permission
        raise UsageError(f"{name} failed, nothing applied: {line}") from None
    except index_guard.DatabaseFailed as e:
        raise UsageError(str(e)) from None
    finally:
        conn.close()  # releases the table's lock


def _reconcile(name: str, settings: SyncSettings, conn: object, started: float) -> int:
    """``_compare_and_mend``, with a damaged embedding store said in one line."""
    from chunkmill.transforms import embedstore

    try:
        return _compare_and_mend(name, settings, conn, started)
    except embedstore.StoreDamaged as e:  # read before anything is applied
        print(f"chunkmill: {name} failed, nothing applied: {e}", file=sys.stderr)
        return 1


def _compare_and_mend(name: str, settings: SyncSettings, conn: object, started: float) -> int:
    """Compares the index with LATEST's state; mends it (sync, verify --repair)."""
    from chunkmill.pipeline import sync_delta

    writes = name == "sync" or settings.repair
    found = _guard_before(settings, conn, writes)
    model_key, dimension = _model_key(settings.output, settings.model_key)
    index = vector_index.PgVectorIndex(conn, settings.table)
    _check_width(settings, index, found, model_key, dimension)
    if writes:
        index.ensure(dimension)
    if name == "verify":
        planned = plan(settings, index, model_key)
    elif settings.full:
        planned = plan(settings, index, model_key, "--full")
    else:
        try:
            planned = incremental_plan(settings, index, model_key)
        except sync_delta.NoShortcut as e:
            planned = plan(settings, index, model_key, str(e))
    drift = planned.drift
    if name == "verify":
        for line in drift.lines():
            print(line)
        in_sync = drift.total == 0
        verdict = "is in sync with" if in_sync else "differs from"
        print(f"{settings.table} {verdict} run {planned.run_id}")
        if in_sync or not settings.repair:
            return 0 if in_sync else 1
    else:
        print(f"sync path: {planned.path}")
    order = _guard_apply(settings, conn, found, planned)
    try:
        rows = rows_to_write(settings, planned, model_key)
    except Missing as e:
        print(f"chunkmill: nothing applied: {e}", file=sys.stderr)
        return 1
    written = index.apply(
        delete=drift.extra,
        rows=iter(()) if rows is None else vector_index.batches(rows),
        run_id=planned.run_id,
        model_key=model_key,
        output=settings.output,
        run_order=index_guard.encode_order(order),
    )
    seconds = time.monotonic() - started
    inserted = len(drift.missing)
    print(
        f"applied run {planned.run_id} to {settings.table}: {inserted} inserted, "
        f"{written - inserted} updated, {len(drift.extra)} deleted, "
        f"{planned.state_rows - written} unchanged in {seconds:.1f} s"
    )
    _build_ann(settings, conn, name, planned.run_id)
    return 0


# ---------------------------------------------------------------------------------------------
# The hooks of the guards (chunkmill.index_guard).


def _guard_before(settings: SyncSettings, conn: object, writes: bool) -> index_guard.Found:
    """The table's lock taken (shared for reading), the database inspected before anything is
    created in it, and the table's owner checked."""
    index_guard.lock(conn, settings.table, shared=not writes)
    found = index_guard.inspect(conn, settings.table)
    if not writes and not found.table_exists:
        raise UsageError(
            f"no table {settings.table} in the database: run chunkmill sync first, or --table"
        )
    index_guard.check_owner(found, settings.table, settings.output, take_over=settings.take_over)
    return found


def _check_width(
    settings: SyncSettings,
    index: vector_index.PgVectorIndex,
    found: index_guard.Found,
    model_key: str,
    dimension: int,
) -> None:
    """Vectors of another width are another model's: refused, naming both models."""
    from chunkmill.transforms import embedstore

    held = index.dimension()
    if held is None or held == dimension:
        return
    key = (found.recorded or {}).get("model_key")
    theirs = f" of {embedstore.label(settings.output, key)}" if key else ""
    raise UsageError(
        f"table {settings.table} holds vectors{theirs} of {held} dimensions, and "
        f"{embedstore.label(settings.output, model_key)} makes {dimension}: sync this model "
        "into another --table"
    )


def _guard_apply(
    settings: SyncSettings, conn: object, found: index_guard.Found, planned: Plan
) -> tuple[str, int, str, str] | None:
    """The forward and removal checks of applying ``planned``; returns its run's chain order."""
    from chunkmill.transforms import lineage, runstate

    missing: list[str] = []

    def read(run: str) -> dict[str, Any] | None:
        report = lineage.read_report(settings.output, run)
        if report is None:
            missing.append(run)
        return report

    chain = []
    for run in lineage.walk(settings.output, planned.run_id, read):
        chain.append(run)
        if run == found.run_id:  # the walk back stops at the run the table holds
            break
    own = lineage.read_report(settings.output, planned.run_id) or {}
    order = runstate.run_order(own.get("started_at"), planned.run_id, lineage.chain_block(own))
    if not (settings.take_over and found.owned_by_another(settings.output)):
        index_guard.check_forward(
            found,
            settings.table,
            planned.run_id,
            chain,
            chain_broken=bool(missing),
            run_order=order,
            allow_rewind=settings.allow_rewind,
        )
    rows = index_guard.row_count(conn, settings.table)
    index_guard.check_removal(
        settings.table,
        rows,
        len(planned.drift.extra),
        max_ratio=settings.max_delete_ratio,
        run_id=planned.run_id,
    )
    return order


def _build_ann(settings: SyncSettings, conn: object, name: str, run_id: str) -> None:
    import psycopg

    try:
        index_guard.ensure_ann(conn, settings.table, settings.ann)
    except psycopg.Error as e:
        raise index_guard.DatabaseFailed(
            f"applied run {run_id} to {settings.table}, but its {settings.ann} index was not "
            f"built ({index_guard.one_line(e, settings.url)}); the next {name} builds it"
        ) from None
