"""``chunkmill sync``'s guards against a real PostgreSQL with pgvector: no mistake, race or
stranger shrinks, rolls back or takes over an index, and the database's own failures are one
line that leaves the index as it was."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from chunkmill import index_guard
from chunkmill.pipeline.cli import main
from chunkmill.transforms import embedstore
from tests.e2e.conftest import prose
from tests.e2e.test_sync import (
    KEY,
    assert_index_is,
    embed_stand_in,
    index_rows,
)
from tests.pg import fresh_database, postgres  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def database(postgres):  # noqa: F811
    return fresh_database(postgres, f"t{uuid.uuid4().hex[:12]}")


def sync(output, url, capsys, *more: str) -> tuple[int, str, str]:
    code = main(["sync", "--output", str(output), "--to", url, *more])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def state_row(url: str) -> dict:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT to_jsonb(s) FROM chunkmill_sync s WHERE index_table = 'chunkmill_chunks'"
        ).fetchone()
    return row[0]


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def start_sync(output: Path, url: str, *more: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "chunkmill", "sync", "--output", str(output), "--to", url]
    return subprocess.Popen(
        [*argv, *more], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_waiters(url: str, count: int, procs: list[subprocess.Popen]) -> None:
    """Until ``count`` other sessions of the database wait on a lock."""
    deadline = time.monotonic() + 120
    with psycopg.connect(url, autocommit=True) as watcher:
        while True:
            (waiting,) = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            if waiting >= count:
                return
            for proc in procs:
                assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the syncs never waited"
            time.sleep(0.05)


def two_runs(chunkmill, corpus):
    """r1, then r2 (notes.txt deleted, more.md added): both embedded; LATEST is r2."""
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    (corpus / "notes.txt").unlink()
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    embed_stand_in(output, second)
    return output, first, second


def test_an_older_run_racing_a_newer_one_leaves_the_newer(chunkmill, corpus, database, capsys):
    """Sync A applies r2 and is held just before it commits; LATEST is then pointed back at r1
    and sync B starts. B waits for A's lock, plans after A committed, and refuses to take the
    index back: the index holds r2 and chunkmill_sync records r2."""
    output, first, second = two_runs(chunkmill, corpus)
    (output / "LATEST").write_text("r1\n")
    assert sync(output, database, capsys)[0] == 0
    (output / "LATEST").write_text("r2\n")
    with psycopg.connect(database) as blocker:
        blocker.execute(
            "SELECT 1 FROM chunkmill_sync WHERE index_table = 'chunkmill_chunks' FOR UPDATE"
        )
        newer = start_sync(output, database)
        wait_for_waiters(database, 1, [newer])
        (output / "LATEST").write_text("r1\n")  # a stale publisher, or a hand
        older = start_sync(output, database)
        wait_for_waiters(database, 2, [newer, older])
        blocker.rollback()
        out_newer, err_newer = newer.communicate(timeout=120)
        out_older, err_older = older.communicate(timeout=120)
    assert newer.returncode == 0, err_newer
    inserted = len({r["chunk_id"] for r in second.rows("manifest")} - set(_ids(first)))
    assert f"applied run r2 to chunkmill_chunks: {inserted} inserted" in out_newer
    assert older.returncode == 2, (out_older, err_older)
    assert "holds run r2" in one_line(err_older) and "--allow-rewind" in err_older
    assert_index_is(database, second)
    assert state_row(database)["run_id"] == "r2"


def _ids(run) -> list[str]:
    return [r["chunk_id"] for r in run.rows("manifest")]


def test_latest_pointed_at_an_older_run_is_refused_unless_told(chunkmill, corpus, database, capsys):
    output, first, second = two_runs(chunkmill, corpus)
    assert sync(output, database, capsys)[0] == 0
    before = index_rows(database)
    (output / "LATEST").write_text("r1\n")
    code, _, err = sync(output, database, capsys)
    one_line(err)
    assert code == 2
    assert "holds run r2, and run r1 (LATEST) does not descend from it" in err
    assert "--allow-rewind" in err
    assert index_rows(database) == before and state_row(database)["run_id"] == "r2"
    code, _, _ = sync(output, database, capsys, "--allow-rewind")
    assert code == 0
    assert_index_is(database, first)
    # The next night after r2 applies again: r3 descends from r2, which descends from r1.
    (output / "LATEST").write_text("r2\n")
    (corpus / "extra.md").write_text("# Extra\n\n" + prose("extra", 2))
    third = chunkmill("--input", str(corpus / "**"), run_id="r3")
    embed_stand_in(output, third)
    assert sync(output, database, capsys)[0] == 0
    assert_index_is(database, third)


def test_a_state_that_drops_most_rows_is_refused_unless_told(chunkmill, tmp_path, database, capsys):
    """337 one-chunk documents synced; the next run holds 81 of them (its own guard told
    --max-removed-ratio 1): deleting 256 of 337 rows is refused, the index unchanged."""
    corpus = tmp_path / "many"
    corpus.mkdir()
    for i in range(337):
        (corpus / f"d{i:03}.txt").write_text(f"document {i} says {i} things about {i}.")
    first = chunkmill("--input", str(corpus / "*.txt"), run_id="r1")
    assert len(first.rows("manifest")) == 337
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    for i in range(81, 337):
        (corpus / f"d{i:03}.txt").unlink()
    second = chunkmill("--input", str(corpus / "*.txt"), "--max-removed-ratio", "1", run_id="r2")
    assert len(second.rows("manifest")) == 81
    before = index_rows(database)
    code, _, err = sync(output, database, capsys)
    one_line(err)
    assert code == 2
    assert "would delete 256 of the 337 rows of chunkmill_chunks" in err
    assert "--max-delete-ratio" in err and "--allow-mass-delete" in err
    assert index_rows(database) == before
    # A ratio below the share is refused too; the share itself, or the flag, applies.
    assert sync(output, database, capsys, "--max-delete-ratio", "0.7")[0] == 2
    code, out, _ = sync(output, database, capsys, "--allow-mass-delete")
    assert code == 0 and "256 deleted" in out
    assert_index_is(database, second)


def test_another_outputs_table_is_refused_unless_taken_over(
    chunkmill, corpus, tmp_path, database, capsys
):
    """Output A syncs; chunkmill_sync is then made as an older release left it (no owner
    column): output B is refused in one line naming A, and --take-over hands the table to B."""
    a = chunkmill("--input", str(corpus / "**"), run_id="r1", output=tmp_path / "a")
    embed_stand_in(tmp_path / "a", a)
    assert sync(tmp_path / "a", database, capsys)[0] == 0
    assert state_row(database)["owner"] == str(tmp_path / "a")
    with psycopg.connect(database) as conn:
        conn.execute("ALTER TABLE chunkmill_sync DROP COLUMN owner, DROP COLUMN run_order")
    assert sync(tmp_path / "a", database, capsys)[0] == 0  # its own output: still applies
    assert state_row(database)["owner"] == str(tmp_path / "a")
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    b = chunkmill("--input", str(corpus / "**"), run_id="b1", output=tmp_path / "b")
    embed_stand_in(tmp_path / "b", b)
    before = index_rows(database)
    code, _, err = sync(tmp_path / "b", database, capsys)
    one_line(err)
    assert code == 2
    assert f"belongs to the output {tmp_path / 'a'}, not {tmp_path / 'b'}" in err
    assert "--table" in err and "--take-over" in err
    assert index_rows(database) == before
    verify = ["verify", "--output", str(tmp_path / "b"), "--to", database]
    assert main(verify) == 2
    assert f"belongs to the output {tmp_path / 'a'}" in one_line(capsys.readouterr().err)
    assert sync(tmp_path / "b", database, capsys, "--take-over")[0] == 0
    assert_index_is(database, b)
    assert state_row(database)["owner"] == str(tmp_path / "b")
    assert sync(tmp_path / "a", database, capsys)[0] == 2  # now A is the stranger


def created(url: str) -> tuple:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'vector'), "
            "to_regclass('chunkmill_sync')"
        ).fetchone()


def test_a_table_chunkmill_did_not_make_is_refused_before_anything_is_created(
    chunkmill, corpus, database, capsys
):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    # verify creates nothing, and a missing table is one line.
    assert main(["verify", "--output", str(output), "--to", database]) == 2
    assert "no table chunkmill_chunks" in one_line(capsys.readouterr().err)
    assert created(database) == (0, None)
    with psycopg.connect(database) as conn:
        conn.execute("CREATE TABLE chunkmill_chunks (chunk_id text PRIMARY KEY, body text)")
        conn.execute("INSERT INTO chunkmill_chunks VALUES ('a', 'theirs')")
    code, _, err = sync(output, database, capsys)
    one_line(err)
    assert code == 2
    assert "table chunkmill_chunks exists and was not made by chunkmill" in err
    assert "--table" in err
    assert created(database) == (0, None)
    assert main(["verify", "--output", str(output), "--to", database]) == 2
    assert "not made by chunkmill" in one_line(capsys.readouterr().err)
    assert sync(output, database, capsys, "--table", "mine")[0] == 0


def test_own_columns_and_indexes_survive_and_hnsw_serves_the_search(
    chunkmill, corpus, database, capsys
):
    output, first, second = two_runs(chunkmill, corpus)
    (output / "LATEST").write_text("r1\n")
    assert sync(output, database, capsys)[0] == 0
    with psycopg.connect(database) as conn:
        conn.execute(
            "ALTER TABLE chunkmill_chunks ADD COLUMN tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED"
        )
        conn.execute("CREATE INDEX chunks_tsv ON chunkmill_chunks USING gin (tsv)")
        conn.execute("ALTER TABLE chunkmill_chunks ADD COLUMN tags text NOT NULL DEFAULT 'mine'")
        hnsw = "chunkmill_chunks_embedding_hnsw"
        (oid,) = conn.execute("SELECT to_regclass(%s)::oid", [hnsw]).fetchone()
    (output / "LATEST").write_text("r2\n")
    for _ in range(2):
        assert sync(output, database, capsys)[0] == 0
    assert_index_is(database, second)
    with psycopg.connect(database) as conn:
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes")}
        assert {"chunks_tsv", hnsw} <= indexes
        assert conn.execute("SELECT to_regclass(%s)::oid", [hnsw]).fetchone() == (oid,)
        (wrong,) = conn.execute(
            "SELECT count(*) FROM chunkmill_chunks "
            "WHERE tsv IS DISTINCT FROM to_tsvector('english', text) OR tags <> 'mine'"
        ).fetchone()
        assert wrong == 0
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT chunk_id FROM chunkmill_chunks "
                "ORDER BY embedding <=> '[1,0,0,0]' LIMIT 3"
            )
        )
        assert f"Index Scan using {hnsw}" in plan, plan
    for ann in ("ivfflat", "none"):
        assert sync(output, database, capsys, "--table", f"t_{ann}", "--ann", ann)[0] == 0
        with psycopg.connect(database) as conn:
            assert index_guard.ann_index(conn, f"t_{ann}") == (None if ann == "none" else ann)


def test_database_failures_are_one_line_and_change_nothing(
    chunkmill,
    corpus,
    database,
    capsys,
    postgres,  # noqa: F811
):
    output, first, second = two_runs(chunkmill, corpus)
    (output / "LATEST").write_text("r1\n")
    assert sync(output, database, capsys)[0] == 0
    (output / "LATEST").write_text("r2\n")
    before = index_rows(database)

    # A statement timeout, hit on a table another session holds locked.
    secret = "hunter2secret"
    timed = database.replace("postgres:@", f"postgres:{secret}@", 1)
    timed += "&options=-c%20statement_timeout%3D300"
    with psycopg.connect(database) as blocker:
        blocker.execute("LOCK TABLE chunkmill_chunks IN ACCESS EXCLUSIVE MODE")
        code, _, err = sync(output, timed, capsys)
        one_line(err)
        blocker.rollback()
    assert code == 2 and "statement timeout" in err and secret not in err
    assert index_rows(database) == before

    # A lost connection: the sync's backend is terminated while it waits on a row lock.
    kept = next(r["chunk_id"] for r in second.rows("manifest") if r["chunk_id"] in before)
    with psycopg.connect(database) as blocker:
        blocker.execute("UPDATE chunkmill_chunks SET text = 'edited' WHERE chunk_id = %s", [kept])
        blocker.commit()
        edited = index_rows(database)
        blocker.execute("SELECT 1 FROM chunkmill_chunks WHERE chunk_id = %s FOR UPDATE", [kept])
        proc = start_sync(output, database, "--full")  # the whole comparison finds the edit
        wait_for_waiters(database, 1, [proc])
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        _, err = proc.communicate(timeout=120)
        blocker.rollback()
    assert proc.returncode == 2 and "nothing applied" in one_line(err), err
    assert index_rows(database) == edited

    # A role without rights on the table.
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS stranger")
        conn.execute(f"CREATE ROLE stranger LOGIN PASSWORD '{secret}'")
    stranger = database.replace("postgres:@", f"stranger:{secret}@", 1)
    code, _, err = sync(output, stranger, capsys)
    one_line(err)
    assert code == 2 and "permission denied" in err and secret not in err
    assert index_rows(database) == edited


def test_a_model_key_without_vectors_does_not_block_the_choice(chunkmill, corpus, database, capsys):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    aborted = "a" * 32  # an embed stopped before its first vector file
    embedstore.write_model_info(str(output), aborted, {"dimension": 8, "model": "big-model"})
    assert sync(output, database, capsys)[0] == 0
    assert_index_is(database, first)
    assert state_row(database)["model_key"] == KEY
    # Two keys with vectors: the refusal names their models.
    embedstore.write_model_info(str(output), "b" * 32, {"dimension": 4, "model": "other-model"})
    table = embedstore.vector_schema(4).empty_table()
    embedstore.write_part(str(output), "b" * 32, embedstore.part_name("r1", "t", 0), table)
    code, _, err = sync(output, database, capsys)
    assert code == 2 and "model other-model (key " + "b" * 32 + ")" in err and "--model-key" in err
    # Vectors of another width: the refusal names the model the table holds and the other.
    wide = "c" * 32
    embedstore.write_model_info(str(output), wide, {"dimension": 8, "model": "wide-model"})
    code, _, err = sync(output, database, capsys, "--model-key", wide)
    assert code == 2 and f"model wide-model (key {wide}) makes 8" in one_line(err)
    assert f"key {KEY}" in err and "another --table" in err


def test_a_server_stopped_mid_sync_is_one_line(chunkmill, corpus, capsys):
    """A server of its own, stopped (fast shutdown) while the sync waits on a row lock inside
    its transaction: one line, exit 2; started again, the server holds the last state."""
    import tempfile

    import pgserver

    output, first, second = two_runs(chunkmill, corpus)
    (output / "LATEST").write_text("r1\n")
    with tempfile.TemporaryDirectory(prefix="chunkmill-pg-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        url = fresh_database(server.get_uri(), "stopped")
        assert sync(output, url, capsys)[0] == 0
        (output / "LATEST").write_text("r2\n")
        present = index_rows(url)
        kept = next(r["chunk_id"] for r in second.rows("manifest") if r["chunk_id"] in present)
        blocker = psycopg.connect(url)
        blocker.execute("UPDATE chunkmill_chunks SET text = 'edited' WHERE chunk_id = %s", [kept])
        blocker.commit()
        edited = index_rows(url)
        blocker.execute("SELECT 1 FROM chunkmill_chunks WHERE chunk_id = %s FOR UPDATE", [kept])
        proc = start_sync(output, url, "--full")  # the whole comparison finds the edit
        wait_for_waiters(url, 1, [proc])
        server.cleanup()  # pg_ctl stop: a fast shutdown ends every session
        _, err = proc.communicate(timeout=120)
        blocker.close()
        assert proc.returncode == 2 and "nothing applied" in one_line(err), err
        server = pgserver.get_server(folder, cleanup_mode="stop")
        try:
            assert index_rows(url) == edited
        finally:
            server.cleanup()
