"""Digests of index rows, computed alike in SQL (from the columns a row holds, whoever wrote
them) and in Python (from the manifest row, its hash and the store's vector), and the
comparison of an index with the state it should hold, bucket by bucket. The encoding and
why it is safe are in docs/index-sync.md.

A row's digest covers every column of an index row but ``run_id``: ``chunk_id``,
``chunk_hash``, ``model_key``, the metadata (``META``), the text (its SHA-256, which for the
right text is ``chunk_hash`` itself) and the vector (the SHA-256 of pgvector's binary form,
``vector_send``: int16 dimension, int16 0, each float4 big-endian). Rows are bucketed by a
hash of ``chunk_id``; a bucket's aggregate (its row count and the sum of its rows' digest
prefixes) does not depend on row order, so SQL computes it with one ``GROUP BY`` and Python
while streaming the manifest. Only the buckets whose aggregates differ are compared row by
row: memory follows the drift, not the table.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chunkmill.vector_index import METADATA, Drift

# The metadata of a row, as the "metadata" kind of drift covers it: every column of
# ``METADATA`` but the hash (a kind of its own).
META = tuple(c for c in METADATA if c != "chunk_hash")
_STRINGS = frozenset({"doc_id", "source_uri"})
_LISTS = frozenset({"section_path"})
# Rows per bucket on average: few enough that a small drift touches few buckets (a 1% drift
# touches ~8% of them), many enough that the per-bucket aggregates stay a small table.
BUCKET_ROWS = 8
MAX_BUCKETS = 1 << 24
# The prefix of a row digest that bucket sums add up: 56 bits, so that PostgreSQL reads it
# as a positive bigint; sums are compared modulo 2**64.
_VALUE_BYTES = 7
VECTOR_DIGEST_BYTES = 16
# The vector digest of a hash the store holds no vector of: no index vector has it.
NO_VECTOR = bytes(VECTOR_DIGEST_BYTES)
FETCH_ROWS = 10_000


def bucket_count(rows: int) -> int:
    """The number of buckets (a power of two) for a comparison of about ``rows`` rows."""
    return _power_of_two(rows, BUCKET_ROWS, MAX_BUCKETS)


def _power_of_two(rows: int, each: int, most: int) -> int:
    """The least power of two ``n`` with ``n * each >= rows``, at most ``most``."""
    n = 1
    while n * each < rows and n < most:
        n *= 2
    return n


# ---------------------------------------------------------------------------------------------
# The encoding, in Python. Every value is a self-delimiting token, so no two rows encode alike:
# a string is s<length in characters>:<string>, an integer i<decimal>;, a list
# l<count>:<its strings>, and NULL n; (for a list, an element too).


def _string(value: str | None) -> str:
    return "n;" if value is None else f"s{len(value)}:{value}"


def _integer(value: int | None) -> str:
    return "n;" if value is None else f"i{int(value)};"


def _strings(value: Sequence[str | None] | None) -> str:
    return "n;" if value is None else f"l{len(value)}:" + "".join(map(_string, value))


_ENCODE: dict[str, Callable[[Any], str]] = {
    c: _strings if c in _LISTS else _string if c in _STRINGS else _integer for c in META
}


def meta_digest(row: Mapping[str, Any]) -> bytes:
    """SHA-256 of the metadata of ``row`` (a mapping with the ``META`` columns)."""
    return hashlib.sha256("".join(_ENCODE[c](row[c]) for c in META).encode()).digest()


def row_digest(
    chunk_id: str, chunk_hash: str, model_key: str, meta: bytes, text: bytes, vector: bytes
) -> bytes:
    """SHA-256 of a whole row from its parts: ``meta`` (``meta_digest``), ``text`` (SHA-256
    of the text) and ``vector`` (``vector_digests``)."""
    keys = (_string(chunk_id) + _string(chunk_hash) + _string(model_key)).encode()
    return hashlib.sha256(keys + meta + text + vector).digest()


def bucket_of(chunk_id: str, buckets: int) -> int:
    return int(hashlib.md5(chunk_id.encode()).hexdigest()[:8], 16) % buckets


def value_of(digest: bytes) -> int:
    return int.from_bytes(digest[:_VALUE_BYTES], "big")


def vector_send(vector: np.ndarray) -> bytes:
    """pgvector's binary form of one vector (what ``vector_send`` returns)."""
    data = np.asarray(vector, dtype=np.float32)
    return struct.pack(">hh", data.shape[0], 0) + data.astype(">f4").tobytes()


