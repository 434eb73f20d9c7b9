"""ChunkingConfig: strategy selection, parameter routing, fingerprints, start-up errors."""

from __future__ import annotations

import pytest

from transforms.config import AUTO_STRATEGIES, Chunking, ChunkingConfig


@pytest.mark.parametrize(("fmt", "strategy"), sorted(AUTO_STRATEGIES.items()))
def test_auto_picks_a_strategy_per_format(fmt, strategy):
    chunking = Chunking(ChunkingConfig.create())
    assert chunking.strategy_for(fmt) == strategy
    assert chunking.chunker_for(fmt, "/x/file.py").name == strategy


def test_auto_code_separators_follow_the_language():
    chunking = Chunking(ChunkingConfig.create())
    py = chunking.chunker_for("code", "/x/a.py").params()["separators"]
    go = chunking.chunker_for("code", "/x/a.go").params()["separators"]
    assert py != go and any("def" in s for s in py) and any("func" in s for s in go)


def test_explicit_strategy_applies_to_every_format():
    chunking = Chunking(ChunkingConfig.create("sentence"))
    assert {chunking.strategy_for(f) for f in AUTO_STRATEGIES} == {"sentence"}


@pytest.mark.parametrize(
    ("strategy", "params", "name"),
    [
        ("paragraph", {"chunk_size": 10}, "chunk_size"),
        ("sentence", {"max_tokens": 10}, "max_tokens"),
        ("section", {"overlap_tokens": 10}, "overlap_tokens"),
        ("auto", {"nonsense": 1}, "nonsense"),
    ],
)
def test_a_parameter_the_strategy_does_not_take_is_refused(strategy, params, name):
    with pytest.raises(ValueError, match=f"^{name} does not apply"):
        ChunkingConfig.create(strategy, **params)


def test_auto_routes_each_parameter_to_the_strategies_that_take_it():
    chunking = Chunking(ChunkingConfig.create(max_tokens=300, chunk_size=500))
    assert chunking.chunker_for("markdown").params()["max_tokens"] == 300
    assert chunking.chunker_for("text").params()["max_tokens"] == 300
    assert chunking.chunker_for("code", "a.py").params()["chunk_size"] == 500


@pytest.mark.parametrize(
    "other",
    [
        {"strategy": "paragraph"},
        {"max_tokens": 400},
        {"tokenizer": "whitespace"},
        {"context_prev_chars": 100},
        {"context_next_chars": 100},
    ],
)
def test_fingerprint_changes_with_anything_that_changes_chunks(other):
    base = ChunkingConfig.create()
    strategy = other.pop("strategy", "auto")
    changed = ChunkingConfig.create(strategy, **other)
    assert changed.fingerprint != base.fingerprint
    assert ChunkingConfig.create(strategy, **other).fingerprint == changed.fingerprint


def test_context_window_defaults():
    assert ChunkingConfig.create("paragraph-window").context() == (500, 300)
    assert ChunkingConfig.create("paragraph").context() == (0, 0)
    assert ChunkingConfig.create("paragraph", context_prev_chars=50).context() == (50, 0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "nope"}, "unknown chunking strategy"),
        ({"tokenizer": "nope"}, "nope"),
        ({"tokenizer": "/nonexistent/tokenizer.json"}, "tokenizer"),
        ({"context_prev_chars": -1}, "context_prev_chars must be at least 0"),
    ],
)
def test_start_up_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ChunkingConfig.create(**kwargs)


def test_a_worker_refuses_a_tokenizer_other_than_the_configured_one(tmp_path):
    from tests.unit.test_tokens import write_tokenizer

    path = write_tokenizer(tmp_path / "tokenizer.json", ["alpha", "beta"])
    config = ChunkingConfig.create("paragraph", tokenizer=str(path))
    assert Chunking(config).count_tokens("alpha beta") == 4  # [CLS] alpha beta [SEP]
    write_tokenizer(path, ["alpha", "beta", "gamma"])  # the file changed under the run
    with pytest.raises(RuntimeError, match="configured with hf:"):
        Chunking(config)
