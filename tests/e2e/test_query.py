"""``chunkmill query`` against a real PostgreSQL holding real all-MiniLM-L6-v2 vectors of a tiny
corpus: the chunk that answers comes first, with its own offsets; the question is embedded
with the table's model and compared with that model's rows only; nothing is ever written."""

from __future__ import annotations

import json
import os
import shutil
import uuid

import numpy as np
import psycopg
import pytest
from psycopg.sql import SQL

from chunkmill import embedding
from chunkmill.pipeline import query
from chunkmill.pipeline.cli import main
from chunkmill.transforms import embedstore
from tests.e2e import tiny_index
from tests.pg import fresh_database, postgres  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index(tmp_path_factory, postgres):  # noqa: F811
    return tiny_index.build(tmp_path_factory.mktemp("query"), postgres)


def model_copy(model: embedding.Model, folder):
    """The model's folder again at ``folder``: its weights linked, the small files copied."""
    shutil.copytree(model.path, folder, copy_function=_link_if_large)
    return folder


def _link_if_large(source: str, target: str) -> None:
    if os.path.getsize(source) > 1 << 20:
        os.symlink(source, target)
    else:
        shutil.copy2(source, target)


def ask(index, capsys, *more: str) -> tuple[int, str, str]:
    code = main(["query", tiny_index.QUESTION, "--to", index.url, *more])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def query_json(index, capsys, *more: str) -> dict:
    code, out, err = ask(index, capsys, "--output", str(index.output), "--json", *more)
    assert code == 0, err
    found: dict = json.loads(out)
    return found


def test_the_chunk_that_answers_comes_first_with_its_own_offsets(index, capsys):
    before = tiny_index.database_objects(index.url)
    found = query_json(index, capsys, "--k", "3")
    hits = found["hits"]
    assert found["model_key"] == index.model.key
    assert [h["rank"] for h in hits] == [1, 2, 3]
    top = hits[0]
    row = index.manifest[index.answer_id()]
    assert top["chunk_id"] == row["chunk_id"] and top["source_uri"].endswith("bread.md")
    for column in ("chunk_hash", "doc_id", "source_uri", "char_start", "char_end", "section_path"):
        assert top[column] == row[column], column
    assert tiny_index.ANSWER in top["text"]
    # The score is the cosine similarity of the question and the chunk, as the model makes them.
    model = embedding.load(index.model.path, "cpu")
    question, chunk = model.encode([tiny_index.QUESTION, top["text"]])
    cosine = float(np.dot(question, chunk) / np.linalg.norm(question) / np.linalg.norm(chunk))
    assert abs(top["score"] - cosine) < 1e-3
    assert top["score"] > hits[1]["score"] >= hits[2]["score"]
    assert tiny_index.database_objects(index.url) == before  # read-only

    code, out, _ = ask(index, capsys, "--output", str(index.output), "--k", "2")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4  # a line of where, a line of excerpt, per hit
    assert lines[0].startswith("1. ") and top["source_uri"] in lines[0]
    assert f"chars {row['char_start']}-{row['char_end']}" in lines[0] and "Sourdough" in lines[0]
    assert tiny_index.ANSWER in lines[1]


def test_the_model_must_be_the_tables_and_rows_of_another_key_are_never_compared(
    index, capsys, tmp_path
):
    # The model's folder given as --model: the same files, so the same key.
    same = model_copy(index.model, tmp_path / "same")
    code, out, err = ask(index, capsys, "--model", str(same), "--k", "1")
    assert code == 0, err
    assert tiny_index.ANSWER in out
    # One file changed is another model: refused in one line, naming both keys.
    other = model_copy(index.model, tmp_path / "other")
    config = other / "sentence_bert_config.json"
    config.write_text(config.read_text().replace("256", "128"))
    code, out, err = ask(index, capsys, "--model", str(other))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert embedding.model_key(other) in err and index.model.key in err and "--model" in err

    # A row whose vector is of another key is left out, whatever its distance.
    answer = index.answer_id()
    with psycopg.connect(index.url) as conn:
        conn.execute("UPDATE chunkmill_chunks SET model_key = 'old' WHERE chunk_id = %s", [answer])
    try:
        hits = query_json(index, capsys, "--k", "10")["hits"]
        assert answer not in {h["chunk_id"] for h in hits}
        assert len(hits) == len(index.manifest) - 1
    finally:
        with psycopg.connect(index.url) as conn:
            conn.execute(
                "UPDATE chunkmill_chunks SET model_key = %s WHERE chunk_id = %s",
                [index.model.key, answer],
            )