def vector_digests(vectors: np.ndarray) -> list[bytes]:
    """The digest of each row of ``vectors`` (``n x dimension`` float32)."""
    data = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).astype(">f4"))
    if not len(data):
        return []
    header = struct.pack(">hh", data.shape[1], 0)
    return [hashlib.sha256(header + row.tobytes()).digest()[:VECTOR_DIGEST_BYTES] for row in data]


# ---------------------------------------------------------------------------------------------
# The same encoding in SQL, over the columns of an index row.


def _sql_string(column: str) -> str:
    return f"coalesce('s' || length({column}) || ':' || {column}, 'n;')"


def _sql_integer(column: str) -> str:
    return f"coalesce('i' || {column} || ';', 'n;')"


def _sql_strings(column: str) -> str:
    elements = (
        f"(SELECT string_agg({_sql_string('e')}, '' ORDER BY o) "
        f"FROM unnest({column}) WITH ORDINALITY AS u(e, o))"
    )
    return (
        f"(CASE WHEN {column} IS NULL THEN 'n;' "
        f"ELSE 'l' || cardinality({column}) || ':' || coalesce({elements}, '') END)"
    )


_SQL_ENCODE = {
    c: _sql_strings if c in _LISTS else _sql_string if c in _STRINGS else _sql_integer for c in META
}
SQL_META = "sha256(convert_to(" + " || ".join(_SQL_ENCODE[c](c) for c in META) + ", 'UTF8'))"
SQL_TEXT = "sha256(convert_to(text, 'UTF8'))"
SQL_VECTOR = f"substring(sha256(vector_send(embedding)) from 1 for {VECTOR_DIGEST_BYTES})"
_SQL_KEYS = " || ".join(_sql_string(c) for c in ("chunk_id", "chunk_hash", "model_key"))
SQL_ROW = f"sha256(convert_to({_SQL_KEYS}, 'UTF8') || {SQL_META} || {SQL_TEXT} || {SQL_VECTOR})"
SQL_VALUE = (
    f"('x' || encode(substring({SQL_ROW} from 1 for {_VALUE_BYTES}), 'hex'))"
    f"::bit({_VALUE_BYTES * 8})::bigint"
)


def sql_bucket(buckets: int) -> str:
    return f"mod(('x' || left(md5(convert_to(chunk_id, 'UTF8')), 8))::bit(32)::bigint, {buckets})"


# ---------------------------------------------------------------------------------------------
# The store's vectors, as digests


class VectorDigests:
    """The digest of every vector of a model key, looked up by hash: 48 bytes a hash (its
    32 bytes and a 16-byte digest), sorted for binary search."""

    def __init__(self, tables: Iterable[pa.Table]) -> None:
        keys: list[np.ndarray] = []
        digests: list[np.ndarray] = []
        for table in tables:
            if not table.num_rows:
                continue
            hashes = table["chunk_hash"].to_pylist()
            keys.append(_hash_keys(hashes))
            flat = pc.list_flatten(table["vector"]).to_numpy(zero_copy_only=False)
            matrix = flat.astype(np.float32).reshape(table.num_rows, -1)
            found = b"".join(vector_digests(matrix))
            digests.append(np.frombuffer(found, np.uint8).reshape(-1, VECTOR_DIGEST_BYTES))
        all_keys = np.concatenate(keys) if keys else np.array([], "S32")
        order = np.argsort(all_keys, kind="stable")
        self._keys = all_keys[order]
        empty = np.zeros((0, VECTOR_DIGEST_BYTES), np.uint8)
        self._digests = (np.concatenate(digests) if digests else empty)[order]

    def __len__(self) -> int:
        return len(self._keys)

    def lookup(self, hashes: Sequence[str]) -> list[bytes]:
        """The digest of each of ``hashes``' vectors (``NO_VECTOR`` where there is none)."""
        if not len(hashes):
            return []
        wanted = _hash_keys(hashes)
        if not len(self._keys):
            return [NO_VECTOR] * len(hashes)
        at = np.minimum(np.searchsorted(self._keys, wanted), len(self._keys) - 1)
        found = self._keys[at] == wanted
        rows = self._digests[at]
        return [rows[i].tobytes() if found[i] else NO_VECTOR for i in range(len(hashes))]


