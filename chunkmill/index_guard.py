"""The guards of a pgvector index: what ``chunkmill sync`` checks before it writes a row.

- **Lock.** One sync (or repair) of a table at a time: a PostgreSQL advisory lock whose key
  is derived from the table's name, held from before the index is inspected until after the
  apply commits, so a second sync plans against what the first committed.
- **Inspection before creation.** A table of that name that chunkmill did not make (its
  columns, types or primary key differ), or a ``chunkmill_sync`` of another shape, is refused
  before anything (pgvector included) is created in the database.
- **Ownership.** ``chunkmill_sync`` records the output prefix (redacted) that owns the table;
  a sync from another output is refused unless told ``--take-over``.
- **Forward only.** The run applied must be the run recorded or descend from it by the chain
  of runs; an older run is refused unless told ``--allow-rewind``.
- **Removal.** No apply deletes more than ``--max-delete-ratio`` of an index of at least
  ``MIN_GUARDED_ROWS`` rows unless told so.
- **ANN.** An HNSW (or IVFFlat) index on the vectors, built once and kept.

Pure checks plus the SQL they need; no Beam here (``chunkmill.pipeline.sync`` walks the chain).
The reasoning is in docs/index-guards.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from chunkmill import vector_index
from chunkmill.redact import redact_uri

DEFAULT_MAX_DELETE_RATIO = 0.5
# An index smaller than this is rebuilt from the state in seconds: deletions are not held.
MIN_GUARDED_ROWS = 100
ANN_METHODS = ("hnsw", "ivfflat", "none")
DEFAULT_ANN = "hnsw"
IVFFLAT_LISTS = 100  # pgvector's documented starting point for up to a million rows

# What to do when a live chunk's text is in no run's chunks/ (a run folder deleted by hand).
LOST_TEXT_REMEDY = (
    "restore the deleted run folder, or re-run chunkmill run over the whole corpus with "
    "--prior-manifest none (every chunk is written again; still refused if it would leave out "
    "more than --max-removed-ratio of LATEST's documents)"
)


class Refused(Exception):
    """The index is not touched, on purpose: one line saying why and how to go on."""


class DatabaseFailed(Exception):
    """A statement failed (timeout, lost connection, permission): one line, no secret."""


def lock_key(table: str) -> int:
    """The advisory lock key of ``table``: a signed 64-bit integer from its name."""
    digest = hashlib.sha256(f"chunkmill sync {table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock(conn: Any, table: str, *, shared: bool = False) -> None:
    """Takes ``table``'s advisory lock for the session (released when it closes), waiting
    for a sync that holds it. ``shared`` for reading only: readers wait only for a sync."""
    kind = "pg_advisory_lock_shared" if shared else "pg_advisory_lock"
    conn.execute(f"SELECT {kind}(%s)", [lock_key(table)])


# ---------------------------------------------------------------------------------------------
# Inspection: what the database holds, read before anything is created.

# The columns chunkmill's table has, with their types as format_type() names them.
_BASE_TYPES = {
    "chunk_id": "text",
    **{c: t.removesuffix(" NOT NULL") for c, t in vector_index._TYPES.items()},
    "model_key": "text",
    "embedding": "vector",
    "text": "text",
    "run_id": "text",
}
_STATE_COLUMNS = ("index_table", "output", "run_id", "model_key")


@dataclass(frozen=True)
class Found:
    """What the database holds of an index table and its state row."""

    table_exists: bool
    state_exists: bool
    recorded: dict[str, Any] | None  # the state row of the table, whatever its columns

    @property
    def owner(self) -> str | None:
        if self.recorded is None:
            return None
        owner = self.recorded.get("owner") or self.recorded.get("output")
        return str(owner) if owner else None

    def owned_by_another(self, output: str) -> bool:
        return self.owner is not None and self.owner != redact_uri(output)

    @property
    def run_id(self) -> str | None:
        return None if self.recorded is None else self.recorded.get("run_id")

    @property
    def run_order(self) -> tuple[Any, ...] | None:
        raw = None if self.recorded is None else self.recorded.get("run_order")
        try:
            return tuple(json.loads(raw)) if raw else None
        except (TypeError, ValueError):
            return None


def inspect(conn: Any, table: str) -> Found:
    """The table and state row found; ``Refused`` when either is not chunkmill's. Reads only."""
    state_table = vector_index.STATE_TABLE
    found, state = conn.execute(
        "SELECT to_regclass(%s), to_regclass(%s)", [table, state_table]
    ).fetchone()
    if found is not None:
        wrong = _foreign(conn, table)
        if wrong:
            raise Refused(
                f"table {table} exists and was not made by chunkmill ({wrong}); nothing was "
                f"created or changed: sync into another --table"
            )
    recorded = None
    if state is not None:
        columns = set(_columns(conn, state_table))
        lacking = [c for c in _STATE_COLUMNS if c not in columns]
        if lacking:
            raise Refused(
                f"table {state_table} exists and was not made by chunkmill (no column "
                f"{', '.join(lacking)}); nothing was created or changed: rename it, or sync "
                "into another database"
            )
        from psycopg import sql

        query = sql.SQL("SELECT to_jsonb(s) FROM {} s WHERE index_table = %s")
        row = conn.execute(query.format(sql.Identifier(state_table)), [table]).fetchone()
        recorded = None if row is None else dict(row[0])
    return Found(found is not None, state is not None, recorded)


