"""A tiny corpus run, embedded with the real model and synced to a real PostgreSQL: the index
that the query and client tests read."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from chunkmill import embedding
from chunkmill.pipeline.cli import main
from tests.pg import fresh_database

DOCUMENTS = {
    "bread.md": (
        "# Sourdough\n\n"
        "Feed the sourdough starter with equal weights of flour and water every day, and keep "
        "it at room temperature until it doubles.\n\n"
        "Bake the loaf in a preheated Dutch oven at 250 degrees Celsius for twenty minutes "
        "with the lid on, then twenty more without it, until the crust is dark brown.\n"
    ),
    "tides.md": (
        "# Tides\n\n"
        "The gravity of the moon pulls the oceans toward it, so most coasts see two high "
        "tides and two low tides every lunar day.\n\n"
        "Spring tides, the largest, come when the sun and the moon line up at new and full "
        "moon; neap tides come at the quarter moons.\n"
    ),
    "bikes.md": (
        "# Bicycle care\n\n"
        "Clean the chain with a degreaser, dry it, and put one drop of lubricant on each "
        "roller before wiping off the excess.\n\n"
        "Check the tyre pressure every week: road tyres want six to eight bar, mountain bike "
        "tyres far less.\n"
    ),
}
QUESTION = "How hot should the oven be to bake sourdough bread?"
ANSWER = "250 degrees Celsius"


@dataclass(frozen=True)
class TinyIndex:
    output: Path
    url: str
    manifest: dict[str, dict]  # chunk_id -> manifest row
    model: embedding.Model

    def answer_id(self) -> str:
        """The chunk id of the one chunk that holds the answer."""
        texts = {
            r["chunk_id"]: r["text"]
            for r in pq.read_table(self.output / "runs" / "r1" / "chunks").to_pylist()
        }
        (found,) = [i for i, text in texts.items() if ANSWER in text]
        return found


def database_objects(url: str) -> tuple:
    """Every relation, extension, index column and index row (id, hash, key, vector): what a
    write to the database would change."""
    import psycopg

    with psycopg.connect(url) as conn:
        relations = conn.execute(
            "SELECT relname, relkind FROM pg_class c JOIN pg_namespace n ON n.oid = relnamespace "
            "WHERE nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
        ).fetchall()
        extensions = conn.execute("SELECT extname FROM pg_extension ORDER BY 1").fetchall()
        columns = conn.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'chunkmill_chunks' ORDER BY ordinal_position"
        ).fetchall()
        rows = None
        if columns:
            rows = conn.execute(
                "SELECT chunk_id, chunk_hash, model_key, embedding::text, text "
                "FROM chunkmill_chunks ORDER BY 1"
            ).fetchall()
        return relations, extensions, columns, rows


def build(folder: Path, server: str, backend: str = "torch") -> TinyIndex:
    """Runs, embeds (all-minilm-l6-v2 run by ``backend``) and syncs the corpus into a new
    database."""
    corpus = folder / "corpus"
    corpus.mkdir()
    for name, text in DOCUMENTS.items():
        (corpus / name).write_text(text)
    output = folder / "out"
    run = ["run", "--input", str(corpus / "**"), "--output", str(output), "--run-id", "r1"]
    assert main([*run, "--max-tokens", "40", "--overlap-tokens", "0"]) == 0
    assert main(["embed", "--output", str(output), "--backend", backend]) == 0
    url = fresh_database(server, f"q{uuid.uuid4().hex[:12]}")
    assert main(["sync", "--output", str(output), "--to", url]) == 0
    rows = pq.read_table(output / "runs" / "r1" / "manifest").to_pylist()
    model = embedding.describe(backend=backend)
    return TinyIndex(output, url, {r["chunk_id"]: r for r in rows}, model)
