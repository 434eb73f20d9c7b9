"""A real run read back through ``chunkmill.api.read_chunks`` and the LangChain and
LlamaIndex adapters (with the real libraries), and the README's example of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from llama_index.core.schema import NodeRelationship, ObjectType, TextNode

from chunkmill import api
from chunkmill.integrations.langchain import ChunkmillLoader
from chunkmill.integrations.llamaindex import ChunkmillReader

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def _paragraphs(topic: str, n: int) -> str:
    return "\n\n".join(
        f"{topic} paragraph {i}: " + " ".join(f"{topic}{j}" for j in range(30)) for i in range(n)
    )


@pytest.fixture
def runs(tmp_path: Path, chunkmill):
    """Two runs over a tiny corpus: r2 edits one document, so the state after r2 holds
    texts first chunked by r1."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\n" + _paragraphs("guide", 8))
    (docs / "notes.txt").write_text(_paragraphs("notes", 3))
    args = ("--input", f"{docs}/**", "--strategy", "paragraph", "--max-tokens", "120")
    first = chunkmill(*args, run_id="r1")
    (docs / "notes.txt").write_text(_paragraphs("notes", 3) + "\n\nA new closing paragraph.")
    second = chunkmill(*args, run_id="r2")
    return tmp_path / "out", first, second


def test_read_chunks_gives_the_state_with_text_and_a_runs_own_chunks(runs) -> None:
    output, first, second = runs
    texts = {r["chunk_hash"]: r["text"] for r in first.rows("chunks") + second.rows("chunks")}
    state = list(api.read_chunks(str(output)))
    manifest = second.rows("manifest")
    assert sorted(r["chunk_id"] for r in state) == sorted(r["chunk_id"] for r in manifest)
    assert [(r["source_uri"], r["chunk_index"]) for r in state] == sorted(
        (r["source_uri"], r["chunk_index"]) for r in manifest
    )
    assert all(r["text"] == texts[r["chunk_hash"]] for r in state)
    # Most of the state's texts were chunked by r1: only the edit is new in r2.
    own = list(api.read_chunks(str(output), "r2", state=False))
    assert {r["chunk_hash"] for r in own} == {r["chunk_hash"] for r in second.rows("chunks")}
    assert 0 < len(own) < len(state)
    assert len(list(api.read_chunks(str(output), "r1"))) == len(first.rows("manifest"))
    with pytest.raises(api.RunNotFound):
        list(api.read_chunks(str(output), "r9"))


def test_the_langchain_loader_yields_documents_of_the_state(runs) -> None:
    output, _, second = runs
    loader = ChunkmillLoader(str(output))
    assert isinstance(loader, BaseLoader)
    docs = loader.load()
    rows = {r["chunk_id"]: r for r in api.read_chunks(str(output))}
    assert all(isinstance(d, Document) for d in docs)
    assert sorted(d.id for d in docs) == sorted(rows)
    for d in docs:
        row = rows[d.id]
        assert d.page_content == row["text"]
        for key in (
            "source_uri",
            "doc_id",
            "chunk_id",
            "chunk_hash",
            "char_start",
            "char_end",
            "section_path",
        ):
            assert d.metadata[key] == row[key]
        assert d.metadata["source"] == row["source_uri"]
        assert d.metadata["page_start"] is None  # no PDF in this corpus
    new = ChunkmillLoader(str(output), "r2", state=False).load()
    assert {d.metadata["chunk_hash"] for d in new} == {
        r["chunk_hash"] for r in second.rows("chunks")
    }


def test_the_llamaindex_reader_links_neighbours_and_their_document(runs) -> None:
    output, _, _ = runs
    nodes = ChunkmillReader(str(output)).load_nodes()
    rows = {r["chunk_id"]: r for r in api.read_chunks(str(output))}
    assert all(isinstance(n, TextNode) for n in nodes)
    assert sorted(n.node_id for n in nodes) == sorted(rows)
    by_id = {n.node_id: n for n in nodes}
    for node in nodes:
        row = rows[node.node_id]
        assert node.text == row["text"] and node.metadata["chunk_hash"] == row["chunk_hash"]
        source = node.source_node
        assert source is not None and source.node_id == row["doc_id"]
        assert source.node_type == ObjectType.DOCUMENT
        following = node.next_node
        if following is None:  # the document's last chunk
            assert row["chunk_index"] == max(
                r["chunk_index"] for r in rows.values() if r["doc_id"] == row["doc_id"]
            )
            continue
        after = rows[following.node_id]
        assert (after["doc_id"], after["chunk_index"]) == (row["doc_id"], row["chunk_index"] + 1)
        assert by_id[following.node_id].prev_node.node_id == node.node_id
    firsts = [n for n in nodes if NodeRelationship.PREVIOUS not in n.relationships]
    assert len(firsts) == len({r["doc_id"] for r in rows.values()})
    # Offsets and ids inform programs, not the model: out of what LlamaIndex embeds.
    assert "chunk_hash" not in nodes[0].get_content(metadata_mode="embed")


def test_the_documented_adapter_example_runs(runs, capsys) -> None:
    page = (ROOT / "docs" / "python-api.md").read_text()
    section = page.split("## LangChain and LlamaIndex loaders")[1]
    example = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    (output,) = re.findall(r'^output = "(\w+)"', example, re.M)
    runs[0].rename(runs[0].parent / output)  # the runs' output, where the example reads it
    scope: dict = {}
    exec(compile(example, "python-api.md", "exec"), scope)
    printed = capsys.readouterr().out
    assert "guide.md" in printed
    assert len(scope["docs"]) == len(scope["nodes"]) > 0