def _hash_keys(hashes: Sequence[str]) -> np.ndarray:
    """Hex SHA-256 hashes as 32-byte keys."""
    return np.frombuffer(bytes.fromhex("".join(hashes)), "S32")


# ---------------------------------------------------------------------------------------------
# The state's side: manifest rows (``chunk_id`` and ``METADATA``) with the store's vectors.


@dataclass(frozen=True)
class Buckets:
    """Per bucket: how many rows, and the sum of their digests' prefixes modulo 2**64."""

    counts: np.ndarray  # int64
    sums: np.ndarray  # uint64

    @classmethod
    def empty(cls, buckets: int) -> Buckets:
        return cls(np.zeros(buckets, np.int64), np.zeros(buckets, np.uint64))


@dataclass(frozen=True)
class _Parts:
    chunk_ids: list[str]
    hashes: list[str]
    metas: list[bytes]
    vectors: list[bytes]
    buckets: np.ndarray


def _parts(table: pa.Table, vectors: VectorDigests, buckets: int) -> _Parts:
    columns = {c: table[c].to_pylist() for c in ("chunk_id", *METADATA)}
    ids, hashes = columns["chunk_id"], columns["chunk_hash"]
    metas = [
        hashlib.sha256("".join(_ENCODE[c](columns[c][i]) for c in META).encode()).digest()
        for i in range(table.num_rows)
    ]
    where = np.fromiter((bucket_of(i, buckets) for i in ids), np.int64, len(ids))
    return _Parts(ids, hashes, metas, vectors.lookup(hashes), where)


def state_buckets(
    batches: Iterable[pa.Table],
    model_key: str,
    vectors: VectorDigests,
    buckets: int,
    into: Buckets | None = None,
) -> Buckets:
    """The bucket aggregates of the rows an index equal to the state holds (added to
    ``into`` when given)."""
    found = into if into is not None else Buckets.empty(buckets)
    for table in batches:
        p = _parts(table, vectors, buckets)
        values = np.fromiter(
            (
                value_of(row_digest(i, h, model_key, m, bytes.fromhex(h), v))
                for i, h, m, v in zip(p.chunk_ids, p.hashes, p.metas, p.vectors, strict=True)
            ),
            np.uint64,
            len(p.chunk_ids),
        )
        np.add.at(found.counts, p.buckets, 1)
        np.add.at(found.sums, p.buckets, values)
    return found


@dataclass(frozen=True)
class Expected:
    """The state's rows of some buckets: their manifest rows and their parts' digests."""

    rows: pa.Table  # chunk_id and METADATA
    parts: dict[str, tuple[str, bytes, bytes]]  # chunk_id -> (chunk_hash, meta, vector)


def state_rows(
    batches: Iterable[pa.Table], vectors: VectorDigests, buckets: int, among: np.ndarray
) -> Expected:
    """The state's rows whose bucket is one of ``among``."""
    kept: list[pa.Table] = []
    parts: dict[str, tuple[str, bytes, bytes]] = {}
    for table in batches:
        ids = table["chunk_id"].to_pylist()
        where = np.fromiter((bucket_of(i, buckets) for i in ids), np.int64, len(ids))
        mask = np.isin(where, among)
        if not mask.any():
            continue
        rows = table.filter(pa.array(mask))
        kept.append(rows)
        p = _parts(rows, vectors, buckets)
        for i, chunk_id in enumerate(p.chunk_ids):
            parts[chunk_id] = (p.hashes[i], p.metas[i], p.vectors[i])
    rows = pa.concat_tables(kept) if kept else None
    return Expected(rows if rows is not None else _no_rows(), parts)


def _no_rows() -> pa.Table:
    return pa.table({"chunk_id": pa.array([], pa.string())})


# ---------------------------------------------------------------------------------------------
# The index's side, read from PostgreSQL (``conn`` a psycopg connection, ``table`` the index).


