"""One contract, run over every registered strategy: the registry builds it by name with its
defaults, rejects bad and foreign parameters, and its chunks of any text keep the offset
contract (tests/unit/chunker_contract.py), the same on every call and after pickling. The
per-strategy files test what only that strategy does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill import embedding
from chunkmill.chunking import available, make_chunker
from chunkmill.chunking.paragraph import ParagraphChunker
from chunkmill.chunking.paragraph_window import ParagraphWindowChunker
from chunkmill.chunking.recursive import RecursiveChunker
from chunkmill.chunking.section import SectionChunker
from chunkmill.chunking.semantic import SemanticChunker
from chunkmill.chunking.sentence import SentenceChunker

from .chunker_contract import assert_deterministic, sample_documents, texts


@dataclass(frozen=True)
class Strategy:
    name: str
    cls: type
    defaults: dict[str, Any]
    custom: dict[str, Any]  # other values, as given
    invalid: tuple[dict[str, Any], ...]  # each rejected by the class and by the registry
    foreign: str  # a parameter of another strategy, which this one rejects
    max_overlap: int  # of the custom chunker: characters two chunks may share


STRATEGIES = [
    Strategy(
        "paragraph",
        ParagraphChunker,
        {"max_tokens": 700, "overlap_tokens": 80},
        {"max_tokens": 50, "overlap_tokens": 5},
        (
            {"max_tokens": 0},
            {"max_tokens": -1},
            {"max_tokens": 10, "overlap_tokens": -1},
            {"max_tokens": 10, "overlap_tokens": 10},
            {"max_tokens": 10, "overlap_tokens": 11},
            {"max_tokens": 1, "overlap_tokens": 1},
            {"max_tokens": "10"},
            {"max_tokens": 10.0},
            {"max_tokens": True},
        ),
        "max_chars",
        5 * 4,
    ),
    Strategy(
        "sentence",
        SentenceChunker,
        {"chunk_size": 1000, "chunk_overlap": 200},
        {"chunk_size": 300, "chunk_overlap": 0},
        (
            {"chunk_size": 0},
            {"chunk_size": -1},
            {"chunk_size": 10, "chunk_overlap": -1},
            {"chunk_size": 10, "chunk_overlap": 10},
            {"chunk_size": 10, "chunk_overlap": 11},
            {"chunk_size": 1, "chunk_overlap": 1},
            {"chunk_size": "10"},
            {"chunk_size": 10.0},
            {"chunk_size": True},
            {"chunk_size": 10, "chunk_overlap": False},
        ),
        "max_tokens",
        0,
    ),
    Strategy(
        "section",
        SectionChunker,
        {"max_tokens": 512},
        {"max_tokens": 64},
        (
            {"max_tokens": 0},
            {"max_tokens": -1},
            {"max_tokens": "512"},
            {"max_tokens": 512.0},
            {"max_tokens": True},
        ),
        "overlap_tokens",
        0,
    ),
    Strategy(
        "recursive",
        RecursiveChunker,
        {"chunk_size": 1000, "chunk_overlap": 200, "separators": ["\n\n", "\n", ". ", " ", ""]},
        {"chunk_size": 500, "chunk_overlap": 0},
        (
            {"chunk_size": 0},
            {"chunk_size": -5, "chunk_overlap": 0},
            {"chunk_overlap": -1},
            {"chunk_size": 10, "chunk_overlap": 10},
            {"chunk_size": 10, "chunk_overlap": 11},
            {"chunk_size": "10"},
            {"chunk_size": 10.0},
            {"chunk_size": True},
            {"chunk_overlap": False},
            {"separators": "\n\n"},
            {"separators": []},
            {"separators": ()},
            {"separators": ["\n", 1]},
            {"separators": [None]},
            {"separators": {"\n": 1}},
        ),
        "max_tokens",
        0,
    ),
    Strategy(
        "paragraph-window",
        ParagraphWindowChunker,
        {"max_chars": 8000},
        {"max_chars": 100},
        (
            {"max_chars": 0},
            {"max_chars": -1},
            {"max_chars": "10"},
            {"max_chars": 10.0},
            {"max_chars": True},
        ),
        "max_tokens",
        0,
    ),
    Strategy(
        "semantic",
        SemanticChunker,
        {
            "max_tokens": 256,
            "min_tokens": 64,
            "breakpoint": "percentile:95",
            "sentence_buffer": 1,
            "semantic_model": "all-minilm-l6-v2",
            "semantic_model_key": embedding.model_key(embedding.model_path()),
        },
        {"max_tokens": 40, "min_tokens": 8, "breakpoint": "stddev:1", "sentence_buffer": 0},
        (
            {"max_tokens": 0},
            {"max_tokens": True},
            {"max_tokens": 10, "min_tokens": 10},
            {"min_tokens": -1},
            {"breakpoint": "percentile:101"},
            {"breakpoint": "similarity:2"},
            {"breakpoint": "cosine:0.5"},
            {"breakpoint": "percentile"},
            {"breakpoint": 95},
            {"sentence_buffer": -1},
            {"semantic_model": "/nonexistent/model"},
            {"semantic_model": ""},
        ),
        "chunk_size",
        0,
    ),
]
BY_NAME = {s.name: s for s in STRATEGIES}
ids = [s.name for s in STRATEGIES]


def test_every_registered_strategy_is_under_contract():
    assert sorted(BY_NAME) == sorted(n for n in available() if n != "auto")


@pytest.mark.parametrize("strategy", STRATEGIES, ids=ids)
def test_the_registry_builds_it_by_name_with_its_defaults(strategy: Strategy):
    chunker = make_chunker(strategy.name, **dict.fromkeys(strategy.defaults))  # None: default
    assert isinstance(chunker, strategy.cls)
    assert chunker.name == strategy.name
    assert chunker.params() == strategy.defaults
    custom = make_chunker(strategy.name, **strategy.custom)
    assert custom.params() == {**strategy.defaults, **strategy.custom}
    assert repr(custom).startswith(strategy.cls.__name__)


@pytest.mark.parametrize(
    ("strategy", "params"),
    [(s, p) for s in STRATEGIES for p in s.invalid],
    ids=[f"{s.name}-{p}" for s in STRATEGIES for p in s.invalid],
)
def test_bad_parameters_are_value_errors(strategy: Strategy, params: dict[str, Any]):
    with pytest.raises(ValueError):
        strategy.cls(**params)
    with pytest.raises(ValueError):
        make_chunker(strategy.name, **params)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=ids)
def test_a_parameter_of_another_strategy_is_refused_naming_it(strategy: Strategy):
    with pytest.raises(ValueError, match=strategy.foreign):
        make_chunker(strategy.name, **{strategy.foreign: 100})


def _check_offsets(text: str, strategy: Strategy) -> None:
    chunker = make_chunker(strategy.name, **strategy.custom)
    spans = chunker.split(text)
    if not text.strip():
        assert spans == []
        return
    covered = 0
    for prev, span in zip([None, *spans], spans, strict=False):
        chunk = text[span.start : span.end]
        assert chunk and not chunk[0].isspace() and not chunk[-1].isspace(), span
        if prev is not None:
            assert prev.start < span.start and prev.end < span.end, (prev, span)
            assert prev.end - span.start <= strategy.max_overlap, (prev, span)
        assert text[covered : span.start].strip() == "", (covered, span)
        covered = max(covered, span.end)
    assert text[covered:].strip() == ""
    assert_deterministic(chunker, make_chunker(strategy.name, **strategy.custom), text, spans)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=ids)
@pytest.mark.parametrize("name", sorted(sample_documents({".md", ".txt", ".py", ".go"})))
def test_chunks_of_the_sample_corpus_keep_the_offset_contract(strategy: Strategy, name: str):
    _check_offsets(sample_documents({".md", ".txt", ".py", ".go"})[name], strategy)


_FRAGMENTS = st.sampled_from(
    ["word", "# Title", "\n\n", "\n", ". ", "- item", "```", "  ", "\t", "日本語", "🙂", "x" * 30]
)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=ids)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts(_FRAGMENTS))
def test_chunks_of_any_text_keep_the_offset_contract(strategy: Strategy, text: str):
    _check_offsets(text, strategy)