def _columns(conn: Any, table: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
        [table],
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def _foreign(conn: Any, table: str) -> str | None:
    """What makes ``table`` not chunkmill's, or None when it has chunkmill's shape (columns
    of other names, such as a generated ``tsvector``, are the user's and allowed)."""
    kind = conn.execute(
        "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [table]
    ).fetchone()[0]
    if kind not in ("r", "p"):
        return "it is not a table"
    columns = _columns(conn, table)
    for name, wanted in _BASE_TYPES.items():
        got = columns.get(name)
        if got is None:
            return f"no column {name}"
        if got.split("(")[0] != wanted:
            return f"column {name} is {got}, not {wanted}"
    key = conn.execute(
        "SELECT array_agg(a.attname::text) FROM pg_index i JOIN pg_attribute a "
        "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisprimary",
        [table],
    ).fetchone()[0]
    if key != ["chunk_id"]:
        return "its primary key is not chunk_id"
    return None


def migrate_state(conn: Any) -> None:
    """Adds the columns older releases' ``chunkmill_sync`` lacks; its owner is the output it
    was last synced from."""
    from psycopg import sql

    if {"owner", "run_order"} <= set(_columns(conn, vector_index.STATE_TABLE)):
        return
    name = sql.Identifier(vector_index.STATE_TABLE)
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "ALTER TABLE {} ADD COLUMN IF NOT EXISTS owner text, "
                "ADD COLUMN IF NOT EXISTS run_order text"
            ).format(name)
        )
        conn.execute(sql.SQL("UPDATE {} SET owner = output WHERE owner IS NULL").format(name))


# ---------------------------------------------------------------------------------------------
# The checks, on values.


def check_owner(found: Found, table: str, output: str, *, take_over: bool) -> None:
    """``Refused`` when ``table`` belongs to an output other than ``output``."""
    owner = found.owner
    if take_over or not found.owned_by_another(output):
        return
    raise Refused(
        f"table {table} belongs to the output {owner}, not {redact_uri(output)}; nothing "
        f"applied: sync this output into another --table, or pass --take-over to make "
        f"{table} this output's (its rows become this output's)"
    )


