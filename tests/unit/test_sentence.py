"""Tests for the ``sentence`` chunking strategy."""

from __future__ import annotations

import pickle
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking import Span
from chunkmill.chunking.sentence import SentenceChunker

from .chunker_contract import (
    assert_deterministic,
    check_span_contract,
    sample_documents,
    texts,
    within_chars,
)

# --- an oracle written independently of the implementation ---------------------------------
# Character by character and quadratic where that is simplest: it states the contract of
# the SentenceChunker docstring literally, with no regexes and no jumps.


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def reference_sentences(text: str) -> list[tuple[int, int]]:
    ends = [i + 1 for i in range(len(text) - 1) if text[i] in ".?!" and text[i + 1].isspace()]
    bounds = [0, *ends, len(text)]
    trimmed = (_trim(text, a, b) for a, b in pairwise(bounds))
    return [s for s in trimmed if s is not None]


def reference_units(text: str, chunk_size: int) -> list[tuple[int, int]]:
    units = []
    for start, end in reference_sentences(text):
        while end - start > chunk_size:
            spaces = [j for j in range(start + 1, start + chunk_size + 1) if text[j].isspace()]
            if not spaces:
                units.append((start, start + chunk_size))
                start += chunk_size
                continue
            piece = _trim(text, start, spaces[-1])
            rest = _trim(text, spaces[-1], end)
            assert piece is not None and rest is not None
            units.append(piece)
            start = rest[0]
        units.append((start, end))
    return units


def reference_split(text: str, chunk_size: int, chunk_overlap: int) -> list[Span]:
    sentence_starts = {start for start, _ in reference_sentences(text)}
    spans: list[Span] = []
    start = stop = -1
    for unit_start, unit_end in reference_units(text, chunk_size):
        if start < 0:
            start, stop = unit_start, unit_end
        elif unit_end - start <= chunk_size:
            stop = unit_end
        else:
            spans.append(Span(start, stop))
            low = max(stop - chunk_overlap, unit_end - chunk_size)
            window = range(max(low, 1), stop)
            in_sentences = [p for p in window if p in sentence_starts]
            words = [p for p in window if not text[p].isspace() and text[p - 1].isspace()]
            start = (in_sentences or words or [unit_start])[0]
            stop = unit_end
    if start >= 0:
        spans.append(Span(start, stop))
    return spans


def check_invariants(text: str, spans: list[Span], chunk_size: int, chunk_overlap: int) -> None:
    check_span_contract(
        text, spans, within_chars(chunk_size), chunk_overlap, overlap_at_word_start=True
    )

    # A sentence that fits is never cut: it lies whole in a chunk, no chunk ends inside it,
    # and a chunk starts inside it only when carrying an overlap.
    for s_start, s_end in reference_sentences(text):
        if s_end - s_start > chunk_size:
            continue
        assert any(s.start <= s_start and s_end <= s.end for s in spans), (s_start, s_end)
        for i, span in enumerate(spans):
            assert not s_start < span.end < s_end, (span, s_start, s_end)
            if i == 0 or span.start >= spans[i - 1].end:
                assert not s_start < span.start < s_end, (span, s_start, s_end)


def chunk_texts(text: str, chunk_size: int, chunk_overlap: int) -> list[str]:
    spans = SentenceChunker(chunk_size=chunk_size, chunk_overlap=chunk_overlap).split(text)
    check_invariants(text, spans, chunk_size, chunk_overlap)
    assert spans == reference_split(text, chunk_size, chunk_overlap)
    return [text[s.start : s.end] for s in spans]


# --- the rule's edge cases ---------------------------------------------------------------------

S14 = "One two three."  # 14 characters
THREE = "One two three. Four five six? Seven eight nine! Ten."
LONG_SENTENCE = "Alpha beta gamma delta epsilon zeta eta theta iota kappa."


