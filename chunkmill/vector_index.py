"""A pgvector index of the current state, one row per chunk occurrence (``chunk_id``), kept
equal to a run's manifest by reconciliation.

``chunkmill.index_digest`` compares what should be (the manifest's rows, their hashes' texts
and the store's vectors) with what is (every column of the index's rows); ``apply`` mends
the difference in one transaction, so a sync killed midway leaves the index as it was and
the next one finishes the job, and applying the same state twice changes nothing. Needs the
``postgres`` extra (psycopg).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill.redact import redact_uri

DEFAULT_TABLE = "chunkmill_chunks"
STATE_TABLE = "chunkmill_sync"
BATCH_ROWS = 5_000
# The columns of an index row besides its vector, as the manifest and chunks/ name them.
METADATA = (
    "chunk_hash",
    "doc_id",
    "source_uri",
    "chunk_index",
    "char_start",
    "char_end",
    "page_start",
    "page_end",
    "section_path",
    "token_count",
)
_TYPES = {
    "chunk_hash": "text NOT NULL",
    "doc_id": "text NOT NULL",
    "source_uri": "text NOT NULL",
    "chunk_index": "integer NOT NULL",
    "char_start": "bigint NOT NULL",
    "char_end": "bigint NOT NULL",
    "page_start": "integer",
    "page_end": "integer",
    "section_path": "text[]",
    "token_count": "integer NOT NULL",
}


class IndexUnavailable(Exception):
    """The database cannot be reached or used (no pgvector): one line, without secrets."""


class DatabaseError(Exception):
    """A statement failed (its transaction was rolled back): one line, without secrets."""


@dataclass(frozen=True)
class Drift:
    """How the index differs from the state it should hold, as arrays of chunk ids, one per
    kind (``chunkmill.index_digest`` finds them; a row may show several kinds)."""

    missing: pa.Array  # in the state, not in the index
    extra: pa.Array  # in the index, not in the state
    changed: pa.Array  # in both, with another hash
    other_model: pa.Array  # in both, a vector of another model key
    text_differs: pa.Array  # in the index with a text that is not its hash's
    metadata: pa.Array  # in both, a metadata column (offsets, uri, pages...) differs
    vector: pa.Array  # in both, a vector that is not the store's vector of its hash

    @property
    def to_write(self) -> pa.Array:
        ids = [
            self.missing,
            self.changed,
            self.other_model,
            self.text_differs,
            self.metadata,
            self.vector,
        ]
        unique: pa.Array = pc.unique(pa.chunked_array(ids, pa.string()))
        return unique

    @property
    def total(self) -> int:
        return len(self.extra) + len(self.to_write)

    def lines(self) -> list[str]:
        """One line per kind of drift, with its count."""
        return [
            f"ids missing from the index: {len(self.missing)}",
            f"ids in the index and not in the state: {len(self.extra)}",
            f"ids whose hash differs: {len(self.changed)}",
            f"ids whose vector is of another model key: {len(self.other_model)}",
            f"ids whose text is not the text of their hash: {len(self.text_differs)}",
            f"ids whose metadata differs from the manifest: {len(self.metadata)}",
            f"ids whose vector is not the store's vector of their hash: {len(self.vector)}",
        ]


def connect(url: str) -> Any:
    """A connection to ``url`` (it creates nothing: ``PgVectorIndex.ensure`` does, after
    the guards inspected the database); ``IndexUnavailable`` in one line when the database
    cannot be reached."""
    try:
        import psycopg
    except ImportError:
        raise IndexUnavailable(
            "syncing needs the postgres extra: pip install 'chunkmill[postgres]'"
        ) from None
    try:
        # Autocommit: each transaction() block is a transaction of its own, committed whole.
        return psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.Error as e:
        raise IndexUnavailable(f"cannot connect to {redact_uri(url)}: {_first_line(e)}") from None


def connect_read_only(url: str) -> Any:
    """A connection to ``url`` whose every transaction is read-only (it creates nothing, not
    even pgvector); ``IndexUnavailable`` in one line when the database cannot be reached."""
    try:
        import psycopg
    except ImportError:
        raise IndexUnavailable(
            "reading the index needs the postgres extra: pip install 'chunkmill[postgres]'"
        ) from None
    try:
        conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.Error as e:
        raise IndexUnavailable(f"cannot connect to {redact_uri(url)}: {_first_line(e)}") from None
    conn.execute("SET default_transaction_read_only = on")
    return conn


def _first_line(error: Exception) -> str:
    text = " ".join(str(error).split("\n")[0].split())
    return text or type(error).__name__


class PgVectorIndex:
    """The index table ``table`` (and the state table) in the database of ``conn``."""

    def __init__(self, conn: Any, table: str = DEFAULT_TABLE) -> None:
        from psycopg import sql

        self._conn = conn
        self._sql = sql
        self.table = table
        self._name = sql.Identifier(table)

    @property
    def connection(self) -> Any:
        return self._conn

    def ensure(self, dimension: int) -> None:
        """Creates pgvector and the tables where absent; ``IndexUnavailable`` when pgvector
        cannot be created, or the table holds vectors of another dimension (another model's).
        Call after ``index_guard.inspect``: it proves a table found is chunkmill's."""
        import psycopg

        found = self.dimension()
        if found is not None and found != dimension:
            raise IndexUnavailable(
                f"table {self.table} holds vectors of {found} dimensions and the model's have "
                f"{dimension}; sync this model into another --table"
            )
        has_vector = "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
        try:
            if self._conn.execute(has_vector).fetchone() is None:
                with self._conn.transaction():
                    self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as e:
            raise IndexUnavailable(
                "the database has no pgvector extension, and it cannot be created there "
                f"({_first_line(e)}); install pgvector or use another database"
            ) from None
        sql = self._sql
        columns = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(_TYPES[c])) for c in METADATA
        )
        # Only what is absent: a role that may write rows but not create tables syncs too.
        (state,) = self._conn.execute("SELECT to_regclass(%s)", [STATE_TABLE]).fetchone()
        with self._conn.transaction():
            if found is None:
                self._conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (chunk_id text PRIMARY KEY, {}, "
                        "model_key text NOT NULL, embedding vector({}) NOT NULL, "
                        "text text NOT NULL, run_id text NOT NULL)"
                    ).format(self._name, columns, sql.Literal(dimension))
                )
            if state is None:
                self._conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (index_table text PRIMARY KEY, "
                        "output text NOT NULL, run_id text NOT NULL, model_key text NOT NULL, "
                        "applied_at timestamptz NOT NULL, owner text, run_order text)"
                    ).format(sql.Identifier(STATE_TABLE))
                )
        if state is not None:
            from chunkmill import index_guard

            index_guard.migrate_state(self._conn)

    def dimension(self) -> int | None:
        """The dimension of the table's vectors, or None when the table does not exist."""
        row = self._conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = 'embedding'",
            [self.table],
        ).fetchone()
        return None if row is None else int(row[0])

    def count(self) -> int:
        """How many rows the table holds."""
        query = self._sql.SQL("SELECT count(*) FROM {}").format(self._name)
        return int(self._conn.execute(query).fetchone()[0])

    def last_applied(self) -> tuple[str, str] | None:
        """``(run_id, model_key)`` of the last state applied to this table, if any."""
        query = self._sql.SQL("SELECT run_id, model_key FROM {} WHERE index_table = %s")
        row = self._conn.execute(
            query.format(self._sql.Identifier(STATE_TABLE)), [self.table]
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def apply(
        self,
        *,
        delete: pa.Array,
        rows: Iterator[pa.Table],
        run_id: str,
        model_key: str,
        output: str,
        run_order: str | None = None,
    ) -> int:
        """In one transaction: deletes the ids ``delete``, writes every row of ``rows``
        (metadata, ``text``, ``vector``), replacing a row of the same id, and records
        ``run_id`` (at ``run_order`` in its chain) as applied by ``output``, the table's
        owner from then on. Returns the rows written."""
        import psycopg

        try:
            return self._apply(delete, rows, run_id, model_key, output, run_order)
        except psycopg.Error as e:
            raise DatabaseError(_first_line(e)) from None

    def _apply(
        self,
        delete: pa.Array,
        rows: Iterator[pa.Table],
        run_id: str,
        model_key: str,
        output: str,
        run_order: str | None,
    ) -> int:
        sql = self._sql
        written = 0
        with self._conn.transaction():
            ids = delete.to_pylist()
            for start in range(0, len(ids), BATCH_ROWS):
                self._conn.execute(
                    sql.SQL("DELETE FROM {} WHERE chunk_id = ANY(%s)").format(self._name),
                    [ids[start : start + BATCH_ROWS]],
                )
            for table in rows:
                written += self._upsert(table, run_id, model_key)
            self._conn.execute(
                sql.SQL(
                    "INSERT INTO {} (index_table, output, run_id, model_key, applied_at, owner, "
                    "run_order) VALUES (%s, %s, %s, %s, now(), %s, %s) ON CONFLICT (index_table) "
                    "DO UPDATE SET output = EXCLUDED.output, run_id = EXCLUDED.run_id, "
                    "model_key = EXCLUDED.model_key, applied_at = EXCLUDED.applied_at, "
                    "owner = EXCLUDED.owner, run_order = EXCLUDED.run_order"
                ).format(sql.Identifier(STATE_TABLE)),
                [self.table, redact_uri(output), run_id, model_key, redact_uri(output), run_order],
            )
        return written

    def _upsert(self, table: pa.Table, run_id: str, model_key: str) -> int:
        """One batch through a temporary table and COPY: a round trip per batch, not per row."""
        sql = self._sql
        columns = ["chunk_id", *METADATA, "text"]
        staging = sql.Identifier("chunkmill_staging")
        written = [*columns, "model_key", "embedding", "run_id"]
        names = sql.SQL(", ").join(map(sql.Identifier, written))
        # The staging table has chunkmill's columns only, by name: the table may have more of
        # its user's (a generated tsvector, a NOT NULL column with a default) that it fills.
        self._conn.execute(
            sql.SQL(
                "CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DROP AS SELECT {} FROM {} "
                "WITH NO DATA"
            ).format(staging, names, self._name)
        )
        self._conn.execute(sql.SQL("TRUNCATE {}").format(staging))
        values = {c: table[c].to_pylist() for c in columns}
        vectors = table["vector"].to_pylist()
        command = sql.SQL("COPY {} ({}) FROM STDIN").format(staging, names)
        with self._conn.cursor() as cur, cur.copy(command) as copy:
            for i in range(table.num_rows):
                vector = "[" + ",".join(repr(float(x)) for x in vectors[i]) + "]"
                copy.write_row([*(values[c][i] for c in columns), model_key, vector, run_id])
        updates = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in written[1:]
        )
        self._conn.execute(
            sql.SQL(
                "INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT (chunk_id) DO UPDATE SET {}"
            ).format(self._name, names, names, staging, updates)
        )
        return table.num_rows


def batches(table: pa.Table, rows: int | None = None) -> Iterator[pa.Table]:
    """``table`` in slices of ``rows`` (default ``BATCH_ROWS``): one COPY each."""
    size = rows or BATCH_ROWS
    for start in range(0, table.num_rows, size):
        yield table.slice(start, size)