def check_forward(
    found: Found,
    table: str,
    run_id: str,
    chain: Sequence[str],
    *,
    chain_broken: bool,
    run_order: tuple[Any, ...] | None,
    allow_rewind: bool,
) -> None:
    """``Refused`` when run ``run_id`` is older than the run ``table`` records. ``chain`` is
    ``run_id``'s walk back by predecessors; ``chain_broken`` when it ended at a run whose
    report is gone (``runs gc``), and then the recorded chain order decides."""
    recorded = found.run_id
    if recorded is None or allow_rewind or recorded == run_id or recorded in chain:
        return
    known = found.run_order
    newer = known is not None and run_order is not None and _newer(run_order, known)
    if chain_broken and newer:
        return
    raise Refused(
        f"table {table} holds run {recorded}, and run {run_id} (LATEST) does not descend from "
        f"it: applying it would take the index back; nothing applied. Point LATEST at the "
        f"newest run (chunkmill runs list), or pass --allow-rewind to apply {run_id}"
    )


def _newer(order: Sequence[Any], than: Sequence[Any]) -> bool:
    def comparable(o: Sequence[Any]) -> tuple[str, int, str, str]:
        return (str(o[0]), int(o[1]), str(o[2]), str(o[3]))

    try:
        return comparable(order) > comparable(than)
    except (IndexError, TypeError, ValueError):  # a damaged record proves nothing
        return False


def encode_order(order: tuple[Any, ...] | None) -> str | None:
    return None if order is None else json.dumps(list(order))


def check_removal(table: str, rows: int, deleting: int, *, max_ratio: float, run_id: str) -> None:
    """``Refused`` when deleting ``deleting`` of ``rows`` rows exceeds ``max_ratio`` of an
    index of at least ``MIN_GUARDED_ROWS`` rows."""
    if rows < MIN_GUARDED_ROWS or deleting <= max_ratio * rows + 1e-9:  # 0.29 * 100 < 29
        return
    share = deleting / rows
    raise Refused(
        f"applying run {run_id} would delete {deleting} of the {rows} rows of {table} "
        f"({share:.0%}, above --max-delete-ratio {max_ratio:g}); nothing applied. Check that "
        f"LATEST's run holds the whole corpus (chunkmill runs list); if it does, pass "
        f"--max-delete-ratio {_ceil(share)} or --allow-mass-delete"
    )


def _ceil(share: float) -> str:
    return f"{min(1.0, -(-share * 100 // 1) / 100):g}"


def row_count(conn: Any, table: str) -> int:
    from psycopg import sql

    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    return int(conn.execute(query).fetchone()[0])


# ---------------------------------------------------------------------------------------------
# The ANN index.


def ann_index(conn: Any, table: str) -> str | None:
    """The access method of an ANN index on ``table``'s ``embedding`` (hnsw, ivfflat), if any."""
    row = conn.execute(
        "SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_am am ON am.oid = c.relam JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) "
        "AND am.amname IN ('hnsw', 'ivfflat') AND a.attname = 'embedding' LIMIT 1",
        [table],
    ).fetchone()
    return None if row is None else str(row[0])


def ensure_ann(conn: Any, table: str, method: str) -> bool:
    """Builds an ANN index of ``method`` on ``embedding`` (cosine) when the table has none;
    an existing one, of either method, is kept. Returns whether it built one."""
    if method == "none" or ann_index(conn, table) is not None:
        return False
    from psycopg import sql

    options = sql.SQL(" WITH (lists = {})").format(sql.Literal(IVFFLAT_LISTS))
    with conn.transaction():
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING {} (embedding vector_cosine_ops){}").format(
                sql.Identifier(f"{table}_embedding_{method}"[:63]),
                sql.Identifier(table),
                sql.SQL(method),
                options if method == "ivfflat" else sql.SQL(""),
            )
        )
    return True


# ---------------------------------------------------------------------------------------------
# Errors.


def one_line(error: BaseException, url: str) -> str:
    """``error``'s first line, without the password of ``url`` whatever the server echoed."""
    text = " ".join(str(error).split("\n")[0].split()) or type(error).__name__
    password = urlsplit(url).password
    for secret in {password, unquote(password or "")} - {None, ""}:
        text = text.replace(str(secret), "***")
    return text
