"""Tests for the ``paragraph-window`` chunking strategy and its use with context windows."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking import Span
from chunkmill.chunking.context import ContextWindow, context_windows
from chunkmill.chunking.paragraph_window import ParagraphWindowChunker

from .chunker_contract import (
    assert_deterministic,
    check_span_contract,
    reference_paragraphs,
    sample_documents,
    texts,
    within_chars,
)

# --- an oracle written independently of the implementation ---------------------------------


def reference_pieces(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """The documented cutting rule, one candidate position at a time: a piece text[start:cut]
    ends at the last "\\n" that keeps it within max_chars, else at the last whitespace, else
    it is cut hard at max_chars; pieces are trimmed."""
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        limit = start + max_chars
        candidates = range(limit, start, -1)
        cut = next((k for k in candidates if text[k] == "\n"), None)
        if cut is None:
            cut = next((k for k in candidates if text[k].isspace()), None)
        if cut is None:
            pieces.append((start, limit))
            start = limit
            continue
        piece_end = cut
        while text[piece_end - 1].isspace():
            piece_end -= 1
        pieces.append((start, piece_end))
        start = cut
        while text[start].isspace():
            start += 1
    pieces.append((start, end))
    return pieces


def reference_units(text: str, max_chars: int) -> list[tuple[int, int]]:
    return [
        piece
        for p_start, p_end in reference_paragraphs(text)
        for piece in (
            [(p_start, p_end)]
            if p_end - p_start <= max_chars
            else reference_pieces(text, p_start, p_end, max_chars)
        )
    ]


def check_invariants(text: str, spans: list[Span], max_chars: int) -> None:
    assert [(s.start, s.end) for s in spans] == reference_units(text, max_chars)
    # Disjoint, in document order; touching only where a word was cut hard.
    check_span_contract(text, spans, within_chars(max_chars), 0)
    for k, span in enumerate(spans):
        assert span == Span(span.start, span.end, paragraph_index=k, total_paragraphs=len(spans))


def chunk_texts(text: str, max_chars: int) -> list[str]:
    spans = ParagraphWindowChunker(max_chars=max_chars).split(text)
    check_invariants(text, spans, max_chars)
    return [text[s.start : s.end] for s in spans]


# --- edge cases -----------------------------------------------------------------------------

P20 = "first paragraph here"
P21 = "line one 1\nline two 2"  # one paragraph that fits: never cut at its "\n"
LINES = [f"line {i:02d} is here" for i in range(1, 8)]  # 15 characters each
SENTENCE = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
assert (len(P20), len(P21)) == (20, 21)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", [], id="empty"),
        pytest.param(" \n\n\t \r\n \u3000\n", [], id="whitespace-only"),
        pytest.param("  \n Hello, world.  \n\n", ["Hello, world."], id="one-short-paragraph"),
        pytest.param("Title\r\n\r\nBody text.\r\n", ["Title", "Body text."], id="crlf"),
        pytest.param(f"{P20}\n \t\n{P21}", [P20, P21], id="blank-line-with-spaces-separates"),
        pytest.param(f"{P20}\n\n\n\n{P20}", [P20, P20], id="many-blank-lines-one-separator"),
        pytest.param("a\u2029b\x0cc\rd", ["a\u2029b\x0cc\rd"], id="other-breaks-do-not-separate"),
        pytest.param(f"{P20}\n\n{P21}", [P20, P21], id="no-packing-of-small-paragraphs"),
        pytest.param("x" * 40, ["x" * 40], id="paragraph-of-exactly-max-chars"),
        pytest.param(
            "word " * 7 + "wordss", ["word " * 6 + "word", "wordss"], id="paragraph-one-char-over"
        ),
        pytest.param(
            "\n".join(LINES),
            ["\n".join(LINES[i : i + 2]) for i in range(0, 7, 2)],
            id="giant-paragraph-splits-at-newlines",
        ),
        pytest.param(
            SENTENCE,
            ["alpha beta gamma delta epsilon zeta eta", "theta iota kappa lambda mu"],
            id="giant-line-splits-at-spaces",
        ),
        pytest.param("x" * 100, ["x" * 40, "x" * 40, "x" * 20], id="giant-word-hard-cut"),
    ],
)
def test_edge_cases(text: str, expected: list[str]) -> None:
    assert chunk_texts(text, max_chars=40) == expected


def test_pieces_count_as_paragraphs() -> None:
    text = f"{P20}\n\n{SENTENCE}\n\n{P21}"
    spans = ParagraphWindowChunker(max_chars=40).split(text)
    check_invariants(text, spans, 40)
    assert [text[s.start : s.end] for s in spans] == [
        P20,
        "alpha beta gamma delta epsilon zeta eta",
        "theta iota kappa lambda mu",
        P21,
    ]
    assert [(s.paragraph_index, s.total_paragraphs) for s in spans] == [(k, 4) for k in range(4)]


def test_a_megabyte_log_line_is_capped_at_the_default() -> None:
    entry = "2024-05-17T03:12:44Z level=warn msg=retrying upstream=ingest attempt=3 "
    text = "header\n\n" + entry * (1_000_000 // len(entry)) + "\n\nfooter"
    spans = ParagraphWindowChunker().split(text)
    check_invariants(text, spans, 8000)
    assert len(spans) > 1_000_000 // 8000
    assert text[spans[0].start : spans[0].end] == "header"
    assert text[spans[-1].start : spans[-1].end] == "footer"
    assert all(7900 < s.end - s.start <= 8000 for s in spans[1:-2])  # cut at spaces


def test_repeated_identical_paragraphs_get_exact_offsets() -> None:
    # text.find(chunk) would map every chunk to the first copy.
    text = "same para.\n\n" * 6
    spans = ParagraphWindowChunker().split(text)
    check_invariants(text, spans, 8000)
    assert spans == [
        Span(12 * k, 12 * k + 10, paragraph_index=k, total_paragraphs=6) for k in range(6)
    ]


# --- with context windows -------------------------------------------------------------------


def test_the_api_documents_example() -> None:
    text = (
        "\nFirst paragraph about the beginning.\n\nSecond paragraph with action.\n\n"
        "Third paragraph concluding.\n"
    )
    spans = ParagraphWindowChunker().split(text)
    chunks = [text[s.start : s.end] for s in spans]
    windows = context_windows(chunks, 500, 300)
    assert chunks[1] == "Second paragraph with action."
    assert (spans[1].paragraph_index, spans[1].total_paragraphs) == (1, 3)
    # The document elides the neighbours as "First paragraph..."; they fit the budgets whole.
    assert windows[1] == ContextWindow(
        "First paragraph about the beginning.\n\nSecond paragraph with action.\n\n"
        "Third paragraph concluding.",
        has_prev=True,
        has_next=True,
    )
    assert not windows[0].has_prev and windows[0].has_next
    assert windows[2].has_prev and not windows[2].has_next


def check_windows(chunks: list[str], windows: list[ContextWindow], prev: int, next_: int) -> None:
    assert len(windows) == len(chunks)
    for k, (chunk, window) in enumerate(zip(chunks, windows, strict=True)):
        assert chunk in window.text
        assert len(window.text) <= len(chunk) + prev + next_ + 10
        if not window.has_prev:
            assert window.text.startswith(chunk)
        if not window.has_next:
            assert window.text.endswith(chunk)
        if k == 0:
            assert not window.has_prev
        if k == len(chunks) - 1:
            assert not window.has_next


# --- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "word", "a", "Wort", "éclair", "日本語", "🙂", "x" * 15, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ".", ",", " ", "  ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\n \n", "\n\t \n",
        "\u00a0", "\u3000", "\u2028", "\x0c", "\r",
    ]
)  # fmt: skip
TEXTS = texts(_FRAGMENTS)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, max_chars=st.integers(1, 60))
def test_invariants_hold_for_any_text(text: str, max_chars: int) -> None:
    chunker = ParagraphWindowChunker(max_chars=max_chars)
    spans = chunker.split(text)
    check_invariants(text, spans, max_chars)
    assert_deterministic(chunker, ParagraphWindowChunker(max_chars=max_chars), text, spans)
    chunks = [text[s.start : s.end] for s in spans]
    check_windows(chunks, context_windows(chunks, 20, 12), 20, 12)


# --- a real-ish corpus ----------------------------------------------------------------------


def _corpus() -> dict[str, str]:
    entry = "2024-05-17T03:12:44Z level=info msg=flush rows=512 took_ms=38 "
    corpus = {
        "builtin/one-line-log.txt": entry * (300_000 // len(entry)),
        "builtin/crlf.txt": "\r\n\r\n".join(f"Note {i}:\r\nline one\r\nline 2" for i in range(50)),
        "builtin/repeated.txt": "Same paragraph, again and again.\n\n" * 200,
        "builtin/blob.txt": "data: " + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 400 + "\n\nend\n",
    }
    corpus.update(sample_documents({".md", ".txt"}))
    return corpus


CORPUS = _corpus()


def test_the_sample_corpus_is_there() -> None:
    assert sum(not name.startswith("builtin/") for name in CORPUS) >= 10


@pytest.mark.parametrize("max_chars", [8000, 200], ids=["default", "max200"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_invariants(name: str, max_chars: int) -> None:
    text = CORPUS[name]
    chunker = ParagraphWindowChunker(max_chars=max_chars)
    spans = chunker.split(text)
    check_invariants(text, spans, max_chars)
    assert pickle.loads(pickle.dumps(chunker)).split(text) == spans
    chunks = [text[s.start : s.end] for s in spans]
    check_windows(chunks, context_windows(chunks, 500, 300), 500, 300)


def test_none_is_not_a_size_for_the_class() -> None:
    with pytest.raises(ValueError):
        ParagraphWindowChunker(max_chars=None)  # type: ignore[arg-type]
