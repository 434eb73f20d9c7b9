"""``chunkmill query``: the chunks of a pgvector index nearest to a question.

The question is embedded with the model the index's vectors were made with, run by the same
backend: ``chunkmill_sync`` records the table's model key, and the embedding store's
``model.json`` for that key names the model and its backend (or ``--model`` gives its folder
and ``--backend`` the backend, whose key must be that key). Only rows of that key are
searched, so vectors of two models are never compared. Read-only: every transaction is, so a
query creates nothing in the database, not even pgvector.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from chunkmill import backends, embedding, vector_index
from chunkmill.pipeline.options import UsageError

if TYPE_CHECKING:
    from chunkmill.pipeline.commands.query import QuerySettings

# The columns a hit reads, by name (the table may gain others).
HIT_COLUMNS = (
    "chunk_id",
    "chunk_hash",
    "doc_id",
    "source_uri",
    "chunk_index",
    "char_start",
    "char_end",
    "page_start",
    "page_end",
    "section_path",
    "text",
)
EXCERPT_CHARS = 100


@dataclass(frozen=True)
class Hit:
    rank: int
    score: float  # cosine similarity
    chunk_id: str
    chunk_hash: str
    doc_id: str
    source_uri: str
    chunk_index: int
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None
    section_path: list[str] | None
    text: str


def table_key(conn: Any, table: str) -> str:
    """The model key of ``table``'s vectors, as its last sync recorded it."""
    from psycopg import sql

    state_table = vector_index.STATE_TABLE
    exists = conn.execute("SELECT to_regclass(%s), to_regclass(%s)", [table, state_table])
    found, state = exists.fetchone()
    if found is None:
        raise UsageError(f"no table {table} in the database: run chunkmill sync first, or --table")
    row = None
    if state is not None:
        query = sql.SQL("SELECT model_key FROM {} WHERE index_table = %s")
        row = conn.execute(query.format(sql.Identifier(state_table)), [table]).fetchone()
    if row is None:
        raise UsageError(
            f"table {table} has no sync recorded in {state_table}: run chunkmill sync first"
        )
    key: str = row[0]
    return key


def index_model(settings: QuerySettings, key: str) -> embedding.Model:
    """The model whose vectors the table holds (its key is ``key``), as the backend that made
    them runs it."""
    try:
        if settings.model is not None:
            backend = settings.backend or backends.DEFAULT_BACKEND
            model = embedding.describe(settings.model, backend)
            given = f"--model {settings.model}"
        else:
            spec, recorded = _recorded_model(settings, key)
            if settings.backend not in (None, recorded):
                raise UsageError(
                    f"--backend {settings.backend}: table {settings.table}'s vectors were "
                    f"embedded with --backend {recorded} (its model.json says so)"
                )
            model = embedding.describe(spec, recorded)
            given = f"the model {model.name}"
        embedding.check_runtime(model.backend)
    except embedding.ModelUnavailable as e:
        raise UsageError(str(e)) from None
    if model.key != key:
        raise UsageError(_wrong_key(settings, model, given, key))
    return model


def _wrong_key(settings: QuerySettings, model: embedding.Model, given: str, key: str) -> str:
    """The refusal of a model whose key is not the table's: the ``--backend`` to pass when the
    folder is the table's but another backend made the vectors, else the keys of both."""
    for name in backends.BACKENDS:
        if backends.variant_key(model.folder_key, backends.parse_backend(name)) == key:
            return (
                f"table {settings.table}'s vectors were embedded with --backend {name}, not "
                f"{model.backend}: pass --backend {name}"
            )
    return (
        f"{given} has key {model.key}, and table {settings.table} holds vectors of key "
        f"{key}: give --model the folder of the model the table was synced with"
    )