def index_buckets(conn: Any, table: str, buckets: int) -> Buckets:
    """The bucket aggregates of the index's rows, computed by the database."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT b, count(*), mod(sum(v), 18446744073709551616)::text FROM "
        "(SELECT " + sql_bucket(buckets) + " AS b, " + SQL_VALUE + " AS v FROM {}) AS r "
        "GROUP BY b"
    ).format(sql.Identifier(table))
    found = Buckets.empty(buckets)
    for rows in _stream(conn, query, []):
        at = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        found.counts[at] = np.fromiter((r[1] for r in rows), np.int64, len(rows))
        found.sums[at] = np.fromiter((int(r[2]) for r in rows), np.uint64, len(rows))
    return found


def index_rows(
    conn: Any, table: str, buckets: int, among: np.ndarray
) -> dict[str, tuple[str, str, bytes, bytes, bytes]]:
    """The index's rows whose bucket is one of ``among``: chunk_id -> (chunk_hash,
    model_key, meta digest, text digest, vector digest)."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT chunk_id, chunk_hash, model_key, " + SQL_META + ", " + SQL_TEXT + ", "
        + SQL_VECTOR + " FROM {} WHERE " + sql_bucket(buckets) + " = ANY(%s)"
    ).format(sql.Identifier(table))  # fmt: skip
    found: dict[str, tuple[str, str, bytes, bytes, bytes]] = {}
    for rows in _stream(conn, query, [[int(b) for b in among]]):
        for r in rows:
            found[r[0]] = (r[1], r[2], bytes(r[3]), bytes(r[4]), bytes(r[5]))
    return found


def _stream(conn: Any, query: Any, params: list[Any]) -> Iterator[list[Any]]:
    """The rows of ``query`` in lists of ``FETCH_ROWS``, through a server-side cursor."""
    with conn.transaction(), conn.cursor(name="chunkmill_digest") as cur:
        cur.execute(query, params)
        while rows := cur.fetchmany(FETCH_ROWS):
            yield rows


# ---------------------------------------------------------------------------------------------
# The comparison


def differing(state: Buckets, index: Buckets) -> np.ndarray:
    """The buckets whose aggregates differ."""
    return np.flatnonzero((state.counts != index.counts) | (state.sums != index.sums))


def classify(
    expected: Mapping[str, tuple[str, bytes, bytes]],
    found: Mapping[str, tuple[str, str, bytes, bytes, bytes]],
    model_key: str,
) -> Drift:
    """Each kind of drift between the state's rows ``expected`` and the index's rows
    ``found`` (of the same buckets); a row may show several kinds."""
    kinds: dict[str, list[str]] = {
        k: [] for k in ("missing", "extra", "changed", "other_model", "text", "meta", "vector")
    }
    for chunk_id, (chunk_hash, meta, vector) in expected.items():
        row = found.get(chunk_id)
        if row is None:
            kinds["missing"].append(chunk_id)
            continue
        f_hash, f_key, f_meta, f_text, f_vector = row
        for kind, differs in (
            ("changed", f_hash != chunk_hash),
            ("other_model", f_key != model_key),
            ("text", f_text != bytes.fromhex(chunk_hash)),
            ("meta", f_meta != meta),
            ("vector", f_vector != vector),
        ):
            if differs:
                kinds[kind].append(chunk_id)
    kinds["extra"] = [i for i in found if i not in expected]
    ids = {k: pa.array(sorted(v), pa.string()) for k, v in kinds.items()}
    return Drift(
        missing=ids["missing"],
        extra=ids["extra"],
        changed=ids["changed"],
        other_model=ids["other_model"],
        text_differs=ids["text"],
        metadata=ids["meta"],
        vector=ids["vector"],
    )


@dataclass(frozen=True)
class Comparison:
    drift: Drift
    rows: pa.Table  # the state's rows of the ids to write (chunk_id and METADATA)
    state_rows: int  # rows of the state


