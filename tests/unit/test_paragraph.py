"""Tests for the ADR-0006 ``paragraph`` chunking strategy."""

from __future__ import annotations

import pickle
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transforms.chunking import Span, available, make_chunker
from transforms.chunking.base import CHARS_PER_TOKEN
from transforms.chunking.paragraph import ParagraphChunker

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "pipeline" / "sample_corpus"


# --- an oracle written independently of the implementation ---------------------------------


def reference_paragraphs(text: str) -> list[tuple[int, int]]:
    """Trimmed paragraph spans, line by line: a paragraph is a maximal run of lines (split on
    "\\n") that are not whitespace-only."""
    paragraphs: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            start = offset + len(line) - len(line.lstrip())
            end = offset + len(line.rstrip())
            current = (start, end) if current is None else (current[0], end)
        elif current is not None:
            paragraphs.append(current)
            current = None
        offset += len(line) + 1
    if current is not None:
        paragraphs.append(current)
    return paragraphs


def nonspace_run_length(text: str, i: int) -> int:
    """Length of the run of non-whitespace characters that contains text[i - 1] and text[i]."""
    left, right = i, i
    while left > 0 and not text[left - 1].isspace():
        left -= 1
    while right < len(text) and not text[right].isspace():
        right += 1
    return right - left


def check_invariants(text: str, spans: list[Span], max_tokens: int, overlap_tokens: int) -> None:
    max_chars = max_tokens * CHARS_PER_TOKEN
    overlap_chars = overlap_tokens * CHARS_PER_TOKEN
    if not text.strip():
        assert spans == []
        return
    assert spans

    for span in spans:
        assert isinstance(span, Span)
        assert 0 <= span.start < span.end <= len(text)
        chunk = text[span.start : span.end]
        assert len(chunk) <= max_chars, (span, len(chunk))
        assert not chunk[0].isspace() and not chunk[-1].isspace(), (span, chunk)

    for prev, cur in pairwise(spans):
        # Strictly increasing starts and ends: document order, progress, no containment.
        assert prev.start < cur.start and prev.end < cur.end, (prev, cur)
        overlap = prev.end - cur.start
        assert overlap <= overlap_chars, (prev, cur)
        if overlap > 0:  # a carried overlap starts at a word start
            assert text[cur.start - 1].isspace(), (prev, cur)

    # Every non-whitespace character is inside some span.
    covered_to = 0
    for span in spans:
        assert text[covered_to : span.start].strip() == "", (covered_to, span)
        covered_to = max(covered_to, span.end)
    assert text[covered_to:].strip() == ""

    # A chunk boundary splits a word only when the word itself exceeds the budget.
    for span in spans:
        for cut in (span.start, span.end):
            if 0 < cut < len(text) and not text[cut - 1].isspace() and not text[cut].isspace():
                assert nonspace_run_length(text, cut) > max_chars, (span, cut)

    # Paragraphs that fit are never split, and chunks are packed greedily.
    paragraphs = reference_paragraphs(text)
    for p_start, p_end in paragraphs:
        if p_end - p_start > max_chars:
            continue
        assert any(s.start <= p_start and p_end <= s.end for s in spans), (p_start, p_end)
        for i, span in enumerate(spans):
            assert not p_start < span.end < p_end, (span, p_start, p_end)
            carries_overlap = i > 0 and span.start < spans[i - 1].end
            if not carries_overlap:
                assert not p_start < span.start < p_end, (span, p_start, p_end)
    para_after = {end: k + 1 for k, (_, end) in enumerate(paragraphs)}
    for span in spans[:-1]:
        k = para_after.get(span.end)
        if k is not None and k < len(paragraphs):
            n_start, n_end = paragraphs[k]
            if n_end - n_start <= max_chars:  # a whole paragraph that did not fit
                assert n_end - span.start > max_chars, (span, paragraphs[k])


def chunk_texts(text: str, **params: int) -> list[str]:
    spans = ParagraphChunker(**params).split(text)
    check_invariants(text, spans, params["max_tokens"], params["overlap_tokens"])
    return [text[s.start : s.end] for s in spans]


# --- ADR-0006 edge cases --------------------------------------------------------------------

TWELVE = [f"para-{i:02d} abcd" for i in range(1, 8)]  # 12 characters each
assert all(len(p) == 12 for p in TWELVE)
P40 = "word " * 7 + "words"
P41 = P40 + "s"
LINES = [f"line {i:02d} is here" for i in range(1, 8)]  # 15 characters each
SENTENCE = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
P33 = "one two three four five six seven"
P30 = "eight nine ten eleven twelve!!"
P37 = "eight nine ten eleven twelve thirteen"
P20 = "first paragraph here"
P21 = "line one 1\nline two 2"  # one paragraph that fits: never cut at its "\n"
assert (len(P20), len(P21), len(P40), len(P41)) == (20, 21, 40, 41)
assert (len(P33), len(P30), len(P37)) == (33, 30, 37)


