"""The semantic strategy with the real all-MiniLM-L6-v2: a boundary at a planted change of
topic, chunks within the token budget, one model per process, the model's identity in the
config fingerprint, and one line when the embed extra is missing. The offset contract is
test_chunker_contract.py's."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from chunkmill import embedding
from chunkmill.chunking import make_chunker
from chunkmill.chunking import semantic as semantic_module
from chunkmill.chunking.base import ParameterError
from chunkmill.chunking.semantic import SemanticChunker
from chunkmill.chunking.tokens import load_token_counter
from chunkmill.config import ChunkingConfig
from chunkmill.pipeline.cli import main

from .chunker_contract import check_span_contract, sample_documents

CATS = (
    "The domestic cat is a small carnivorous mammal. Cats are valued by humans for "
    "companionship and for hunting mice. A cat has a flexible body, quick reflexes and sharp "
    "claws. Kittens are born with their eyes closed. Most cats sleep for twelve to sixteen "
    "hours a day. Cats groom their fur with their rough tongues. A purring cat is usually a "
    "content cat."
)
MARKETS = (
    "Stock markets fell sharply on Tuesday as investors reacted to rising interest rates. "
    "Government bond yields climbed to their highest level in a decade. Analysts warned that "
    "inflation could persist into next year. The central bank signalled further rate hikes. "
    "Trading volumes were unusually high on every major exchange. Shares of banks and "
    "insurers led the decline. The currency weakened against the dollar."
)
MINILM = load_token_counter("all-minilm-l6-v2")


@pytest.mark.parametrize("tokenizer", ["chars4", "all-minilm-l6-v2"])
@pytest.mark.parametrize("sep", ["\n\n", " "])
def test_a_planted_change_of_topic_is_the_one_boundary(tokenizer: str, sep: str):
    text = CATS + sep + MARKETS
    chunker = make_chunker("semantic", token_counter=load_token_counter(tokenizer))
    spans = chunker.split(text)
    assert [(s.start, s.end) for s in spans] == [
        (0, len(CATS)),
        (len(CATS) + len(sep), len(text)),
    ]


def test_a_segment_over_the_budget_is_split_at_its_change_of_topic():
    # Three topics of 60 to 80 MiniLM tokens: the 95th percentile breaks only the first
    # change, and the second segment (two topics, over 100 tokens) is split where the topic
    # changes, not where the budget runs out.
    gardens = (
        "Tomatoes need full sun and regular watering to grow well. Gardeners plant them after "
        "the last frost of spring. Pruning the side shoots helps the plant put its energy into "
        "fruit. Mulch keeps the soil moist and the weeds down. Ripe tomatoes are picked when "
        "they turn deep red."
    )
    text = " ".join([CATS, MARKETS, gardens])
    chunker = make_chunker("semantic", max_tokens=100, token_counter=MINILM)
    starts = [s.start for s in chunker.split(text)]
    assert starts == [0, len(CATS) + 1, len(CATS) + len(MARKETS) + 2]


@pytest.mark.parametrize(("tokenizer", "max_tokens"), [("chars4", 48), ("all-minilm-l6-v2", 32)])
def test_chunks_of_the_sample_corpus_fit_the_budget_and_end_at_sentences(
    tokenizer: str, max_tokens: int
):
    counter = load_token_counter(tokenizer)
    chunker = make_chunker(
        "semantic", max_tokens=max_tokens, min_tokens=max_tokens // 4, token_counter=counter
    )
    for name, text in sample_documents({".md", ".txt"}).items():
        spans = chunker.split(text)
        check_span_contract(text, spans, lambda chunk: counter(chunk) <= max_tokens, 0)
        for span, after in zip(spans, spans[1:], strict=False):
            chunk = text[span.start : span.end]
            # A chunk ends at a sentence end or a line end, unless a long sentence was cut.
            at_sentence = chunk.rstrip("\"')]\u2019\u201d\u00bb").endswith((".", "?", "!"))
            at_line = "\n" in text[span.end : after.start]
            assert at_sentence or at_line or counter(chunk) > max_tokens // 2, (name, chunk)


def test_large_segments_are_split_within_the_budget_and_tiny_ones_merged():
    text = " ".join([CATS, MARKETS] * 4)
    chunker = make_chunker("semantic", max_tokens=60, min_tokens=30, token_counter=MINILM)
    spans = chunker.split(text)
    counts = [MINILM(text[s.start : s.end]) for s in spans]
    check_span_contract(text, spans, lambda chunk: MINILM(chunk) <= 60, 0)
    assert len(spans) > 8
    # Only the last chunk of a segment may be left under min_tokens, when nothing could take it.
    assert sum(n < 30 for n in counts) <= len(spans) // 4, counts


def test_the_model_is_loaded_once_per_process(monkeypatch):
    monkeypatch.setattr(semantic_module, "_MODELS", {})  # as a fresh worker process starts
    loads: list[Path] = []
    real_load = embedding.load

    def counting_load(path: Path, device: str | None = None):
        loads.append(path)
        return real_load(path, device)

    monkeypatch.setattr(embedding, "load", counting_load)
    chunker = make_chunker("semantic")
    for copy in (chunker, make_chunker("semantic"), pickle.loads(pickle.dumps(chunker))):
        for text in (CATS + " " + MARKETS, MARKETS + "\n\n" + CATS):
            assert copy.split(text)
    assert loads == [chunker.model_path]
    assert list(semantic_module._MODELS) == [chunker.model_path]


def test_the_output_is_the_same_for_the_same_text_and_model():
    text = " ".join([MARKETS, CATS] * 3)
    first = make_chunker("semantic", max_tokens=80).split(text)
    assert make_chunker("semantic", max_tokens=80).split(text) == first
    assert len(first) > 3


def test_the_model_files_are_in_the_fingerprint(tmp_path: Path):
    # The same model with one configuration file changed: another model to the fingerprint.
    original = embedding.model_path()
    other = tmp_path / "minilm-copy"
    for file in original.rglob("*"):
        if file.is_file():
            target = other / file.relative_to(original)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(file)
    settings = other / "sentence_bert_config.json"
    text = settings.read_text()
    settings.unlink()
    settings.write_text(text.replace("256", "128"))

    default = ChunkingConfig.create("semantic")
    same = ChunkingConfig.create("semantic", semantic_model=str(original))
    changed = ChunkingConfig.create("semantic", semantic_model=str(other))
    key = default.description["params"]["semantic_model_key"]
    assert key == embedding.model_key(original)
    assert same.description["params"]["semantic_model_key"] == key
    assert changed.description["params"]["semantic_model_key"] != key
    assert len({default.fingerprint, same.fingerprint, changed.fingerprint}) == 3
    assert default.fingerprint == ChunkingConfig.create("semantic").fingerprint


def test_without_the_embed_extra_it_is_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    with pytest.raises(ParameterError, match=r"pip install 'chunkmill\[embed\]'"):
        SemanticChunker()
    code = main(["run", "--strategy", "semantic", "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "chunkmill: error: --strategy semantic needs the embed extra (sentence-transformers, "
        "torch): pip install 'chunkmill[embed]'\n"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--breakpoint", "median:3"], "--breakpoint must be percentile:P"),
        (["--breakpoint", "percentile:120"], "--breakpoint: percentile must be between 0 and 100"),
        (["--semantic-model", "/nonexistent"], "--semantic-model /nonexistent: not a"),
        (["--max-tokens", "40", "--min-tokens", "40"], "--min-tokens (40) must be less than"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it(flags, message, capsys, tmp_path):
    code = main(["run", "--strategy", "semantic", *flags, "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"chunkmill: error: {message}")


def test_its_flags_are_refused_with_another_strategy(capsys, tmp_path):
    code = main(["run", "--strategy", "paragraph", "--breakpoint", "stddev:2"])
    assert code == 2
    assert "--breakpoint does not apply to strategy 'paragraph'" in capsys.readouterr().err
