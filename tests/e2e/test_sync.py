"""``chunkmill sync`` and ``verify`` against a real PostgreSQL with pgvector: the index holds
exactly LATEST's state after every night, whatever is applied twice, killed or tampered with.

Vectors come from the embedding store, written here with deterministic stand-ins (the real
model is exercised in test_embed.py): what is checked is which vector each row gets."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pyarrow as pa
import pytest

from chunkmill import vector_index
from chunkmill.pipeline.cli import main
from chunkmill.transforms import embedstore
from tests.e2e.conftest import prose
from tests.pg import fresh_database, postgres  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow

KEY = "k" * 32
DIM = 4


def vector_of(chunk_hash: str) -> list[float]:
    digest = hashlib.sha256(chunk_hash.encode()).digest()
    return [b / 255 for b in digest[:DIM]]


def embed_stand_in(output, run) -> None:
    """The store's vectors for every hash of ``run``'s manifest it lacks."""
    embedstore.write_model_info(str(output), KEY, {"dimension": DIM})
    have = set(embedstore.stored_hashes(str(output), KEY).to_pylist())
    hashes = sorted({r["chunk_hash"] for r in run.rows("manifest")} - have)
    if hashes:
        vectors = pa.array([vector_of(h) for h in hashes], pa.list_(pa.float32(), DIM))
        table = pa.table([pa.array(hashes), vectors], schema=embedstore.vector_schema(DIM))
        embedstore.write_part(str(output), KEY, embedstore.part_name(run.dir.name, "t", 0), table)


def index_rows(url: str) -> dict[str, tuple]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT chunk_id, chunk_hash, model_key, embedding::text, text, source_uri, "
            "char_start, char_end FROM chunkmill_chunks"
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def assert_index_is(url: str, run) -> None:
    """The index has one row per occurrence of ``run``'s manifest, with its hash, this key,
    the store's vector for the hash, text that hashes to it and the manifest's metadata."""
    got = index_rows(url)
    manifest = {r["chunk_id"]: r for r in run.rows("manifest")}
    assert got.keys() == manifest.keys()
    for chunk_id, (chunk_hash, key, embedding, text, uri, start, end) in got.items():
        row = manifest[chunk_id]
        assert (chunk_hash, key, uri, start, end) == (
            row["chunk_hash"], KEY, row["source_uri"], row["char_start"], row["char_end"]
        )  # fmt: skip
        assert hashlib.sha256(text.encode()).hexdigest() == chunk_hash
        stored = [float(x) for x in embedding.strip("[]").split(",")]
        assert np.allclose(stored, vector_of(chunk_hash), atol=1e-6)


def assert_every_column_is(url: str, run, key: str = KEY) -> None:
    """Every column of every row of the index equals its manifest row (the text is the one of
    its hash, the vector the store's); a text document's text at the row's offsets is the
    row's text."""
    names = ["chunk_id", *vector_index.METADATA, "model_key", "text", "embedding::text"]
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT {', '.join(names)} FROM chunkmill_chunks").fetchall()
    got = {r[0]: dict(zip(names, r, strict=True)) for r in rows}
    manifest = {r["chunk_id"]: r for r in run.rows("manifest")}
    assert got.keys() == manifest.keys()
    for chunk_id, row in got.items():
        want = manifest[chunk_id]
        assert {c: row[c] for c in vector_index.METADATA} == {
            c: want[c] for c in vector_index.METADATA
        }, chunk_id
        assert row["model_key"] == key
        assert hashlib.sha256(row["text"].encode()).hexdigest() == want["chunk_hash"]
        stored = [float(x) for x in row["embedding::text"].strip("[]").split(",")]
        assert np.allclose(stored, vector_of(want["chunk_hash"]), atol=1e-6)
        if want["source_uri"].endswith(".txt"):
            source = Path(want["source_uri"]).read_text()
            assert source[want["char_start"] : want["char_end"]] == row["text"]


@pytest.fixture
def database(postgres):  # noqa: F811
    return fresh_database(postgres, f"t{uuid.uuid4().hex[:12]}")


def sync(output, url, capsys, *more: str) -> tuple[int, str]:
    code = main(["sync", "--output", str(output), "--to", url, *more])
    return code, capsys.readouterr().out


def test_two_nights_applied_twice_each_leave_exactly_the_state(chunkmill, corpus, database, capsys):
    # Two documents share a chunk; the night deletes one of them: the other keeps its row.
    shared = "# Shared\n\nA paragraph that two documents hold word for word.\n"
    (corpus / "one.md").write_text(shared)
    (corpus / "two.md").write_text(shared)
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    (shared_hash,) = {
        r["chunk_hash"] for r in first.rows("manifest") if r["source_uri"].endswith("one.md")
    }
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    code, out = sync(output, database, capsys)
    assert code == 0 and f"{len(first.rows('manifest'))} inserted" in out
    assert_index_is(database, first)
    before = index_rows(database)
    code, out = sync(output, database, capsys)  # the same state again: nothing changes
    assert code == 0 and "0 inserted, 0 updated, 0 deleted" in out
    assert index_rows(database) == before

    (corpus / "one.md").unlink()
    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    embed_stand_in(output, second)
    code, out = sync(output, database, capsys)
    assert code == 0
    assert_index_is(database, second)
    rows = [r for r in index_rows(database).values() if r[0] == shared_hash]
    assert [r[4] for r in rows] == [str(corpus / "two.md")]
    assert main(["verify", "--output", str(output), "--to", database]) == 0


def test_a_sync_killed_midway_changes_nothing_and_the_next_converges(
    chunkmill, corpus, database, capsys, monkeypatch
):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    monkeypatch.setattr(vector_index, "BATCH_ROWS", 2)
    real = vector_index.PgVectorIndex._upsert
    calls = []

    def dies_on_the_second_batch(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")  # not an Exception: nothing catches it
        return real(self, *args, **kwargs)

    monkeypatch.setattr(vector_index.PgVectorIndex, "_upsert", dies_on_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        main(["sync", "--output", str(output), "--to", database])
    assert index_rows(database) == {}  # the first batch was rolled back with the rest
    monkeypatch.setattr(vector_index.PgVectorIndex, "_upsert", real)
    code, _ = sync(output, database, capsys)
    assert code == 0
    assert_index_is(database, first)


def test_verify_finds_what_was_done_behind_its_back_and_repair_mends_it(
    chunkmill, corpus, database, capsys
):
    for topic in ("alpha", "beta", "gamma", "delta"):
        (corpus / f"{topic}.md").write_text(f"# {topic}\n\n" + prose(topic, 2))
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT chunk_id, chunk_hash FROM chunkmill_chunks ORDER BY 1")
        by_hash: dict[str, str] = {}
        for chunk_id, chunk_hash in rows:
            by_hash.setdefault(chunk_hash, chunk_id)
        ids = list(by_hash.values())  # rows of distinct hashes, so distinct vectors
        assert len(ids) >= 10

        def edit(sql: str, *chunk_ids: str) -> None:
            conn.execute(
                f"UPDATE chunkmill_chunks SET {sql} WHERE chunk_id = ANY(%s)", [list(chunk_ids)]
            )

        conn.execute("DELETE FROM chunkmill_chunks WHERE chunk_id = %s", [ids[0]])
        edit("text = 'tampered'", ids[1])
        edit("model_key = 'old'", ids[2])
        conn.execute(
            "INSERT INTO chunkmill_chunks SELECT 'stray', chunk_hash, doc_id, source_uri, "
            "chunk_index, char_start, char_end, page_start, page_end, section_path, token_count, "
            "model_key, embedding, text, run_id FROM chunkmill_chunks WHERE chunk_id = %s",
            [ids[3]],
        )
        # Two vectors swapped, one zeroed; a phishing URL, a wrong index, moved offsets.
        conn.execute(
            "UPDATE chunkmill_chunks AS a SET embedding = b.embedding FROM chunkmill_chunks AS b "
            "WHERE (a.chunk_id, b.chunk_id) IN ((%s, %s), (%s, %s))",
            [ids[4], ids[5], ids[5], ids[4]],
        )
        edit("embedding = array_fill(0, ARRAY[4])::vector", ids[6])
        edit("source_uri = 'https://login.example.com/reset'", ids[7])
        edit("chunk_index = 999", ids[8])
        edit("char_start = char_start + 1, char_end = char_end + 1", ids[9])
    verify = ["verify", "--output", str(output), "--to", database]
    assert main(verify) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "ids missing from the index: 1" in lines
    assert "ids in the index and not in the state: 1" in lines
    assert "ids whose vector is of another model key: 1" in lines
    assert "ids whose text is not the text of their hash: 1" in lines
    assert "ids whose hash differs: 0" in lines
    assert "ids whose metadata differs from the manifest: 3" in lines
    assert "ids whose vector is not the store's vector of their hash: 3" in lines
    assert main([*verify, "--repair"]) == 0
    assert main(verify) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "chunkmill_chunks is in sync with run r1"
    assert_every_column_is(database, first)


def test_chunks_that_moved_are_updated_from_the_runs_since_the_index_s_run(
    chunkmill, corpus, database, capsys
):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    code, out = sync(output, database, capsys)
    assert code == 0 and "sync path: full reconciliation (the index records no run)" in out
    # A longer first paragraph moves every later chunk of start.md; blank lines put before
    # notes.txt move its chunks and change none of them (no added or removed row).
    start = corpus / "guides" / "start.md"
    start.write_text(
        start.read_text().replace("start paragraph 1:", "start paragraph one, longer:")
    )
    notes = corpus / "notes.txt"
    notes.write_text("\n\n\n" + notes.read_text())
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    assert not [
        r
        for r in second.rows("added") + second.rows("removed")
        if "notes" in r["doc_id"] or r["source_uri"].endswith("notes.txt")
    ]
    embed_stand_in(output, second)
    code, out = sync(output, database, capsys)
    assert code == 0
    assert "sync path: incremental from run r1 (1 run after it, 2 documents touched)" in out
    assert_every_column_is(database, second)
    assert main(["verify", "--output", str(output), "--to", database]) == 0
    # The same night again: nothing to apply.
    code, out = sync(output, database, capsys)
    assert "incremental from run r2 (0 runs after it" in out and "0 inserted, 0 updated" in out


def test_sync_compares_everything_when_a_run_in_between_is_gone_or_when_told(
    chunkmill, corpus, database, capsys
):
    import shutil

    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    (corpus / "more.md").unlink()  # what r2 alone chunked is gone again in r3
    start = corpus / "guides" / "start.md"
    start.write_text(
        start.read_text().replace("start paragraph 1:", "start paragraph one, longer:")
    )
    third = chunkmill("--input", str(corpus / "**"), run_id="r3")
    embed_stand_in(output, second)
    embed_stand_in(output, third)
    shutil.rmtree(second.dir)
    code, out = sync(output, database, capsys)
    assert code == 0
    assert "sync path: full reconciliation (the index's run r1 is not on LATEST's chain" in out
    assert_every_column_is(database, third)
    code, out = sync(output, database, capsys, "--full")
    assert code == 0 and "sync path: full reconciliation (--full)" in out
    assert "0 inserted, 0 updated, 0 deleted" in out


def test_a_damaged_vector_file_is_one_line_and_nothing_is_applied(
    chunkmill, corpus, database, capsys
):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embedstore.write_model_info(str(output), KEY, {"dimension": DIM})
    hashes = sorted({r["chunk_hash"] for r in first.rows("manifest")})
    vectors = pa.array([vector_of(h) for h in hashes], pa.list_(pa.float32(), DIM))
    table = pa.table([pa.array(hashes), vectors], schema=embedstore.vector_schema(DIM))
    path = Path(embedstore.write_vectors(str(output), KEY, table))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    for command in ("sync", "verify"):
        code = main([command, "--output", str(output), "--to", database])
        captured = capsys.readouterr()
        assert code == 1, command
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
        assert str(path) in captured.err and f"chunkmill embed --output {output}" in captured.err
        assert index_rows(database) == {}


def test_sync_refuses_in_one_line_what_it_cannot_do(chunkmill, corpus, database, capsys, postgres):  # noqa: F811
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    # No vectors yet: nothing is applied, and it says what to run.
    code = main(["sync", "--output", str(output), "--to", database])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "chunkmill embed" in err
    embed_stand_in(output, first)
    # A database that cannot be reached.
    unreachable = "postgresql://nobody:secret@127.0.0.1:9/none?connect_timeout=2"
    assert main(["sync", "--output", str(output), "--to", unreachable]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect" in err and "secret" not in err
    # A role that may not create the extension in a database without it: no pgvector.
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS plain")
        conn.execute("CREATE ROLE plain LOGIN")
        conn.execute("CREATE DATABASE plain_db")
        conn.execute("REVOKE CREATE ON DATABASE plain_db FROM PUBLIC")
    plain = postgres.replace("postgres:@", "plain:@", 1).replace("/postgres?", "/plain_db?", 1)
    assert main(["sync", "--output", str(output), "--to", plain]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pgvector" in err


def test_vectors_of_another_dimension_go_to_another_table(chunkmill, corpus, database, capsys):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    other = "o" * 32
    embedstore.write_model_info(str(output), other, {"dimension": DIM * 2})
    argv = ["sync", "--output", str(output), "--to", database, "--model-key", other]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another --table" in err
    assert_index_is(database, first)  # untouched


def test_a_sync_process_killed_inside_its_transaction_leaves_the_last_state(
    chunkmill, corpus, database, capsys
):
    """SIGKILL while the sync's transaction is open, after it deleted rows and staged the new
    ones, held up by a row lock the test takes on a row it must rewrite: the index stays
    exactly as it was, and the next sync converges."""
    import os
    import signal
    import subprocess
    import sys
    import time

    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    (corpus / "notes.txt").unlink()
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    embed_stand_in(output, second)
    kept = next(
        r["chunk_id"] for r in second.rows("manifest") if r["source_uri"].endswith("start.md")
    )

    with psycopg.connect(database) as blocker:
        # A row sync --full must rewrite (its text was edited), locked until sync waits on it.
        blocker.execute("UPDATE chunkmill_chunks SET text = 'edited' WHERE chunk_id = %s", [kept])
        blocker.commit()
        before = index_rows(database)
        blocker.execute("SELECT 1 FROM chunkmill_chunks WHERE chunk_id = %s FOR UPDATE", [kept])
        proc = subprocess.Popen(
            [sys.executable, "-m", "chunkmill", "sync", "--output", str(output), "--to", database]
            + ["--full"],  # the whole comparison, which finds the edited text
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        with psycopg.connect(database, autocommit=True) as watcher:
            while not watcher.execute(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone():
                assert proc.poll() is None, "sync ended before it reached the locked row"
                assert time.monotonic() < deadline, "sync never reached the locked row"
                time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        blocker.rollback()
    assert index_rows(database) == before
    assert sync(output, database, capsys, "--full")[0] == 0
    assert_index_is(database, second)


def test_another_model_key_is_synced_by_the_whole_comparison(chunkmill, corpus, database, capsys):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    other = "o" * 32
    embedstore.write_model_info(str(output), other, {"dimension": DIM})
    hashes = sorted({r["chunk_hash"] for r in first.rows("manifest")})
    vectors = pa.array([vector_of(h) for h in hashes], pa.list_(pa.float32(), DIM))
    table = pa.table([pa.array(hashes), vectors], schema=embedstore.vector_schema(DIM))
    embedstore.write_vectors(str(output), other, table)
    code, out = sync(output, database, capsys, "--model-key", other)
    assert code == 0
    assert f"full reconciliation (the index holds vectors of model key {KEY}, not {other})" in out
    assert f"{len(first.rows('manifest'))} updated" in out
    assert_every_column_is(database, first, other)
