"""transforms.prior: summaries, hash buckets and verdicts of a prior part, without Beam."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill import carryover, ids, prior_summary, schema
from chunkmill.items import KEEP, REMOVE, REPLACE, PriorPart, Verdict
from chunkmill.refusal import RunRefused
from chunkmill.transforms import digests, prior
from chunkmill.transforms.parquet_batches import ConcatTables
from tests.helpers import (
    manifest_rows,
    manifest_table,
    occurrence_fields,
    paragraphs,
    write_prior,
)

A, B, C = "/c/a.md", "/c/b.md", "/c/c.md"


def rows_of(uri: str, *words: str, version: str | None = "v1") -> list[dict]:
    return [{**r, "source_version": version} for r in manifest_rows(uri, paragraphs(*words))]


def test_summaries_give_one_per_document_with_the_values_its_rows_share():
    a = rows_of(A, "alpha", "beta")
    b = rows_of(B, "gamma", "delta", "epsilon")
    b[1]["source_version"] = "v2"  # b's rows disagree on the version
    c = rows_of(C, "zeta", version=None)
    got = dict(prior.summaries(manifest_table(a + b + c), "0:/p.parquet"))
    assert set(got) == {ids.doc_id(A), ids.doc_id(B), ids.doc_id(C)}
    sa, sb, sc = got[ids.doc_id(A)], got[ids.doc_id(B)], got[ids.doc_id(C)]
    assert (sa.part, sa.rows, sa.source_version) == ("0:/p.parquet", len(a), "v1")
    assert sa.config_fingerprint == a[0]["config_fingerprint"]
    assert sa.content_sha256 == a[0]["content_sha256"]
    assert (sb.rows, sb.source_version, sb.content_sha256) == (len(b), None, b[0]["content_sha256"])
    assert (sc.rows, sc.source_version) == (len(c), None)


def test_hash_buckets_hold_each_distinct_hash_once_under_its_prefix_with_its_rows():
    rows = rows_of(A, "alpha", "beta", "alpha") + rows_of(B, "beta", "gamma")
    buckets = [
        (bucket, prior.from_ipc(payload, prior.HASH_COUNTS).to_pylist())
        for bucket, payload in prior.by_bucket(prior.hash_counts(manifest_table(rows)))
    ]
    flat = {c["chunk_hash"].hex(): c["rows"] for _, counts in buckets for c in counts}
    expected: dict[str, int] = {}
    for r in rows:
        expected[r["chunk_hash"]] = expected.get(r["chunk_hash"], 0) + 1
    assert flat == expected and sum(len(counts) for _, counts in buckets) == len(expected)
    assert all(
        prior.hash_bucket(c["chunk_hash"].hex()) == b for b, counts in buckets for c in counts
    )


@pytest.mark.parametrize("as_bytes", [False, True])
def test_bucket_runs_sort_rows_stably_by_prefix_as_hex_or_bytes(as_bytes):
    rng = random.Random(7)
    hashes = [ids.chunk_hash(str(rng.randrange(40))) for _ in range(500)]
    column = pa.array(hashes).slice(3)  # offsets not at zero
    if as_bytes:
        column = digests.from_hex(column, digests.HASH_BYTES)
    order, runs = prior.bucket_runs(pa.chunked_array([column.slice(0, 200), column.slice(200)]))
    rows = sorted(range(len(column)), key=lambda i: prior.hash_bucket(hashes[3 + i]))
    assert order.to_pylist() == rows
    expected, start = [], 0
    for bucket in sorted({prior.hash_bucket(h) for h in hashes[3:]}):
        count = sum(prior.hash_bucket(h) == bucket for h in hashes[3:])
        expected.append((bucket, start, count))
        start += count
    assert runs == expected


def test_bucket_runs_of_values_without_a_hex_prefix_are_cut_as_strings():
    order, runs = prior.bucket_runs(pa.array(["b", "ééx", "a1", "bz", "a"]))
    assert runs == [("a", 0, 1), ("a1", 1, 1), ("b", 2, 1), ("bz", 3, 1), ("éé", 4, 1)]
    assert order.to_pylist() == [4, 2, 0, 3, 1]


def test_verdicts_keep_reversion_replace_and_remove_rows_in_bulk():
    a, b, c = rows_of(A, "alpha", "beta"), rows_of(B, "gamma", "delta"), rows_of(C, "zeta")
    keep_b = {b[0]["chunk_id"]}  # b's new version still has its first chunk
    kept, removed, persisting = prior.apply_verdicts(
        manifest_table(a + b + c),
        [
            Verdict(ids.doc_id(A), KEEP, version="v9"),
            Verdict(ids.doc_id(B), REPLACE, current_ids=(*keep_b, "new-id")),
            Verdict(ids.doc_id(C), REMOVE),
        ],
    )
    assert kept.schema == schema.MANIFEST and removed.schema == schema.REMOVED
    assert kept.to_pylist() == [{**r, "source_version": "v9", "is_new": False} for r in a]
    assert removed.to_pylist() == [
        {**occurrence_fields(b[1]), "removed_reason": schema.DOCUMENT_CHANGED},
        *({**occurrence_fields(r), "removed_reason": schema.DOCUMENT_REMOVED} for r in c),
    ]
    # Every prior row is in exactly one of the three: b's first chunk is still current.
    assert persisting.to_pylist() == [
        {"chunk_id": b[0]["chunk_id"], "chunk_hash": b[0]["chunk_hash"]}
    ]


def test_a_row_without_a_verdict_fails_loudly_rather_than_vanishing():
    a, b = rows_of(A, "alpha"), rows_of(B, "beta")
    with pytest.raises(RuntimeError, match="got no verdict"):
        prior.apply_verdicts(manifest_table(a + b), [Verdict(ids.doc_id(A), KEEP)])


def test_documents_kept_as_one_array_keep_their_rows_and_answer_for_them():
    a, b, c = rows_of(A, "alpha", "beta"), rows_of(B, "gamma"), rows_of(C, "zeta")
    kept_docs = pa.array([ids.doc_id(A), ids.doc_id(C)], pa.string())
    kept, removed, _ = prior.apply_verdicts(
        manifest_table(a + b + c), [Verdict(ids.doc_id(B), REMOVE)], kept_docs
    )
    assert kept.to_pylist() == [{**r, "is_new": False} for r in a + c]
    assert [r["chunk_id"] for r in removed.to_pylist()] == [r["chunk_id"] for r in b]
    # Every document of the part kept as one array: the part is kept whole.
    kept, removed, persisting = prior.apply_verdicts(manifest_table(a + c), [], kept_docs)
    assert kept.to_pylist() == [{**r, "is_new": False} for r in a + c]
    assert removed.num_rows == persisting.num_rows == 0
    assert removed.schema == schema.REMOVED
    # A document in neither is a bug: the part's rows are not dropped.
    with pytest.raises(RuntimeError, match="got no verdict"):
        prior.apply_verdicts(manifest_table(a + b), [], pa.array([ids.doc_id(A)], pa.string()))


def test_a_prior_without_a_nullable_column_is_read_with_it_null(tmp_path):
    """A prior written before a nullable column existed carries over with the column null;
    one without a required column is refused."""
    rows = rows_of(A, "alpha", "beta")
    (part,) = write_prior(rows, str(tmp_path))
    optional = next(f.name for f in schema.MANIFEST if f.nullable and f.name != "is_new")
    older = manifest_table(rows).drop_columns([optional])
    pq.write_table(older, part.path)
    table = prior.read_part(part, schema.OCCURRENCE_FIELDS)
    assert table[optional].null_count == table.num_rows  # read as null
    kept, _, _ = prior.apply_verdicts(table, [], pa.array([ids.doc_id(A)], pa.string()))
    assert kept.schema == schema.MANIFEST
    assert kept.to_pylist() == [{**r, optional: None, "is_new": False} for r in rows]
    pq.write_table(manifest_table(rows).drop_columns(["chunk_hash"]), part.path)
    with pytest.raises(RunRefused, match="part-00000.parquet"):
        prior.read_part(part, schema.OCCURRENCE_FIELDS)


def test_parts_are_row_groups_read_back_as_written(tmp_path):
    rows = rows_of(A, "alpha", "beta", "gamma") + rows_of(B, "delta", "epsilon")
    parts = write_prior(rows, str(tmp_path), row_group_rows=2)
    assert [p.row_group for p in parts] == list(range((len(rows) + 1) // 2))
    assert all(PriorPart.from_key(p.key) == p for p in parts)
    back = [r for p in parts for r in prior.read_part(p, schema.MANIFEST_FIELDS).to_pylist()]
    assert back == rows


def test_concat_tables_joins_small_tables_into_row_groups_and_loses_no_row():
    small = [pa.table({"x": list(range(i * 10, i * 10 + 10))}) for i in range(5)]
    fn = ConcatTables(row_group_buffer_bytes=250)  # 80 bytes a table: three fit
    fn.start_bundle()
    out = [t for s in small for t in fn.process(s)]
    out += [wv.value for wv in fn.finish_bundle()]
    assert [t.num_rows for t in out] == [30, 20]
    assert [x for t in out for x in t["x"].to_pylist()] == list(range(50))
    big = pa.table({"x": list(range(100))})
    assert list(fn.process(big)) == [big]  # already a row group's worth: passed on as is


@pytest.mark.parametrize("seed", range(6))
def test_summaries_read_off_runs_equal_the_aggregation_of_every_row(seed):
    """Documents whose rows lie together or apart, agree or not, with nulls among them: the
    summary is what ``prior_summary.summarise`` and ``shared`` make of the same rows."""
    rng = random.Random(seed)
    rows = []
    for d in range(12):
        for r in rows_of(f"/c/{d}.md", *(f"word{d}x{i}" for i in range(rng.randint(1, 4)))):
            for name in carryover.SHARED_COLUMNS:
                pick = rng.random()
                if pick < 0.1:
                    r[name] = None
                elif pick < 0.2 and name != "source_uri":
                    r[name] = "other"
            rows.append(r)
    if seed % 2:
        rng.shuffle(rows)  # not grouped by document: sorted first
    table = manifest_table(rows)
    got = prior.summary_table(table, "0:/p.parquet").to_pylist()
    g = prior_summary.summarise(table)
    want = [
        {
            "doc_id": doc,
            "part": "0:/p.parquet",
            "rows": n,
            **dict(zip(carryover.SHARED_COLUMNS, v, strict=True)),
        }
        for doc, n, *v in zip(
            g["doc_id"].to_pylist(),
            g["rows"].to_pylist(),
            *(prior_summary.shared(g, name).to_pylist() for name in carryover.SHARED_COLUMNS),
            strict=True,
        )
    ]
    assert sorted(got, key=lambda r: r["doc_id"]) == sorted(want, key=lambda r: r["doc_id"])


def test_summaries_of_several_parts_cross_without_their_part_and_get_it_back():
    """Each message of SummariseParts carries its part's key once, beside rows without it;
    the join gets every row's part back, messages of several parts interleaved."""
    tables = {
        key: prior.summary_table(
            manifest_table([r for d in range(3) for r in rows_of(f"/c/{key[0]}-{d}.md", "a")]),
            key,
        )
        for key in ("0:/p.parquet", "1:/p.parquet")
    }
    messages = [
        prior.summary_message((key, message))
        for key, table in tables.items()
        for _, message in prior.by_bucket(table.drop_columns(["part"]), "doc_id")
    ]
    assert all(batch.schema.equals(prior.SUMMARY_MESSAGE) for _, batch in messages)
    messages = messages[::2] + messages[1::2]  # the parts' messages interleaved
    got = prior.summaries_table(messages)
    assert got.schema.equals(prior.SUMMARY)
    want = pa.concat_tables(tables.values()).to_pylist()
    assert sorted(got.to_pylist(), key=str) == sorted(want, key=str)