def test_what_query_cannot_do_is_one_line_and_exit_2(index, capsys, tmp_path, postgres):  # noqa: F811
    def refused(*argv: str) -> str:
        code = main(["query", tiny_index.QUESTION, *argv])
        captured = capsys.readouterr()
        assert code == 2 and captured.out == "", captured
        assert captured.err.count("\n") == 1 and captured.err.startswith("chunkmill: error: ")
        return captured.err

    output = ["--output", str(index.output)]
    assert "no table nope" in refused("--to", index.url, "--table", "nope", *output)
    unreachable = "postgresql://nobody:secret@127.0.0.1:9/none?connect_timeout=2"
    err = refused("--to", unreachable, *output)
    assert "cannot connect" in err and "secret" not in err
    # No embedding store for the table's key: say what to pass.
    err = refused("--to", index.url, "--output", str(tmp_path))
    assert "--model" in err and index.model.key in err
    # The store names a model that is not the packaged one: its folder is needed.
    custom = tmp_path / "custom"
    info = index.output / "embeddings" / index.model.key / "model.json"
    recorded = json.loads(info.read_text()) | {"model": "my-model"}
    del recorded["key"], recorded["sha256"]
    embedstore.write_model_info(str(custom), index.model.key, recorded)
    err = refused("--to", index.url, "--output", str(custom))
    assert "my-model" in err and "--model" in err
    # A model.json that is not what was written is one line naming it.
    damaged = custom / "embeddings" / index.model.key / "model.json"
    damaged.write_text(damaged.read_text().replace("my-model", "my-other-model"))
    err = refused("--to", index.url, "--output", str(custom))
    assert "damaged" in err and "model.json" in err
    assert "not a sentence-transformers folder" in refused(
        "--to", index.url, "--model", str(tmp_path)
    )
    assert "--k" in refused("--to", index.url, "--k", "0")

    # A database that was never synced: refused, and nothing created, not even pgvector.
    empty = fresh_database(postgres, f"e{uuid.uuid4().hex[:12]}")
    before = tiny_index.database_objects(empty)
    assert "run chunkmill sync" in refused("--to", empty, *output)
    assert tiny_index.database_objects(empty) == before
    assert ("vector",) not in before[1]
    # A table of that name that no sync recorded: not taken for an index.
    with psycopg.connect(empty) as conn:
        conn.execute("CREATE TABLE chunkmill_chunks (chunk_id text)")
    assert "no sync recorded" in refused("--to", empty, *output)


def test_a_new_column_and_an_ann_index_change_no_answer(index, capsys):
    """The query names its columns, and its ORDER BY is the one an HNSW index serves."""
    before = query_json(index, capsys, "--k", "3")
    with psycopg.connect(index.url) as conn:
        conn.execute("ALTER TABLE chunkmill_chunks ADD COLUMN row_digest text DEFAULT 'x'")
        conn.execute(
            "CREATE INDEX chunkmill_chunks_hnsw ON chunkmill_chunks "
            "USING hnsw (embedding vector_cosine_ops)"
        )
    try:
        assert query_json(index, capsys, "--k", "3") == before
        with psycopg.connect(index.url) as conn:
            conn.execute("SET enable_seqscan = off")  # 6 rows: a scan is cheaper otherwise
            vector = "[" + ",".join(["0.1"] * index.model.dimension) + "]"
            plan = conn.execute(
                SQL("EXPLAIN ") + query.nearest_sql("chunkmill_chunks"),
                {"v": vector, "key": index.model.key, "k": 3},
            ).fetchall()
        assert "chunkmill_chunks_hnsw" in " ".join(line for (line,) in plan)
    finally:
        with psycopg.connect(index.url) as conn:
            conn.execute("DROP INDEX chunkmill_chunks_hnsw")
            conn.execute("ALTER TABLE chunkmill_chunks DROP COLUMN row_digest")