@pytest.mark.parametrize(
    ("text", "overlap_tokens", "expected"),
    [
        pytest.param("", 0, [], id="empty"),
        pytest.param(" \n\n\t \r\n \u3000\n", 2, [], id="whitespace-only"),
        pytest.param("  \n Hello, world.  \n\n", 2, ["Hello, world."], id="one-short-paragraph"),
        pytest.param(
            "Title\r\n\r\nBody text.\r\n", 2, ["Title\r\n\r\nBody text."], id="crlf-trimmed"
        ),
        pytest.param(
            "\n\n".join(TWELVE),
            0,
            ["\n\n".join(TWELVE[0:3]), "\n\n".join(TWELVE[3:6]), TWELVE[6]],
            id="small-paragraphs-accumulate-to-exactly-the-limit",
        ),
        pytest.param(
            f"{P20}\n \t\n{P21}", 0, [P20, P21], id="blank-line-with-spaces-keeps-paragraph-whole"
        ),
        pytest.param(P40, 0, [P40], id="paragraph-of-exactly-max-chars"),
        pytest.param(P41, 0, ["word " * 6 + "word", "wordss"], id="paragraph-one-char-over"),
        pytest.param(
            "\n".join(LINES),
            0,
            ["\n".join(LINES[i : i + 2]) for i in range(0, 7, 2)],
            id="giant-paragraph-splits-at-newlines",
        ),
        pytest.param(
            SENTENCE,
            0,
            ["alpha beta gamma delta epsilon zeta eta", "theta iota kappa lambda mu"],
            id="giant-line-splits-at-spaces",
        ),
        pytest.param("x" * 100, 0, ["x" * 40, "x" * 40, "x" * 20], id="giant-word-hard-cut"),
        pytest.param(
            "x" * 100, 2, ["x" * 40, "x" * 40, "x" * 20], id="giant-word-no-mid-word-overlap"
        ),
        pytest.param(
            f"{P33}\n\neight nine ten",
            3,
            [P33, "six seven\n\neight nine ten"],
            id="overlap-snaps-to-word-start",
        ),
        pytest.param(
            f"{P33}\n\neight nine ten", 0, [P33, "eight nine ten"], id="no-overlap-when-zero"
        ),
        pytest.param(f"{P33}\n\n{P30}", 3, [P33, f"seven\n\n{P30}"], id="overlap-shrinks-to-fit"),
        pytest.param(f"{P33}\n\n{P37}", 3, [P33, P37], id="no-room-for-overlap"),
    ],
)
def test_edge_cases(text: str, overlap_tokens: int, expected: list[str]) -> None:
    assert chunk_texts(text, max_tokens=10, overlap_tokens=overlap_tokens) == expected


def test_overlap_is_carried_from_the_previous_chunk() -> None:
    text = "\n\n".join(
        f"Paragraph {i} talks about topic {i} at some length, in several words." for i in range(8)
    )
    spans = ParagraphChunker(max_tokens=40, overlap_tokens=8).split(text)
    check_invariants(text, spans, 40, 8)
    assert len(spans) >= 3
    for prev, cur in pairwise(spans):
        assert prev.start < cur.start < prev.end  # starts inside the previous chunk
        assert text[cur.start - 1].isspace() and not text[cur.start].isspace()  # word start
        assert 0 < prev.end - cur.start <= 8 * CHARS_PER_TOKEN


@pytest.mark.parametrize("overlap_tokens", [0, 1, 3])
def test_repeated_identical_paragraphs_get_exact_offsets(overlap_tokens: int) -> None:
    # text.find(chunk) would map every chunk to the first copy.
    text = "same para.\n\n" * 6
    spans = ParagraphChunker(max_tokens=4, overlap_tokens=overlap_tokens).split(text)
    check_invariants(text, spans, 4, overlap_tokens)
    # 16-char budget: one 10-char paragraph per chunk; the room left for an overlap is
    # "ara." (inside a word), so none is carried.
    assert spans == [Span(12 * i, 12 * i + 10) for i in range(6)]


@pytest.mark.parametrize(
    ("max_tokens", "overlap_tokens"),
    [(0, 0), (-1, 0), (10, -1), (10, 10), (10, 11), (1, 1), ("10", 0), (10.0, 0), (True, 0)],
)
def test_invalid_params_raise(max_tokens: object, overlap_tokens: object) -> None:
    with pytest.raises(ValueError):
        ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        make_chunker("paragraph", max_tokens=max_tokens, overlap_tokens=overlap_tokens)


