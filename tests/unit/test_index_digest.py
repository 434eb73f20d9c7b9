"""Row digests: the one PostgreSQL computes from an index row's columns equals the one Python
computes from the manifest row, its hash and the store's vector, for every kind of value a
column holds; and any column that differs changes it."""

from __future__ import annotations

import hashlib
import uuid

import numpy as np
import psycopg
import pyarrow as pa
import pytest

from chunkmill import index_digest, vector_index
from tests.pg import fresh_database, postgres  # noqa: F401  (the fixture)

KEY = "k" * 32
BUCKETS = 8

TEXTS = ["plain text", "naïve café — 東京 🚀 \u00a0tab\tand\nnewline", "", "x" * 300]
ROWS = [
    # NULL pages and section path; a section path empty, of empty strings, of unicode.
    {"page_start": None, "page_end": None, "section_path": None},
    {"page_start": 1, "page_end": 3, "section_path": []},
    {"page_start": 0, "page_end": 0, "section_path": ["", ""]},
    {"page_start": 2, "page_end": None, "section_path": ["Überblick", "a:b;c", "s3:x"]},
]
VECTORS = [
    [0.0, -0.0, 1.0, -1.5],
    [1e-38, -3.4e38, 0.1, 2.0 / 3.0],
    [0.0, 0.0, 0.0, 0.0],
    [np.float32(0.1).item(), 1e-45, -1e-45, 123456.789],
]


def manifest_rows() -> list[dict]:
    rows = []
    for i, (text, extra) in enumerate(zip(TEXTS, ROWS, strict=True)):
        rows.append(
            {
                "chunk_id": f"id-{i}-é",
                "chunk_hash": hashlib.sha256(text.encode()).hexdigest(),
                "doc_id": f"doc{i % 2}",
                "source_uri": f"/corpus/ドキュメント {i}.md",
                "chunk_index": i,
                "char_start": 10 * i,
                "char_end": 10 * i + len(text),
                "token_count": i * 7,
                **extra,
            }
        )
    return rows


@pytest.fixture
def index(postgres):  # noqa: F811
    url = fresh_database(postgres, f"d{uuid.uuid4().hex[:12]}")
    conn = vector_index.connect(url)
    idx = vector_index.PgVectorIndex(conn, "chunks")
    idx.ensure(4)
    rows = manifest_rows()
    table = pa.table(
        {
            **{c: [r[c] for r in rows] for c in ("chunk_id", *vector_index.METADATA)},
            "text": TEXTS,
            "vector": pa.array(VECTORS, pa.list_(pa.float32(), 4)),
        }
    )
    idx.apply(
        delete=pa.array([], pa.string()), rows=iter([table]), run_id="r", model_key=KEY, output="o"
    )
    yield idx, conn
    conn.close()


def store() -> index_digest.VectorDigests:
    rows = manifest_rows()
    return index_digest.VectorDigests(
        [
            pa.table(
                {
                    "chunk_hash": [r["chunk_hash"] for r in rows],
                    "vector": pa.array(VECTORS, pa.list_(pa.float32(), 4)),
                }
            )
        ]
    )


def sql_parts(conn) -> dict[str, tuple]:
    query = (
        f"SELECT chunk_id, {index_digest.SQL_META}, {index_digest.SQL_TEXT}, "
        f"{index_digest.SQL_VECTOR}, {index_digest.SQL_ROW}, {index_digest.sql_bucket(BUCKETS)}, "
        f"{index_digest.SQL_VALUE} FROM chunks"
    )
    return {
        r[0]: tuple(bytes(x) if isinstance(x, bytes) else x for x in r[1:])
        for r in conn.execute(query)
    }


def test_sql_and_python_digest_every_row_alike(index):
    _, conn = index
    found = sql_parts(conn)
    vectors = store()
    for row in manifest_rows():
        meta = index_digest.meta_digest(row)
        (vector,) = vectors.lookup([row["chunk_hash"]])
        text = bytes.fromhex(row["chunk_hash"])
        digest = index_digest.row_digest(
            row["chunk_id"], row["chunk_hash"], KEY, meta, text, vector
        )
        assert found[row["chunk_id"]] == (
            meta,
            text,
            vector,
            digest,
            index_digest.bucket_of(row["chunk_id"], BUCKETS),
            index_digest.value_of(digest),
        )


def test_the_bucket_sums_agree_and_any_edited_column_is_seen(index):
    idx, conn = index
    manifest = pa.table(
        {c: [r[c] for r in manifest_rows()] for c in ("chunk_id", *vector_index.METADATA)}
    )
    ours = index_digest.state_buckets([manifest], KEY, store(), BUCKETS)
    theirs = index_digest.index_buckets(conn, "chunks", BUCKETS)
    assert not len(index_digest.differing(ours, theirs))
    assert ours.counts.sum() == 4
    edits = [
        "section_path = '{}'",  # was NULL
        "section_path = NULL",  # was empty
        "page_end = 3",  # was NULL
        "char_start = char_start + 1",
        "source_uri = 'https://example.com/login'",
        "embedding = '[0,0,0,0]'",
        "text = text || ' '",
        "model_key = 'other'",
    ]
    for edit in edits:
        with conn.transaction():
            conn.execute(
                f"UPDATE chunks SET {edit} WHERE chunk_id IN ('id-0-é', 'id-1-é', 'id-3-é')"
            )
            changed = index_digest.index_buckets(conn, "chunks", BUCKETS)
            assert len(index_digest.differing(ours, changed)), edit
            raise psycopg.Rollback()
    assert not len(
        index_digest.differing(ours, index_digest.index_buckets(conn, "chunks", BUCKETS))
    )


def test_negative_zero_is_not_zero():
    zero, negative = index_digest.vector_digests(np.array([[0.0, 1.0], [-0.0, 1.0]], np.float32))
    assert zero != negative
    assert index_digest.vector_send(np.array([-0.0, 1.0], np.float32)) == bytes.fromhex(
        "00020000800000003f800000"
    )


@pytest.mark.parametrize("share_hashes", [index_digest.SHARE_HASHES, 1])
def test_compare_names_the_rows_that_differ_holding_a_share_of_the_vectors_at_a_time(
    index, monkeypatch, share_hashes
):
    _, conn = index
    monkeypatch.setattr(index_digest, "SHARE_HASHES", share_hashes)
    manifest = pa.table(
        {c: [r[c] for r in manifest_rows()] for c in ("chunk_id", *vector_index.METADATA)}
    )
    rows = manifest_rows()
    shares_seen = []

    def vectors(share: int, shares: int) -> index_digest.VectorDigests:
        shares_seen.append(shares)
        table = pa.table(
            {
                "chunk_hash": [r["chunk_hash"] for r in rows],
                "vector": pa.array(VECTORS, pa.list_(pa.float32(), 4)),
            }
        )
        return index_digest.VectorDigests(index_digest.in_share([table], share, shares))

    conn.execute("UPDATE chunks SET embedding = '[0,0,0,1]' WHERE chunk_id = 'id-0-é'")
    conn.execute("UPDATE chunks SET char_end = char_end + 1 WHERE chunk_id = 'id-1-é'")
    found = index_digest.compare(conn, "chunks", lambda: [manifest], (4, 4), KEY, vectors)
    assert found.drift.vector.to_pylist() == ["id-0-é"]
    assert found.drift.metadata.to_pylist() == ["id-1-é"]
    assert found.drift.total == 2
    assert sorted(found.rows["chunk_id"].to_pylist()) == ["id-0-é", "id-1-é"]
    assert set(shares_seen) == ({1} if share_hashes > 4 else {4})
