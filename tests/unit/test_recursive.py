"""Tests for the ``recursive`` chunking strategy and the language-aware separators."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking import Span, make_chunker
from chunkmill.chunking.recursive import DEFAULT_SEPARATORS, RecursiveChunker, separators_for

from .chunker_contract import (
    assert_deterministic,
    check_span_contract,
    sample_documents,
    texts,
    within_chars,
)

# Every text file of the sample corpus (all but its PDFs).
SAMPLE_TEXT_SUFFIXES = {".md", ".txt", ".py", ".go", ".rs", ".java", ".js", ".sh", ".sql", ".yaml"}


# --- an oracle written independently of the implementation ---------------------------------
# langchain's algorithm, restated over offsets: str.split for occurrences, a list of pieces
# per level, one piece per character for "", and langchain's pop-from-the-front overlap.


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _cut(sep: str) -> int:
    lead = len(sep) - len(sep.lstrip())
    return lead if 0 < lead < len(sep) else len(sep)


def reference_split(
    text: str, chunk_size: int, chunk_overlap: int, separators: tuple[str, ...]
) -> list[Span]:
    usable = list(separators)
    if "" in usable:
        usable = usable[: usable.index("")]
    out: list[Span] = []

    def merge(run: list[tuple[int, int]]) -> None:
        current: list[tuple[int, int]] = []
        for start, end in run:
            if current and end - current[0][0] > chunk_size:
                prev_end = current[-1][1]
                out.append(Span(current[0][0], prev_end))
                while current and (
                    prev_end - current[0][0] > chunk_overlap or end - current[0][0] > chunk_size
                ):
                    current.pop(0)
            current.append((start, end))
        if current:
            out.append(Span(current[0][0], current[-1][1]))

    def split(start: int, end: int, level: int) -> None:
        if end - start <= chunk_size:
            out.append(Span(start, end))
            return
        for i in range(level, len(usable)):
            sep = usable[i]
            parts = text[start:end].split(sep)
            if len(parts) == 1:
                continue
            raw, position = [], start
            piece_start = start
            for part in parts[:-1]:
                occurrence = position + len(part)
                raw.append((piece_start, occurrence + _cut(sep)))
                piece_start = occurrence + _cut(sep)
                position = occurrence + len(sep)
            raw.append((piece_start, end))
            pieces = [p for p in (_trim(text, a, b) for a, b in raw) if p is not None]
            next_level = i + 1
            break
        else:
            pieces = [(j, j + 1) for j in range(start, end) if not text[j].isspace()]
            next_level = len(usable)
        run: list[tuple[int, int]] = []
        for piece in pieces:
            if piece[1] - piece[0] > chunk_size:
                merge(run)
                run = []
                split(*piece, next_level)
            else:
                run.append(piece)
        merge(run)

    whole = _trim(text, 0, len(text))
    if whole is not None:
        split(*whole, 0)
    return out


def check_invariants(
    text: str, spans: list[Span], chunk_size: int, chunk_overlap: int, separators: tuple[str, ...]
) -> None:
    check_span_contract(text, spans, within_chars(chunk_size), chunk_overlap)
    assert spans == reference_split(text, chunk_size, chunk_overlap, separators)


def chunk_texts(
    text: str, chunk_size: int, chunk_overlap: int, separators: tuple[str, ...] | None = None
) -> list[str]:
    chunker = RecursiveChunker(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators
    )
    spans = chunker.split(text)
    check_invariants(text, spans, chunk_size, chunk_overlap, chunker.separators)
    return [text[s.start : s.end] for s in spans]


# --- edge cases -----------------------------------------------------------------------------

TWELVE = [f"para-{i:02d} abcd" for i in range(1, 8)]  # 12 characters each
assert all(len(p) == 12 for p in TWELVE)
SENTENCES = "First sentence here. Second sentence here. Third one."
CODE_SEPARATORS = ("\ndef ", "\n\n", "\n", " ", "")
PY = "import os\n\ndef a():\n    return 1\n\ndef b():\n    return 2\n"


@pytest.mark.parametrize(
    ("text", "chunk_size", "chunk_overlap", "separators", "expected"),
    [
        pytest.param("", 20, 0, None, [], id="empty"),
        pytest.param(" \n\n\t \r\n \u3000\n", 20, 5, None, [], id="whitespace-only"),
        pytest.param(
            "  \n Hello,  world.\n\n", 20, 5, None, ["Hello,  world."], id="short-trimmed"
        ),
        pytest.param(
            "\n\n".join(TWELVE),
            40,
            0,
            None,
            ["\n\n".join(TWELVE[0:3]), "\n\n".join(TWELVE[3:6]), TWELVE[6]],
            id="paragraphs-merge-to-exactly-the-limit",
        ),
        pytest.param(
            "\n\n".join(TWELVE),
            40,
            14,
            None,
            ["\n\n".join(TWELVE[i : i + 3]) for i in (0, 2, 4)],
            id="overlap-is-whole-pieces",
        ),
        pytest.param(
            "\n\n".join(TWELVE),
            40,
            11,
            None,
            ["\n\n".join(TWELVE[0:3]), "\n\n".join(TWELVE[3:6]), TWELVE[6]],
            id="no-piece-fits-the-overlap-window",
        ),
        pytest.param(
            "one\ntwo\n\nthree four five six seven",
            15,
            0,
            None,
            ["one\ntwo", "three four five", "six seven"],
            id="blank-line-before-line-before-space",
        ),
        pytest.param(
            SENTENCES,
            25,
            0,
            None,
            ["First sentence here.", "Second sentence here.", "Third one."],
            id="sentence-separator-stays-with-its-sentence",
        ),
        pytest.param(
            "x" * 50, 20, 5, None, ["x" * 20, "x" * 20, "x" * 20], id="hard-cut-overlaps-chars"
        ),
        pytest.param(
            "a b c d e f g h i j k l m n",
            9,
            4,
            None,
            ["a b c d e", "d e f g h", "g h i j k", "j k l m n"],
            id="words-with-overlap",
        ),
        pytest.param(
            "short\n\n" + "y" * 30 + "\n\nend para",
            20,
            10,
            None,
            ["short", "y" * 20, "y" * 20, "end para"],
            id="no-overlap-across-a-recursively-split-piece",
        ),
        pytest.param(
            PY,
            30,
            0,
            CODE_SEPARATORS,
            ["import os", "def a():\n    return 1", "def b():\n    return 2"],
            id="definition-separator-starts-the-next-piece",
        ),
        pytest.param(
            "aaaa,bbbb,cccc", 9, 0, (",",), ["aaaa,", "bbbb,cccc"], id="custom-separator-kept"
        ),
        pytest.param(
            "abc def ghijklmnop",
            6,
            0,
            (" ",),
            ["abc", "def", "ghijkl", "mnop"],
            id="hard-cut-implied-without-empty-separator",
        ),  # fmt: skip
        pytest.param(
            "ab cd\nef gh", 5, 0, ("", "\n", " "), ["ab cd", "ef gh"], id="nothing-after-empty"
        ),
        pytest.param(
            "1234567890", 10, 0, ("",), ["1234567890"], id="piece-of-exactly-chunk-size-kept"
        ),
        pytest.param("x. y. z.", 4, 0, (". ",), ["x.", "y.", "z."], id="separator-at-piece-ends"),
    ],
)
def test_edge_cases(
    text: str,
    chunk_size: int,
    chunk_overlap: int,
    separators: tuple[str, ...] | None,
    expected: list[str],
) -> None:
    assert chunk_texts(text, chunk_size, chunk_overlap, separators) == expected


@pytest.mark.parametrize("chunk_overlap", [0, 10, 11])
def test_repeated_identical_text_gets_exact_offsets(chunk_overlap: int) -> None:
    # text.find(chunk) would map every chunk to the first copy.
    text = "Same again. " * 40
    spans = RecursiveChunker(chunk_size=24, chunk_overlap=chunk_overlap).split(text)
    check_invariants(text, spans, 24, chunk_overlap, DEFAULT_SEPARATORS)
    # Pieces are the 11-character sentences; two fill 23 of 24 characters. An 11-character
    # window holds the chunk's last piece, a 10-character one holds none.
    step = 12 if chunk_overlap == 11 else 24
    assert spans == [Span(i, i + 23) for i in range(0, len(text) - 13, step)]


# --- parameters -----------------------------------------------------------------------------


def test_separators_are_part_of_the_config() -> None:
    chunker = make_chunker("recursive", chunk_size=None, chunk_overlap=None, separators=None)
    # The default list spelled out is the same config; other separators are a different one.
    explicit = make_chunker("recursive", separators=list(DEFAULT_SEPARATORS))
    assert explicit.params() == chunker.params()
    code = make_chunker("recursive", chunk_size=500, separators=separators_for("x.py"))
    assert code.params() == {
        "chunk_size": 500,
        "chunk_overlap": 200,
        "separators": list(separators_for("x.py")),
    }
    assert code.params() != make_chunker("recursive", chunk_size=500).params()
    with pytest.raises(ValueError):
        make_chunker("recursive", max_tokens=100)


# --- language-aware separators --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "first"),
    [
        ("retry_client.py", "\n\n\n"),
        ("gs://bucket/src/Types.PYI", "\n\n\n"),
        ("debounce.js", "\nfunction "),
        ("app.tsx", "\nfunction "),
        ("worker_pool.go", "\nfunc "),
        ("RateLimiter.java", "\nclass "),
        ("Main.kt", "\nclass "),
        ("App.scala", "\nclass "),
        ("Program.cs", "\nnamespace "),
        ("hash.c", "\nstruct "),
        ("vec.hpp", "\nnamespace "),
        ("checksum.rs", "\nimpl"),
        ("model.rb", "\nclass "),
        ("index.php", "\nnamespace "),
        ("View.swift", "\nclass "),
        ("daily_rollup.sql", ";\n"),
        ("rotate_logs.sh", "\nfunction "),
        ("pipeline.yaml", "\n---"),
        ("README.md", "\n# "),
    ],
)
def test_separators_for_known_extensions(path: str, first: str) -> None:
    separators = separators_for(path)
    assert separators[0] == first
    assert separators[-4:] == ("\n\n", "\n", " ", "") or path.endswith(".md")
    assert separators[-1] == ""
    assert len(set(separators)) == len(separators)
    RecursiveChunker(separators=separators)  # valid


@pytest.mark.parametrize(
    "path", ["notes.txt", "Makefile", "archive.tar.gz", "", "dir.py/file", "/a/b/.bashrc"]
)
def test_separators_for_unknown_extension_is_the_default(path: str) -> None:
    assert separators_for(path) == DEFAULT_SEPARATORS


PYTHON_MODULE = '''"""A module with a class and functions."""

import time


class Backoff:
    """Exponential backoff."""

    def __init__(self, base: float) -> None:
        self.base = base

    def delay(self, attempt: int) -> float:
        return self.base * 2**attempt


def retry(call, attempts: int = 3):
    for attempt in range(attempts):
        try:
            return call()
        except OSError:
            time.sleep(Backoff(0.1).delay(attempt))
    raise RuntimeError("gave up")


def main() -> None:
    print(retry(lambda: 42))
'''


_DEFINITIONS = (
    [part.strip() for part in PYTHON_MODULE.split("\n\n\n")[1:]]
    + [  # the methods, dedented as chunks are trimmed
        PYTHON_MODULE[PYTHON_MODULE.index(f"def {m}(") :].split("\n\n", 1)[0].strip()
        for m in ("__init__", "delay")
    ]
)


def assert_kept_whole(text: str, spans: list[Span], blocks: list[str]) -> None:
    """Each block (a substring occurring once in ``text``) lies inside exactly one chunk, and
    no chunk starts or ends strictly inside it."""
    for block in blocks:
        assert text.count(block) == 1, block
        start = text.index(block)
        end = start + len(block)
        assert sum(s.start <= start and end <= s.end for s in spans) == 1, block
        for span in spans:
            assert not start < span.start < end and not start < span.end < end, (span, block)


@pytest.mark.parametrize("chunk_size", [120, 160, 220, 300])
def test_python_splits_at_definitions(chunk_size: int) -> None:
    separators = separators_for("module.py")
    spans = RecursiveChunker(chunk_size=chunk_size, chunk_overlap=0, separators=separators).split(
        PYTHON_MODULE
    )
    check_invariants(PYTHON_MODULE, spans, chunk_size, 0, separators)
    assert len(spans) > 1
    fitting = [d for d in _DEFINITIONS if len(d) <= chunk_size]
    assert len(fitting) >= 3
    assert_kept_whole(PYTHON_MODULE, spans, fitting)


def test_default_separators_cut_a_class_that_python_separators_keep() -> None:
    # The contrast that makes the language-aware list worth having: at 220 characters the
    # 199-character class fits, but blank lines inside it are where the default list cuts.
    definition = _DEFINITIONS[0]
    assert definition.startswith("class Backoff") and len(definition) <= 220
    python = chunk_texts(PYTHON_MODULE, 220, 0, separators_for("module.py"))
    default = chunk_texts(PYTHON_MODULE, 220, 0, None)
    assert any(definition in c for c in python)
    assert not any(definition in c for c in default)


# --- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "word", "a", "Wort", "éclair", "日本語", "🙂", "x" * 15, "3.14", ". ", ".", ",", ", ",
        "def ", "\ndef ", "\n    def ", "\nclass ", "ab", " ", "  ", "\t", "\n", "\n\n", "\n\n\n",
        "\r\n", "\r\n\r\n", "\u00a0", "\u3000", "\u2028", "\x0c", "\x1c",
    ]
)  # fmt: skip
TEXTS = texts(_FRAGMENTS)
PARAMS = st.integers(1, 60).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1)))
SEPARATORS = st.one_of(
    st.just(DEFAULT_SEPARATORS),
    st.just(separators_for("x.py")),
    st.lists(
        st.one_of(
            # Whitespace, end-attached, start-attached, and self-overlapping ("aa", "aba":
            # occurrences are taken left to right without overlapping) separators.
            st.sampled_from(
                ["\n\n", "\n", ". ", " ", "", ",", "ab", "\ndef ", " x", "x ", "aa", "aba", "  "]
            ),
            st.text(min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=5,
    ).map(tuple),
)


@st.composite
def texts_made_of(draw: st.DrawFn, separators: tuple[str, ...]) -> str:
    """Text dense in the separators themselves and in the parts they are cut into."""
    parts = [p for sep in separators for p in (sep, sep[:1], sep[1:], sep.strip()) if p]
    fragments = st.sampled_from([*parts, "x", "y.", " ", "\n", "\t"]) if parts else _FRAGMENTS
    return "".join(draw(st.lists(st.one_of(fragments, _FRAGMENTS), max_size=40)))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), params=PARAMS, separators=SEPARATORS)
def test_matches_reference_and_invariants_hold(
    data: st.DataObject, params: tuple[int, int], separators: tuple[str, ...]
) -> None:
    text = data.draw(st.one_of(TEXTS, texts_made_of(separators)), label="text")
    chunk_size, chunk_overlap = params
    chunker = RecursiveChunker(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators
    )
    spans = chunker.split(text)
    check_invariants(text, spans, chunk_size, chunk_overlap, separators)
    fresh = RecursiveChunker(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=list(separators)
    )
    assert_deterministic(chunker, fresh, text, spans)


# --- a real-ish corpus ----------------------------------------------------------------------

_SENTENCES = [
    "The pipeline reads documents from object storage and writes Parquet chunk tables.",
    "Each chunk keeps exact offsets into its source, so its text can always be recovered.",
    "Überprüfung der Eingaben erfolgt vor dem Schreiben; Fehler landen in einer Tabelle.",
    "埋め込みの前に文書を段落ごとに分割します。",
]


def _builtin_corpus() -> dict[str, str]:
    prose = "\n\n".join(
        " ".join(_SENTENCES[(i + j) % len(_SENTENCES)] for j in range(2 + i % 17))
        for i in range(60)
    )
    wrapped = "\n".join(prose[i : i + 72] for i in range(0, len(prose), 72))
    crlf = "\r\n\r\n".join("\r\n".join(_SENTENCES[: 1 + i % 4]) for i in range(60))
    repeated = ("Same paragraph, again and again, with identical text.\n\n" * 200).strip()
    blob = "data: " + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 400 + "\n\nend of blob\n"
    return {
        "builtin/prose.txt": prose,
        "builtin/wrapped.txt": wrapped,
        "builtin/crlf.txt": crlf,
        "builtin/repeated.txt": repeated,
        "builtin/blob.txt": blob,
        "builtin/module.py": PYTHON_MODULE * 20,
    }


def _corpus() -> dict[str, str]:
    corpus = _builtin_corpus()
    # Code too: the language-aware separators are checked on real files.
    corpus.update(sample_documents(SAMPLE_TEXT_SUFFIXES))
    return corpus


CORPUS = _corpus()


def test_corpus_has_the_sample_documents() -> None:
    names = set(CORPUS)
    assert sum(n.endswith((".md", ".txt")) and "/" in n for n in names) >= 15
    assert {"code/retry_client.py", "code/worker_pool.go", "code/checksum.rs"} <= names


@pytest.mark.parametrize(
    ("chunk_size", "chunk_overlap"), [(1000, 200), (300, 80), (120, 0)], ids=str
)
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_invariants(name: str, chunk_size: int, chunk_overlap: int) -> None:
    text = CORPUS[name]
    for separators in {DEFAULT_SEPARATORS, separators_for(name)}:
        chunker = RecursiveChunker(
            chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators
        )
        spans = chunker.split(text)
        check_invariants(text, spans, chunk_size, chunk_overlap, separators)
        assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


@pytest.mark.parametrize("chunk_size", [400, 600, 1000])
def test_corpus_python_file_keeps_top_level_blocks_whole(chunk_size: int) -> None:
    text = CORPUS["code/retry_client.py"]
    separators = separators_for("retry_client.py")
    spans = RecursiveChunker(chunk_size=chunk_size, chunk_overlap=0, separators=separators).split(
        text
    )
    check_invariants(text, spans, chunk_size, 0, separators)
    # A block is a definition with its decorators, or the imports; "@dataclass" must stay
    # with "class RetryBudget".
    blocks = [b.strip() for b in text.split("\n\n\n")]
    assert any(b.startswith("@dataclass\nclass RetryBudget") for b in blocks)
    fitting = [b for b in blocks if len(b) <= chunk_size]
    assert len(fitting) >= 4
    assert_kept_whole(text, spans, fitting)
