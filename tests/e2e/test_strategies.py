"""Every strategy end to end on the sample corpus: the offset contract and the structure
columns, read back from Parquet."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkmill import ids
from chunkmill.chunking.tokens import load_token_counter
from chunkmill.config import strategies
from chunkmill.extract import extract
from chunkmill.pipeline.options import SAMPLE_CORPUS
from tests.e2e.conftest import assert_schemas

pytestmark = pytest.mark.slow

_TEXTS: dict[str, str] = {}


def document_text(uri: str) -> str:
    if uri not in _TEXTS:
        _TEXTS[uri] = extract(uri, Path(uri).read_bytes()).text
    return _TEXTS[uri]


@pytest.mark.parametrize("strategy", strategies())
def test_strategy_on_the_sample_corpus(chunkmill, strategy):
    run = chunkmill("--strategy", strategy, "--prior-manifest", "none", run_id=strategy)
    assert_schemas(run)
    chunks = run.rows("chunks")
    assert run.counts["docs_processed"] == run.counts["docs_listed"] - 1  # broken.pdf
    assert chunks and all(r["text"].strip() for r in chunks)
    for r in chunks:
        assert document_text(r["source_uri"])[r["char_start"] : r["char_end"]] == r["text"]
        embedded = r["text_with_context"] if r["text_with_context"] is not None else r["text"]
        assert ids.chunk_hash(embedded) == r["chunk_hash"]
    used = {r["strategy"] for r in chunks}
    if strategy == "auto":
        assert used == {"section", "paragraph", "recursive"}
        by_format = {(r["doc_format"], r["strategy"]) for r in chunks}
        assert ("markdown", "section") in by_format and ("code", "recursive") in by_format
        assert ("pdf", "paragraph") in by_format and ("text", "paragraph") in by_format
    else:
        assert used == {strategy}
    if strategy in ("section", "auto"):
        md = [r for r in chunks if r["doc_format"] == "markdown"]
        assert all(r["section_path"] is not None for r in md)
        assert any(len(r["section_path"]) >= 2 and r["section_anchor"] for r in md)
    if strategy == "paragraph-window":
        assert all(r["text_with_context"] and r["text"] in r["text_with_context"] for r in chunks)
        assert all(r["paragraph_index"] < r["total_paragraphs"] for r in chunks)
        assert any(r["has_prev_context"] and r["has_next_context"] for r in chunks)
    else:
        assert all(r["text_with_context"] is None for r in chunks)


def test_context_window_on_another_strategy(chunkmill):
    run = chunkmill(
        "--strategy",
        "paragraph",
        "--max-tokens",
        "100",
        "--overlap-tokens",
        "0",
        "--context-prev-chars",
        "120",
        "--context-next-chars",
        "60",
        run_id="ctx",
    )
    chunks = run.rows("chunks")
    with_prev = [r for r in chunks if r["has_prev_context"]]
    assert with_prev, "multi-chunk documents have context before their second chunk"
    for r in chunks:
        assert r["text"] in r["text_with_context"]
        assert ids.chunk_hash(r["text_with_context"]) == r["chunk_hash"]


def test_real_tokenizer_counts_exactly_and_respects_the_hard_limit(chunkmill):
    count = load_token_counter("all-minilm-l6-v2")
    run = chunkmill(
        "--strategy",
        "section",
        "--tokenizer",
        "all-minilm-l6-v2",
        "--max-tokens",
        "128",
        "--input",
        str(SAMPLE_CORPUS / "**" / "*.md"),
        run_id="minilm",
    )
    chunks = run.rows("chunks")
    assert len(chunks) > 20
    assert all(r["token_count"] == count(r["text"]) <= 128 for r in chunks)
    assert max(r["token_count"] for r in chunks) > 64, "the limit is used, not undercut"
    assert run.report["chunking"]["tokenizer"].startswith("hf:")


def test_paragraph_window_embeds_nothing_over_the_model_window(chunkmill):
    """What paragraph-window hands the embedder, tokenized here with all-MiniLM-L6-v2: never
    over the model's window of 256, its default limit once the tokenizer is named, though
    paragraphs with their 800 characters of context run past it on the sample corpus."""
    count = load_token_counter("all-minilm-l6-v2")
    run = chunkmill(
        "--strategy", "paragraph-window", "--tokenizer", "all-minilm-l6-v2", run_id="pw-minilm"
    )
    chunks = run.rows("chunks")
    embedded = [count(r["text_with_context"]) for r in chunks]
    assert max(embedded) <= 256
    assert max(embedded) > 230, "the limit is used, not undercut"
    assert [r["token_count"] for r in chunks] == embedded
    assert run.report["chunking"]["params"]["max_embed_tokens"] == 256
    assert run.report["chunking"]["model_window"] == 256
    assert run.counts["chunks_over_model_window"] == 0