@pytest.mark.parametrize(
    ("text", "chunk_size", "chunk_overlap", "expected"),
    [
        pytest.param("", 20, 0, [], id="empty"),
        pytest.param(" \n\n\t \r\n \u3000\n", 20, 5, [], id="whitespace-only"),
        pytest.param("  \n Hello, world.  \n", 20, 5, ["Hello, world."], id="short-text-trimmed"),
        pytest.param(
            THREE, 100, 20, [THREE], id="text-below-chunk-size-passes-through-as-one-chunk"
        ),
        pytest.param(
            f"{S14} {S14} {S14}", 29, 0, [f"{S14} {S14}", S14], id="sentences-fill-exactly"
        ),
        pytest.param(
            THREE,
            30,
            0,
            ["One two three. Four five six?", "Seven eight nine! Ten."],
            id="question-and-exclamation-end-sentences",
        ),
        pytest.param(
            "Pi is 3.14 approx. E.g.this stays.\tTab ends!\r\nCRLF ends?\nYes.",
            20,
            0,
            ["Pi is 3.14 approx.", "E.g.this stays.", "Tab ends!", "CRLF ends?\nYes."],
            id="mark-must-be-followed-by-whitespace",
        ),
        pytest.param(
            "# Title\n\nNo mark here\n\nStill going. Done.",
            38,
            0,
            ["# Title\n\nNo mark here\n\nStill going.", "Done."],
            id="blank-lines-are-not-boundaries",
        ),
        pytest.param(
            LONG_SENTENCE,
            20,
            0,
            ["Alpha beta gamma", "delta epsilon zeta", "eta theta iota", "kappa."],
            id="long-sentence-cut-at-whitespace",
        ),
        pytest.param("x" * 50, 20, 5, ["x" * 20, "x" * 20, "x" * 10], id="giant-word-hard-cut"),
        pytest.param(
            "Hi. ab " + "x" * 30 + ". Bye.",
            20,
            0,
            ["Hi. ab", "x" * 20, "x" * 10 + ". Bye."],
            id="first-piece-of-long-sentence-joins-chunk-and-last-piece-packs-on",
        ),
        pytest.param(
            THREE,
            30,
            16,
            [
                "One two three. Four five six?",
                "five six? Seven eight nine!",
                "eight nine! Ten.",
            ],
            id="overlap-falls-back-to-word-start",
        ),
        pytest.param(
            "Aa bb. Cc dd. Ee ff. Gg hh.",
            20,
            13,
            ["Aa bb. Cc dd. Ee ff.", "Cc dd. Ee ff. Gg hh."],
            id="overlap-snaps-to-sentence-start",
        ),
        pytest.param(
            "Aa bb. Cc dd. Ee ff. Gg hh.",
            20,
            12,
            ["Aa bb. Cc dd. Ee ff.", "Ee ff. Gg hh."],
            id="sentence-start-preferred-over-earlier-word-start",
        ),
        pytest.param(
            "Aa bb. Cc dd. Ee ff. Gg hh.",
            20,
            5,
            ["Aa bb. Cc dd. Ee ff.", "ff. Gg hh."],
            id="no-sentence-start-in-window-uses-word-start",
        ),
        pytest.param(
            "Aa bb. Cc dd. Ee ff. Gg hh.",
            20,
            0,
            ["Aa bb. Cc dd. Ee ff.", "Gg hh."],
            id="no-overlap",
        ),
        pytest.param(
            "Short one. Longer sentence here.",
            21,
            15,
            ["Short one.", "Longer sentence here."],
            id="no-room-for-overlap",
        ),
        pytest.param(
            "abcdefghij. Klmnopqrst.",
            22,
            5,
            ["abcdefghij.", "Klmnopqrst."],
            id="window-in-one-word",
        ),
    ],
)
def test_edge_cases(text: str, chunk_size: int, chunk_overlap: int, expected: list[str]) -> None:
    assert chunk_texts(text, chunk_size, chunk_overlap) == expected


@pytest.mark.parametrize("chunk_overlap", [0, 4, 12])
def test_repeated_identical_sentences_get_exact_offsets(chunk_overlap: int) -> None:
    # text.find(chunk) would map every chunk to the first copy.
    text = "Same again. " * 40
    spans = SentenceChunker(chunk_size=24, chunk_overlap=chunk_overlap).split(text)
    check_invariants(text, spans, 24, chunk_overlap)
    assert spans == reference_split(text, 24, chunk_overlap)
    # Two 11-character sentences fill 23 of 24 characters, so each chunk is a pair; a
    # 12-character window holds the start of the pair's second sentence.
    step = 12 if chunk_overlap == 12 else 24
    assert spans == [Span(i, i + 23) for i in range(0, len(text) - 13, step)]


