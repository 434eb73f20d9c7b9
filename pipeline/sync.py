"""``chunkmill sync`` and ``chunkmill verify``: a pgvector index kept equal to LATEST.

Both compare the index with LATEST's manifest, by chunk id (``chunkmill.vector_index``):
ids missing, ids extra, ids whose hash changed, vectors of another model key, and text that
is not the text of its hash. ``sync`` (and ``verify --repair``) mends all of it in one
transaction, with the text from the runs' chunks/ tables and the vectors from the embedding
store. Reconciling against the whole manifest needs no run in between: a sync that missed
nights, or whose runs were deleted, still converges.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import vector_index
from chunkmill.pipeline.options import DEFAULT_OUTPUT, Parser, UsageError, absolute, location


@dataclass(frozen=True)
class SyncSettings:
    output: str
    url: str
    table: str
    model_key: str | None
    repair: bool


def parse(command: str, argv: Sequence[str]) -> SyncSettings:
    parser = Parser(prog=f"chunkmill {command}", allow_abbrev=False)
    parser.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    parser.add_argument(
        "--to", required=True, metavar="URL", help="the database: postgresql://USER@HOST/DB"
    )
    parser.add_argument(
        "--table", default=vector_index.DEFAULT_TABLE, help="the index table (default: %(default)s)"
    )
    parser.add_argument(
        "--model-key",
        help="the vectors to use: a key under OUTPUT/embeddings/ (default: the only one)",
    )
    if command == "verify":
        parser.add_argument("--repair", action="store_true", help="mend the drift found")
    args = parser.parse_args(list(argv))
    if not args.to.startswith(("postgresql://", "postgres://")):
        raise UsageError(f"--to {args.to}: not a postgresql:// URL")
    output = absolute(args.output).rstrip("/") or "/"
    return SyncSettings(
        output, args.to, args.table, args.model_key, bool(getattr(args, "repair", False))
    )


def _model_key(output: str, given: str | None) -> tuple[str, int]:
    """The model key to use and its dimension."""
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.transforms import embedstore

    root = FileSystems.join(output, embedstore.EMBEDDINGS)
    pattern = FileSystems.join(root, "*", embedstore.MODEL_INFO)
    keys = sorted(m.path.split("/")[-2] for m in FileSystems.match([pattern])[0].metadata_list)
    if given is None:
        if not keys:
            raise UsageError(f"no vectors in {root}: run chunkmill embed --output {output} first")
        if len(keys) > 1:
            raise UsageError(
                f"{root} holds vectors of {len(keys)} models; choose one with "
                f"--model-key ({', '.join(keys)})"
            )
        given = keys[0]
    info = embedstore.read_model_info(output, given)
    if info is None:
        raise UsageError(f"--model-key {given}: no vectors of that key in {root}")
    return given, int(info["dimension"])


@dataclass(frozen=True)
class Plan:
    run_id: str
    state: pa.Table  # the manifest's rows: chunk_id and the metadata
    drift: vector_index.Drift
    chunks_files: list[str]


def plan(settings: SyncSettings, index: vector_index.PgVectorIndex, model_key: str) -> Plan:
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import tables

    state = state_files(settings.output, None)
    columns = ["chunk_id", *vector_index.METADATA]
    parts = list(tables.read_parquet_batches(state.manifest, columns))
    manifest = pa.concat_tables(parts).combine_chunks() if parts else None
    if manifest is None:
        empty = {c: pa.array([], pa.string()) for c in ("chunk_id", "chunk_hash")}
        manifest = pa.table(empty)
    text_differs = index.text_differs()
    wanted = manifest.select(["chunk_id", "chunk_hash"])
    drift = vector_index.diff(wanted, index.present(), model_key, text_differs)
    return Plan(state.run_id, manifest, drift, state.chunks)


def rows_to_write(settings: SyncSettings, planned: Plan, model_key: str) -> pa.Table | None:
    """The manifest rows to write, with ``text`` and ``vector`` (None when there are none);
    raises ``Missing`` naming what to run when a text or a vector is not there."""
    from chunkmill.transforms import embedstore, tables

    ids = planned.drift.to_write
    if not len(ids):
        return None
    rows = planned.state.filter(pc.is_in(planned.state["chunk_id"], value_set=ids))
    hashes = pc.unique(rows["chunk_hash"])
    texts = _first_of(
        (
            t.select(["chunk_hash", "text", "text_with_context"])
            for t in tables.read_parquet_batches(
                planned.chunks_files, ["chunk_hash", "text", "text_with_context"]
            )
        ),
        hashes,
    )
    vectors = _first_of(embedstore.read_vectors(settings.output, model_key, hashes), hashes)
    for what, found, remedy in (
        ("text", texts, "re-run chunkmill run with --prior-manifest none"),
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


def command(name: str, argv: Sequence[str]) -> int:
    """``chunkmill sync`` (``name`` "sync") or ``chunkmill verify``."""
    from chunkmill.pipeline.preflight import prepare_filesystems

    settings = parse(name, argv)
    started = time.monotonic()
    try:
        conn = vector_index.connect(settings.url)  # before reading anything big
    except vector_index.IndexUnavailable as e:
        raise UsageError(str(e)) from None
    prepare_filesystems([])
    try:
        return _reconcile(name, settings, conn, started)
    except vector_index.IndexUnavailable as e:
        raise UsageError(str(e)) from None
    except vector_index.DatabaseError as e:  # the transaction was rolled back
        print(f"chunkmill: {name} failed, nothing applied: {e}", file=sys.stderr)
        return 1
    finally:
        conn.close()


def _reconcile(name: str, settings: SyncSettings, conn: object, started: float) -> int:
    """Compares the index with LATEST's state; mends it (sync, verify --repair)."""
    model_key, dimension = _model_key(settings.output, settings.model_key)
    index = vector_index.PgVectorIndex(conn, settings.table)
    index.ensure(dimension)
    planned = plan(settings, index, model_key)
    drift = planned.drift
    if name == "verify":
        for line in drift.lines():
            print(line)
        in_sync = drift.total == 0
        verdict = "is in sync with" if in_sync else "differs from"
        print(f"{settings.table} {verdict} run {planned.run_id}")
        if in_sync or not settings.repair:
            return 0 if in_sync else 1
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
    )
    seconds = time.monotonic() - started
    inserted = len(drift.missing)
    print(
        f"applied run {planned.run_id} to {settings.table}: {inserted} inserted, "
        f"{written - inserted} updated, {len(drift.extra)} deleted, "
        f"{planned.state.num_rows - written} unchanged in {seconds:.1f} s"
    )
    return 0
