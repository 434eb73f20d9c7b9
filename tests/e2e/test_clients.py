"""LangChain's and LlamaIndex's ``PGVectorStore`` reading chunkmill's index as it is, with the
code the README shows: the hits are chunkmill's rows with their metadata, and neither library
creates or alters anything of the index."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from chunkmill.pipeline.cli import main
from tests.e2e import tiny_index
from tests.pg import postgres  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index(tmp_path_factory, postgres):  # noqa: F811
    return tiny_index.build(tmp_path_factory.mktemp("clients"), postgres)


def driver_url(url: str) -> str:
    """``url`` as SQLAlchemy names it, with psycopg as the driver."""
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def chunkmill_query(index, capsys) -> list[dict]:
    argv = ["query", tiny_index.QUESTION, "--to", index.url, "--output", str(index.output)]
    assert main([*argv, "--k", "3", "--json"]) == 0
    hits: list[dict] = json.loads(capsys.readouterr().out)["hits"]
    return hits


def assert_chunkmills_row(index, chunk_id: str, text: str, metadata: dict) -> None:
    row = index.manifest[chunk_id]
    for column in ("source_uri", "char_start", "char_end", "chunk_hash", "doc_id", "section_path"):
        assert metadata[column] == row[column], column
    assert metadata["model_key"] == index.model.key
    with psycopg.connect(index.url) as conn:
        (stored,) = conn.execute(
            "SELECT text FROM chunkmill_chunks WHERE chunk_id = %s", [chunk_id]
        ).fetchone()
    assert text == stored


def test_langchain_reads_chunkmills_table_as_it_is(index, capsys):
    before = tiny_index.database_objects(index.url)
    url = driver_url(index.url)

    # --- the README's code, from here ---
    from langchain_core.embeddings import Embeddings
    from langchain_postgres import PGEngine, PGVectorStore
    from sentence_transformers import SentenceTransformer

    from chunkmill import embedding

    class ChunkmillModel(Embeddings):
        """The model chunkmill embedded the chunks with, from its folder."""

        def __init__(self, folder: str) -> None:
            self.model = SentenceTransformer(folder, local_files_only=True)

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.model.encode(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.model.encode(text).tolist()

    model = embedding.describe()  # the folder and key of all-minilm-l6-v2; or describe(PATH)
    engine = PGEngine.from_connection_string(url)  # postgresql+psycopg://USER@HOST/DB
    store = PGVectorStore.create_sync(  # reads the table; never creates or alters it
        engine,
        ChunkmillModel(str(model.path)),
        table_name="chunkmill_chunks",
        id_column="chunk_id",
        content_column="text",
        embedding_column="embedding",
        metadata_columns=[
            "source_uri",
            "char_start",
            "char_end",
            "page_start",
            "page_end",
            "section_path",
            "chunk_hash",
            "doc_id",
            "chunk_index",
            "model_key",
        ],
        metadata_json_column=None,
    )
    docs = store.similarity_search_with_score(
        tiny_index.QUESTION, k=3, filter={"model_key": model.key}
    )
    # --- to here ---

    try:
        assert [d.id for d, _ in docs] == [h["chunk_id"] for h in chunkmill_query(index, capsys)]
        assert docs[0][0].id == index.answer_id() and tiny_index.ANSWER in docs[0][0].page_content
        for doc, _ in docs:
            assert_chunkmills_row(index, doc.id, doc.page_content, doc.metadata)
        distances = [distance for _, distance in docs]
        assert distances == sorted(distances)
    finally:
        asyncio.run(engine.close())
    assert tiny_index.database_objects(index.url) == before


LLAMAINDEX_VIEW = """
CREATE VIEW data_chunkmill AS
SELECT NULL::bigint AS id, chunk_id AS node_id, text, embedding,
       jsonb_build_object(
           'source_uri', source_uri, 'char_start', char_start, 'char_end', char_end,
           'page_start', page_start, 'page_end', page_end, 'section_path', section_path,
           'chunk_hash', chunk_hash, 'doc_id', doc_id, 'chunk_index', chunk_index,
           'model_key', model_key
       ) AS metadata_
FROM chunkmill_chunks
"""


def test_llamaindex_reads_chunkmills_table_through_a_view(index, capsys):
    with psycopg.connect(index.url) as conn:
        conn.execute(LLAMAINDEX_VIEW)
    before = tiny_index.database_objects(index.url)
    url = driver_url(index.url)

    # --- the README's code, from here ---
    from llama_index.core.vector_stores import (
        ExactMatchFilter,
        MetadataFilters,
        VectorStoreQuery,
    )
    from llama_index.vector_stores.postgres import PGVectorStore
    from sentence_transformers import SentenceTransformer

    from chunkmill import embedding

    model = embedding.describe()
    store = PGVectorStore(
        connection_string=url,  # postgresql+psycopg://USER@HOST/DB
        async_connection_string=url,
        table_name="chunkmill",  # the view data_chunkmill
        embed_dim=model.dimension,
        use_jsonb=True,
        perform_setup=False,  # creates nothing
    )
    question = SentenceTransformer(str(model.path), local_files_only=True).encode(
        tiny_index.QUESTION
    )
    result = store.query(
        VectorStoreQuery(
            query_embedding=question.tolist(),
            similarity_top_k=3,
            filters=MetadataFilters(filters=[ExactMatchFilter(key="model_key", value=model.key)]),
        )
    )
    # --- to here ---

    hits = chunkmill_query(index, capsys)
    assert result.ids == [h["chunk_id"] for h in hits]
    assert result.ids[0] == index.answer_id()
    for node, similarity, hit in zip(result.nodes, result.similarities, hits, strict=True):
        assert_chunkmills_row(index, node.node_id, node.get_content(), node.metadata)
        assert abs(similarity - hit["score"]) < 1e-4  # the same cosine similarity
    assert tiny_index.database_objects(index.url) == before
    # The view is the reader's: chunkmill's index stays in sync beside it.
    assert main(["verify", "--output", str(index.output), "--to", index.url]) == 0