def test_registry_defaults_and_params() -> None:
    assert "paragraph" in available()
    chunker = make_chunker("paragraph", max_tokens=None, overlap_tokens=None)
    assert isinstance(chunker, ParagraphChunker)
    assert chunker.name == "paragraph"
    assert chunker.params() == {"max_tokens": 700, "overlap_tokens": 80}
    custom = make_chunker("paragraph", max_tokens=50, overlap_tokens=5)
    assert custom.params() == {"max_tokens": 50, "overlap_tokens": 5}
    with pytest.raises(ValueError):
        make_chunker("paragraph", max_chars=100)


# --- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "word", "a", "Wort", "éclair", "日本語", "🙂", "x" * 15, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ".", ",", " ", "  ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\n \n", "\n\t \n",
        "\u00a0", "\u3000", "\u2028", "\x0c", "\r",
    ]
)  # fmt: skip
_MIXED = st.lists(st.one_of(_FRAGMENTS, st.text(min_size=1, max_size=6)), max_size=80).map("".join)
TEXTS = st.one_of(
    _MIXED,
    st.tuples(_MIXED, st.integers(2, 6)).map(lambda t: t[0] * t[1]),  # repeated text
    st.text(max_size=200),
)
PARAMS = st.integers(1, 24).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1)))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, params=PARAMS)
def test_invariants_hold_for_any_text(text: str, params: tuple[int, int]) -> None:
    max_tokens, overlap_tokens = params
    chunker = ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    spans = chunker.split(text)
    check_invariants(text, spans, max_tokens, overlap_tokens)
    # Deterministic: same instance, a fresh instance, and a pickled copy (as Beam ships it).
    assert chunker.split(text) == spans
    assert ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens).split(text) == (
        spans
    )
    assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


# --- a real-ish corpus ----------------------------------------------------------------------

_SENTENCES = [
    "The pipeline reads documents from object storage and writes Parquet chunk tables.",
    "Each chunk keeps exact offsets into its source, so its text can always be recovered.",
    "Incremental runs skip documents whose content hash has not changed since the last run.",
    "Überprüfung der Eingaben erfolgt vor dem Schreiben; Fehler landen in einer Dead-Letter-Tabelle.",  # noqa: E501
    "埋め込みの前に文書を段落ごとに分割します。",
]


def _builtin_corpus() -> dict[str, str]:
    sections = []
    for i in range(12):
        body = " ".join(_SENTENCES[(i + j) % len(_SENTENCES)] for j in range(3 + i % 4))
        sections.append(
            f"## Section {i}\n\n{body}\n\n- item one of {i}\n- item two of {i}\n\n"
            f"```python\ndef handler_{i}(event):\n    return event['id']\n```\n"
        )
    markdown = "# Runbook\n\n" + "\n".join(sections)
    long_paragraph = " ".join(_SENTENCES[i % len(_SENTENCES)] for i in range(120))
    crlf = "\r\n\r\n".join("\r\n".join([f"Note {i}:", *_SENTENCES[: 1 + i % 5]]) for i in range(60))
    repeated = ("Same paragraph, again and again, with identical text.\n\n" * 200).strip()
    blob = "data: " + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 400 + "\n\nend of blob\n"
    return {
        "builtin/runbook.md": markdown,
        "builtin/long-paragraph.txt": long_paragraph,
        "builtin/crlf.txt": crlf,
        "builtin/repeated.txt": repeated,
        "builtin/blob.txt": blob,
    }


def _corpus() -> dict[str, str]:
    corpus = _builtin_corpus()
    if SAMPLE_CORPUS.is_dir():
        for path in sorted(SAMPLE_CORPUS.rglob("*")):
            if path.is_file() and path.suffix.lower() in {".md", ".txt"}:
                # Raw bytes: read_text() would translate "\r\n" and hide separator handling.
                name = path.relative_to(SAMPLE_CORPUS).as_posix()
                corpus[name] = path.read_bytes().decode("utf-8", errors="replace")
    return corpus


CORPUS = _corpus()


@pytest.mark.parametrize(
    "params", [{}, {"max_tokens": 64, "overlap_tokens": 16}], ids=["defaults", "max64-overlap16"]
)
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_invariants(name: str, params: dict[str, int]) -> None:
    text = CORPUS[name]
    chunker = ParagraphChunker(**params)
    spans = chunker.split(text)
    check_invariants(text, spans, chunker.max_tokens, chunker.overlap_tokens)
