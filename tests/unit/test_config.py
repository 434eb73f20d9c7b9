"""ChunkingConfig: strategy selection, parameter routing, fingerprints, start-up errors."""

from __future__ import annotations

import pytest

from chunkmill.chunking.base import ParameterError
from chunkmill.config import AUTO_STRATEGIES, Chunking, ChunkingConfig
from chunkmill.pipeline.cli import main


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


# --- embedding limits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "params", "max_embed", "min_chunk"),
    [
        ("section", {}, 512, 16),
        ("section", {"max_tokens": 300}, 300, 16),
        ("paragraph", {}, 700, 16),
        ("sentence", {}, 512, 16),
        ("recursive", {"chunk_size": 3000, "chunk_overlap": 100}, 1500, 16),
        ("paragraph-window", {}, 512, 0),
    ],
)
def test_each_strategy_has_its_own_embedding_defaults(strategy, params, max_embed, min_chunk):
    config = ChunkingConfig.create(strategy, **params)
    used = config.description["params"]
    assert (used["max_embed_tokens"], used["min_chunk_tokens"]) == (max_embed, min_chunk)
    chunker = Chunking(config).chunker_for("markdown")
    assert (chunker.max_embed_tokens, chunker.min_chunk_tokens) == (max_embed, min_chunk)


@pytest.mark.parametrize(
    "other",
    [{"max_embed_tokens": 300}, {"min_chunk_tokens": 0}, {"min_chunk_tokens": 40}],
)
def test_the_embedding_limits_are_part_of_the_fingerprint(other):
    base = ChunkingConfig.create()
    changed = ChunkingConfig.create(**other)
    assert changed.fingerprint != base.fingerprint
    assert all(
        value["params"][name] == other[name]
        for value in changed.description.values()
        if isinstance(value, dict) and "params" in value
        for name in other
    )


def test_an_embedding_limit_lowers_a_default_max_tokens_and_refuses_a_larger_one():
    lowered = Chunking(ChunkingConfig.create(max_embed_tokens=256))
    assert lowered.chunker_for("markdown").params()["max_tokens"] == 256
    assert lowered.chunker_for("text").params()["max_tokens"] == 256
    kept = Chunking(ChunkingConfig.create(max_embed_tokens=600))
    assert kept.chunker_for("markdown").params()["max_tokens"] == 512
    with pytest.raises(ValueError, match=r"max_embed_tokens \(300\) must be at least max_tokens"):
        ChunkingConfig.create("section", max_tokens=400, max_embed_tokens=300)


def test_the_model_window_is_reported_not_fingerprinted():
    minilm = ChunkingConfig.create(tokenizer="all-minilm-l6-v2")
    assert minilm.model_window == 256 and "model_window" not in minilm.description
    assert ChunkingConfig.create().model_window is None


# Every size or combination error the chunking flags can make: exit 2, one line naming the
# flags to change.
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--max-tokens", "10"],
            "--overlap-tokens (80) must be less than --max-tokens (10); "
            "lower --overlap-tokens or raise --max-tokens",
        ),
        (
            ["--strategy", "sentence", "--chunk-size", "100", "--chunk-overlap", "100"],
            "--chunk-overlap (100) must be less than --chunk-size (100); "
            "lower --chunk-overlap or raise --chunk-size",
        ),
        (
            ["--strategy", "recursive", "--chunk-overlap", "1000"],
            "--chunk-overlap (1000) must be less than --chunk-size (1000)",
        ),
        (
            ["--strategy", "paragraph", "--max-tokens", "400", "--max-embed-tokens", "300"],
            "--max-embed-tokens (300) must be at least --max-tokens (400)",
        ),
        (
            ["--strategy", "paragraph", "--max-embed-tokens", "50"],
            "--overlap-tokens (80) must be less than --max-embed-tokens (50); "
            "lower --overlap-tokens or raise --max-embed-tokens",
        ),
        (
            ["--strategy", "section", "--min-chunk-tokens", "600"],
            "--min-chunk-tokens (600) must be less than --max-embed-tokens (512",
        ),
        (["--strategy", "paragraph", "--chunk-size", "10"], "--chunk-size does not apply"),
        (["--tokenizer", "nope"], "--tokenizer: unknown token counter 'nope'"),
        (
            ["--tokenizer", "all-minilm-l6-v2", "--max-embed-tokens", "2"],
            "--max-embed-tokens (2) leaves no room for text: --tokenizer counts 2 tokens",
        ),
    ],
)
def test_config_errors_name_the_flags(args, expected, tmp_path, capsys):
    code = main(["run", "--output", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("chunkmill: error: ") and err.count("\n") == 1, err
    assert expected in err
    assert "_" not in err.split("error: ", 1)[1], "no parameter name is left in the message"
    assert not (tmp_path / "out").exists()


def test_a_parameter_error_spells_parameters_as_asked():
    error = ParameterError("{a_b} ({0}) must be less than {c_d} ({1}); lower {a_b}", 3, 2)
    assert str(error) == "a_b (3) must be less than c_d (2); lower a_b"
    assert error.params == ("a_b", "c_d")
    assert error.render({"a_b": "--a-b"}) == "--a-b (3) must be less than c_d (2); lower --a-b"