def test_overlap_is_carried_from_the_previous_chunk() -> None:
    text = " ".join(f"Sentence number {i} says something about topic {i}." for i in range(30))
    spans = SentenceChunker(chunk_size=200, chunk_overlap=60).split(text)
    check_invariants(text, spans, 200, 60)
    assert len(spans) >= 5
    for prev, cur in pairwise(spans):
        assert prev.start < cur.start < prev.end  # starts inside the previous chunk
        # ~45-character sentences: a whole one always fits the 60-character window.
        assert text[cur.start : cur.start + 9] == "Sentence "
        assert text[cur.start - 2 : cur.start] == ". "


# --- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "word", "a", "Wort", "éclair", "日本語", "🙂", "x" * 15, "3.14", "e.g.", "Mr. X",
        ".", "?", "!", "...", "?!", ". ", "? ", "! ", ".\n", "!\n", ".\r\n", ".\t", ".\u3000",
        " ", "  ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u2028", "\x0c", "\x1c",
    ]
)  # fmt: skip
TEXTS = texts(_FRAGMENTS)
PARAMS = st.integers(1, 60).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1)))


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, params=PARAMS)
def test_matches_reference_and_invariants_hold(text: str, params: tuple[int, int]) -> None:
    chunk_size, chunk_overlap = params
    chunker = SentenceChunker(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    spans = chunker.split(text)
    check_invariants(text, spans, chunk_size, chunk_overlap)
    assert spans == reference_split(text, chunk_size, chunk_overlap)
    fresh = SentenceChunker(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    assert_deterministic(chunker, fresh, text, spans)


# --- a real-ish corpus ----------------------------------------------------------------------

_SENTENCES = [
    "The pipeline reads documents from object storage and writes Parquet chunk tables.",
    "Does each chunk keep exact offsets into its source?",
    "Yes! Its text can always be recovered, e.g. for highlighting, v1.2 onwards.",
    "Überprüfung der Eingaben erfolgt vor dem Schreiben; Fehler landen in einer Tabelle.",
    "埋め込みの前に文書を段落ごとに分割します。",
]


def _builtin_corpus() -> dict[str, str]:
    prose = "\n\n".join(
        " ".join(_SENTENCES[(i + j) % len(_SENTENCES)] for j in range(2 + i % 7)) for i in range(60)
    )
    run_on = " ".join(f"clause {i} and then" for i in range(400)) + " the end."
    crlf = "\r\n".join(_SENTENCES * 30)
    repeated = "Same sentence, again and again, with identical text. " * 300
    blob = "data: " + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 400 + ". End of blob.\n"
    return {
        "builtin/prose.txt": prose,
        "builtin/run-on.txt": run_on,
        "builtin/crlf.txt": crlf,
        "builtin/repeated.txt": repeated,
        "builtin/blob.txt": blob,
    }


def _corpus() -> dict[str, str]:
    corpus = _builtin_corpus()
    corpus.update(sample_documents({".md", ".txt"}))
    return corpus


CORPUS = _corpus()


def test_corpus_has_the_sample_documents() -> None:
    assert len(CORPUS) - len(_builtin_corpus()) >= 15


@pytest.mark.parametrize(
    ("chunk_size", "chunk_overlap"), [(1000, 200), (300, 80), (120, 0)], ids=str
)
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_invariants(name: str, chunk_size: int, chunk_overlap: int) -> None:
    text = CORPUS[name]
    chunker = SentenceChunker(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    spans = chunker.split(text)
    check_invariants(text, spans, chunk_size, chunk_overlap)
    assert spans == reference_split(text, chunk_size, chunk_overlap)
    assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


def test_none_is_not_a_size_for_the_class() -> None:
    # make_chunker reads None as "the default"; the class itself takes numbers only.
    with pytest.raises(ValueError):
        SentenceChunker(chunk_size=10, chunk_overlap=None)  # type: ignore[arg-type]