def compare(
    conn: Any,
    table: str,
    manifest: Callable[[], Iterable[pa.Table]],
    counts: tuple[int, int],
    model_key: str,
    vectors: Callable[[int, int], VectorDigests],
) -> Comparison:
    """Compares the index ``table`` with the state whose manifest ``manifest()`` streams
    (read once for the aggregates and once for the rows of the buckets that differ, each
    time once per share); ``counts`` are the rows of the state and of the index, which size
    the buckets and the shares; ``vectors(share, shares)`` the store's digests of a share."""
    state_count, index_count = counts
    buckets = bucket_count(max(state_count, index_count))
    n = share_count(max(state_count, index_count))
    if index_count == 0:  # every row is missing: the rows need no digest
        vectors(0, n)  # but every vector file is read, and so checked, all the same
        return _all_missing(manifest(), state_count)
    ours = Buckets.empty(buckets)
    for share in range(n):
        held = vectors(share, n)
        state_buckets(in_share(manifest(), share, n), model_key, held, buckets, into=ours)
    theirs = index_buckets(conn, table, buckets)
    among = differing(ours, theirs)
    if not len(among):
        empty = pa.array([], pa.string())
        drift = Drift(empty, empty, empty, empty, empty, empty, empty)
        return Comparison(drift, _no_rows(), state_count)
    parts: dict[str, tuple[str, bytes, bytes]] = {}
    kept: list[pa.Table] = []
    for share in range(n):
        expected = state_rows(in_share(manifest(), share, n), vectors(share, n), buckets, among)
        parts.update(expected.parts)
        if expected.rows.num_rows:
            kept.append(expected.rows)
    drift = classify(parts, index_rows(conn, table, buckets, among), model_key)
    rows = pa.concat_tables(kept) if kept else _no_rows()
    if rows.num_rows:
        rows = rows.filter(pc.is_in(rows["chunk_id"], value_set=drift.to_write))
    return Comparison(drift, rows, state_count)


def _all_missing(batches: Iterable[pa.Table], state_count: int) -> Comparison:
    rows = pa.concat_tables(list(batches)) if state_count else _no_rows()
    empty = pa.array([], pa.string())
    missing = rows["chunk_id"].combine_chunks().cast(pa.string())
    drift = Drift(missing, empty, empty, empty, empty, empty, empty)
    return Comparison(drift, rows, state_count)


# The store's vector digests are held a share of the hashes at a time (by the first hex digit
# of the hash): at most about this many at once, ~200 MB; a larger state reads the manifest
# and the store once per share.
SHARE_HASHES = 4_000_000
MAX_SHARES = 16


def share_count(rows: int) -> int:
    """How many shares (a power of two, at most 16) a comparison of ``rows`` rows takes."""
    return _power_of_two(rows, SHARE_HASHES, MAX_SHARES)


def in_share(tables: Iterable[pa.Table], share: int, shares: int) -> Iterator[pa.Table]:
    """The rows of ``tables`` (with ``chunk_hash``) whose hash is in share ``share``."""
    digits = pa.array([f"{d:x}" for d in range(16) if d % shares == share])
    for t in tables:
        if shares == 1:
            yield t
            continue
        first = pc.utf8_slice_codeunits(t["chunk_hash"], 0, 1)
        kept = t.filter(pc.is_in(first, value_set=digits))
        if kept.num_rows:
            yield kept


# ---------------------------------------------------------------------------------------------
# Between two states: what an index equal to ``before`` must change to equal ``after``.


def state_delta(before: pa.Table, after: pa.Table) -> tuple[pa.Array, pa.Table, Drift]:
    """``before`` and ``after``: manifest rows (``chunk_id`` and ``METADATA``) of the same
    documents in two states. Returns the ids to delete, the rows of ``after`` to write (new
    ids, and ids whose hash or metadata changed: a chunk that moved), and the drift."""
    was = {
        i: (h, meta_digest(r))
        for i, h, r in zip(
            before["chunk_id"].to_pylist(),
            before["chunk_hash"].to_pylist(),
            before.select(list(META)).to_pylist(),
            strict=True,
        )
    }
    now_ids = after["chunk_id"].to_pylist()
    missing, changed, moved = [], [], []
    for i, h, r in zip(
        now_ids, after["chunk_hash"].to_pylist(), after.select(list(META)).to_pylist(), strict=True
    ):
        old = was.get(i)
        if old is None:
            missing.append(i)
        elif old[0] != h:
            changed.append(i)
        elif old[1] != meta_digest(r):
            moved.append(i)
    gone = sorted(set(was) - set(now_ids))
    empty = pa.array([], pa.string())

    def ids(values: list[str]) -> pa.Array:
        return pa.array(sorted(values), pa.string())

    drift = Drift(ids(missing), ids(gone), ids(changed), empty, empty, ids(moved), empty)
    write = after.filter(pc.is_in(after["chunk_id"], value_set=drift.to_write))
    return drift.extra, write, drift