def _recorded_model(settings: QuerySettings, key: str) -> tuple[str, str]:
    """The model and backend that ``key``'s ``model.json`` in the embedding store names."""
    from chunkmill.transforms import embedstore

    try:
        info = embedstore.read_model_info(settings.output, key)
    except embedstore.StoreDamaged as e:
        raise UsageError(str(e)) from None
    store = embedstore.store_dir(settings.output, key)
    if info is None:
        raise UsageError(
            f"no {embedstore.MODEL_INFO} in {store} (table {settings.table}'s model key): "
            "pass --output of the sync, or --model with the model's folder"
        )
    name = info.get("model")
    if name != embedding.DEFAULT_MODEL:
        raise UsageError(
            f"table {settings.table}'s vectors are of the model {name} ({store}): "
            "pass --model with its folder"
        )
    recorded = info.get("backend", backends.DEFAULT_BACKEND)
    if recorded not in backends.BACKENDS:
        raise UsageError(
            f"table {settings.table}'s vectors were embedded with a backend this release does "
            f"not have ({recorded}, {store})"
        )
    return embedding.DEFAULT_MODEL, str(recorded)


def nearest_sql(table: str) -> Any:
    """The search: ``ORDER BY embedding <=> v LIMIT k``, the form a pgvector HNSW or IVFFlat
    index on ``embedding vector_cosine_ops`` serves. Parameters ``v``, ``key``, ``k``."""
    from psycopg import sql

    return sql.SQL(
        "SELECT {columns}, 1 - (embedding <=> %(v)s::vector) FROM {table} "
        "WHERE model_key = %(key)s ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s"
    ).format(
        columns=sql.SQL(", ").join(map(sql.Identifier, HIT_COLUMNS)),
        table=sql.Identifier(table),
    )


def nearest(conn: Any, table: str, key: str, vector: Sequence[float], k: int) -> list[Hit]:
    """The ``k`` rows of ``key`` nearest to ``vector`` by cosine distance."""
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    rows = conn.execute(nearest_sql(table), {"v": literal, "key": key, "k": k}).fetchall()
    return [
        Hit(rank, float(row[-1]), **dict(zip(HIT_COLUMNS, row[:-1], strict=True)))
        for rank, row in enumerate(rows, start=1)
    ]


def excerpt(text: str, width: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def render(hits: Sequence[Hit]) -> str:
    """Two lines a hit: where it is, then its excerpt."""
    lines = []
    for hit in hits:
        where = [f"{hit.rank}. {hit.score:.3f}", hit.source_uri]
        where.append(f"chars {hit.char_start}-{hit.char_end}")
        if hit.page_start is not None:
            where.append(_pages(hit.page_start, hit.page_end))
        if hit.section_path:
            where.append(" > ".join(hit.section_path))
        lines += ["  ".join(where), f"   {excerpt(hit.text)}"]
    return "\n".join(lines)


def _pages(start: int, end: int | None) -> str:
    return f"page {start}" if end in (None, start) else f"pages {start}-{end}"


def query(settings: QuerySettings) -> int:
    """``chunkmill query`` with its settings parsed (``chunkmill.pipeline.commands.query``)."""
    try:
        conn = vector_index.connect_read_only(settings.url)
    except vector_index.IndexUnavailable as e:
        raise UsageError(str(e)) from None
    import psycopg  # there: connecting needed it

    try:
        key = table_key(conn, settings.table)
        model = index_model(settings, key)
        question = _quiet_load(model).encode(settings.question)
        hits = nearest(conn, settings.table, key, question.tolist(), settings.k)
    except psycopg.Error as e:
        raise UsageError(f"cannot read table {settings.table}: {_first_line(e)}") from None
    finally:
        conn.close()
    if settings.as_json:
        found = {"table": settings.table, "model_key": key, "hits": [asdict(h) for h in hits]}
        print(json.dumps(found))
    elif hits:
        print(render(hits))
    else:
        print(f"table {settings.table} holds no row of model key {key}", file=sys.stderr)
    return 0


def _quiet_load(model: embedding.Model) -> Any:
    """The model run by its backend, loaded without a progress bar on the terminal (one
    question is quick): torch on a GPU where it sees one, the others on the CPU."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    runs_on = backends.parse_backend(model.backend)
    device = backends.pick_device("auto") if runs_on.runtime == "torch" else "cpu"
    try:
        return embedding.load_encoder(model, device)
    except embedding.ModelUnavailable as e:
        raise UsageError(str(e)) from None


def _first_line(error: Exception) -> str:
    return " ".join(str(error).split("\n")[0].split()) or type(error).__name__
