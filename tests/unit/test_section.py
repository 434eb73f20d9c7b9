"""Tests for the ``section`` chunking strategy."""

from __future__ import annotations

import pickle
import re
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking import Span
from chunkmill.chunking.base import CHARS_PER_TOKEN, chars4
from chunkmill.chunking.markdown import (
    LAST_UNIT_END,
    UNIT_BREAK,
    first_unit_end,
    github_slug,
    last_unit_end,
    unit_end,
)
from chunkmill.chunking.section import SectionChunker

from .chunker_contract import check_span_contract

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "pipeline" / "sample_corpus"

Counter = Callable[[str], int]


def words(text: str) -> int:
    """A token counter with no per-chunk overhead: whitespace-separated words."""
    return len(text.split())


def utf8_thirds(text: str) -> int:
    """A token counter with a per-chunk overhead of 2, like special tokens."""
    return len(text.encode()) // 3 + 2


def chars4_again(text: str) -> int:
    """chars4 under another identity, which turns off the character fast path."""
    return (len(text) + 3) // 4


# --- an oracle written independently of the implementation: plain line-by-line parsing ------


@dataclass(frozen=True)
class RefHeading:
    hash_pos: int  # offset of the first "#"
    line_end: int  # offset of the line's "\n", or len(text)
    level: int
    title: str


@dataclass(frozen=True)
class RefDoc:
    headings: list[RefHeading]  # ATX headings of levels 1-6 outside fences, in order
    fences: list[tuple[int, int]]  # fenced code blocks: opener's first "`"/"~" to closer's end


def _drop_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _ref_title(after_hashes: str) -> str:
    title = after_hashes.strip()
    if title.endswith("#"):
        bare = title.rstrip("#")
        if bare == "" or bare[-1] in " \t":
            title = bare.rstrip()
    return title


def reference_parse(text: str) -> RefDoc:
    lines = text.split("\n")
    offsets = []
    offset = 0
    for line in lines:
        offsets.append(offset)
        offset += len(line) + 1
    first = 0
    if len(lines) > 1 and _drop_cr(lines[0]).rstrip(" \t") == "---":
        for k in range(1, len(lines)):
            if _drop_cr(lines[k]).rstrip(" \t") in ("---", "..."):
                first = k + 1  # front matter: lines 0..k hold no heading
                break
    headings: list[RefHeading] = []
    fences: list[tuple[int, int]] = []
    fence: tuple[str, int, int] | None = None  # char, length, start offset
    for k in range(first, len(lines)):
        line = lines[k]
        indent = _indent(line)
        rest = line[indent:] if indent <= 3 else ""
        if fence is not None:
            char, length, start = fence
            body = _drop_cr(rest)
            run = len(body) - len(body.lstrip(char))
            if run >= length and body[run:].strip(" \t") == "":
                fences.append((start, offsets[k] + len(line.rstrip("\r"))))
                fence = None
            continue
        if rest.startswith(("```", "~~~")):
            char = rest[0]
            run = len(rest) - len(rest.lstrip(char))
            if char == "~" or "`" not in rest[run:]:
                fence = (char, run, offsets[k] + indent)
                continue
        if rest.startswith("#"):
            level = len(rest) - len(rest.lstrip("#"))
            after = rest[level:]
            if level <= 6 and (after in ("", "\r") or after[0] in " \t"):
                headings.append(
                    RefHeading(
                        offsets[k] + indent, offsets[k] + len(line), level, _ref_title(after)
                    )
                )
    if fence is not None:
        fences.append((fence[2], len(text)))
    return RefDoc(headings, fences)


def reference_slug(title: str) -> str:
    """github-slugger for the alphabet the generators below use (no links, HTML, Other_Number
    or symbols that are letters)."""
    kept = [c for c in title.lower() if c.isalpha() or c.isdecimal() or c in " -_"]
    return "".join(kept).replace(" ", "-")


def reference_sections(text: str, doc: RefDoc) -> list[tuple[int, tuple[str, ...], str | None]]:
    """(start, path, anchor) of each section: the pre-heading text, then one per heading of
    level 1-4. Slugs are de-duplicated over all headings, as github-slugger does."""
    seen: dict[str, int] = {}
    sections: list[tuple[int, tuple[str, ...], str | None]] = [(0, (), None)]
    stack: list[tuple[int, str]] = []
    for h in doc.headings:
        base = slug = reference_slug(h.title)
        while slug in seen:
            seen[base] += 1
            slug = f"{base}-{seen[base]}"
        seen[slug] = 0
        if h.level <= 4:
            stack = [(lv, t) for lv, t in stack if lv < h.level] + [(h.level, h.title)]
            sections.append((h.hash_pos, tuple(t for _, t in stack), slug))
    return sections


def fits_with(counter: Counter, max_tokens: int) -> Callable[[str], bool]:
    if counter is chars4:
        return lambda chunk: len(chunk) <= max_tokens * CHARS_PER_TOKEN
    return lambda chunk: counter(chunk) <= max_tokens


def check_invariants(
    text: str, spans: list[Span], max_tokens: int, counter: Counter = chars4
) -> None:
    fits = fits_with(counter, max_tokens)
    check_span_contract(text, spans, fits, 0)  # document order, no overlap (docs/chunking.md)
    if not spans:
        return

    # Metadata against the line-by-line oracle.
    doc = reference_parse(text)
    sections = reference_sections(text, doc)
    starts = [start for start, _, _ in sections]
    expected_index: dict[int, int] = {}
    for span in spans:
        k = bisect_right(starts, span.start) - 1
        _, path, anchor = sections[k]
        assert span.section_path == path, (span, path)
        assert span.section_anchor == anchor, (span, anchor)
        assert span.section_chunk_index == expected_index.get(k, 0), span
        expected_index[k] = expected_index.get(k, 0) + 1
        # A chunk never crosses into the next section.
        assert k + 1 == len(starts) or span.end <= starts[k + 1], (span, starts[k + 1])
    # Every section starts a chunk at its heading's "#" (or, before the first heading, at
    # the first non-whitespace character), and a section that fits is exactly one chunk.
    by_start = {span.start: span for span in spans}
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        body = text[start:end]
        if not body.strip():
            continue
        first = start + len(body) - len(body.lstrip())
        assert first in by_start, (first, sections[k])
        last = start + len(body.rstrip())
        if fits(text[first:last]):
            assert by_start[first].end == last, (by_start[first], last)
    # A fenced code block that fits in a chunk is never split.
    span_starts = [span.start for span in spans]
    for fence_start, fence_end in doc.fences:
        block = text[fence_start:fence_end].rstrip()
        if fits(block):
            holder = spans[bisect_right(span_starts, fence_start) - 1]
            assert holder.start <= fence_start and fence_start + len(block) <= holder.end, block


def chunk_texts(text: str, max_tokens: int, counter: Counter = chars4) -> list[str]:
    spans = SectionChunker(max_tokens=max_tokens, token_counter=counter).split(text)
    check_invariants(text, spans, max_tokens, counter)
    return [text[s.start : s.end] for s in spans]


Meta = tuple[str, tuple[str, ...] | None, str | None, int | None]


def chunk_meta(text: str, max_tokens: int = 512) -> list[Meta]:
    spans = SectionChunker(max_tokens=max_tokens).split(text)
    check_invariants(text, spans, max_tokens)
    return [
        (text[s.start : s.end], s.section_path, s.section_anchor, s.section_chunk_index)
        for s in spans
    ]


# --- headings, paths and anchors ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", [], id="empty"),
        pytest.param(" \n\n\t \r\n \u3000\n", [], id="whitespace-only"),
        pytest.param(
            "Intro line.\n\n# Guide\n\nBody.",
            [("Intro line.", (), None, 0), ("# Guide\n\nBody.", ("Guide",), "guide", 0)],
            id="pre-heading-text-has-empty-path",
        ),
        pytest.param(
            " \n\n# Guide\nBody.\n",
            [("# Guide\nBody.", ("Guide",), "guide", 0)],
            id="whitespace-only-pre-heading-text-dropped",
        ),
        pytest.param(
            "# A\n### C\n## B\n#### D\n# E\n",
            [
                ("# A", ("A",), "a", 0),
                ("### C", ("A", "C"), "c", 0),
                ("## B", ("A", "B"), "b", 0),
                ("#### D", ("A", "B", "D"), "d", 0),
                ("# E", ("E",), "e", 0),
            ],
            id="a-heading-pops-every-open-heading-of-its-level-or-deeper",
        ),
        pytest.param(
            "# Guide\n## Install\n### Linux\nSteps.\n##### Tip\nMore.\n###### Note\n",
            [
                ("# Guide", ("Guide",), "guide", 0),
                ("## Install", ("Guide", "Install"), "install", 0),
                (
                    "### Linux\nSteps.\n##### Tip\nMore.\n###### Note",
                    ("Guide", "Install", "Linux"),
                    "linux",
                    0,
                ),
            ],
            id="levels-5-and-6-are-text",
        ),
        pytest.param(
            "# Title\n\nSetext\n======\n\nAlso\n----\n",
            [("# Title\n\nSetext\n======\n\nAlso\n----", ("Title",), "title", 0)],
            id="setext-headings-are-text",
        ),
        pytest.param(
            "## Closed ##  \n#\tTab\n   ### Three spaces\n    #### Four spaces\n#5 bolts\n"
            "####### Seven\n## foo#\n### ###\n## #5 #\n",
            [
                ("## Closed ##", ("Closed",), "closed", 0),
                ("#\tTab", ("Tab",), "tab", 0),
                (
                    "### Three spaces\n    #### Four spaces\n#5 bolts\n####### Seven",
                    ("Tab", "Three spaces"),
                    "three-spaces",
                    0,
                ),
                ("## foo#", ("Tab", "foo#"), "foo", 0),
                ("### ###", ("Tab", "foo#", ""), "", 0),
                ("## #5 #", ("Tab", "#5"), "5", 0),
            ],
            id="atx-syntax",
        ),
        pytest.param(
            "# A\r\n\r\nText.\r\n## B ##\r\nMore.\r\n",
            [("# A\r\n\r\nText.", ("A",), "a", 0), ("## B ##\r\nMore.", ("A", "B"), "b", 0)],
            id="crlf",
        ),
        pytest.param(
            "## Install\n\n```bash\n# not a heading\n## nor this\n```\n\n# Real\n",
            [
                (
                    "## Install\n\n```bash\n# not a heading\n## nor this\n```",
                    ("Install",),
                    "install",
                    0,
                ),
                ("# Real", ("Real",), "real", 0),
            ],
            id="hash-lines-in-a-fence-are-not-headings",
        ),
        pytest.param(
            "# A\n~~~~\n# x\n~~~\n```\n# y\n~~~~~\n# B\n",
            [("# A\n~~~~\n# x\n~~~\n```\n# y\n~~~~~", ("A",), "a", 0), ("# B", ("B",), "b", 0)],
            id="fence-closes-only-with-same-char-and-at-least-its-length",
        ),
        pytest.param(
            "# A\n   ```\n# x\n   ```  \n# B\n",
            [("# A\n   ```\n# x\n   ```", ("A",), "a", 0), ("# B", ("B",), "b", 0)],
            id="indented-fence",
        ),
        pytest.param(
            "# A\n```\n    ```\n\t```\n```x\n# x\n ```\n# B\n",
            [
                ("# A\n```\n    ```\n\t```\n```x\n# x\n ```", ("A",), "a", 0),
                ("# B", ("B",), "b", 0),
            ],
            id="fence-not-closed-by-4-spaces-a-tab-or-trailing-text",
        ),
        pytest.param(
            "# A\n``` info `with` backticks\n# B\n",
            [("# A\n``` info `with` backticks", ("A",), "a", 0), ("# B", ("B",), "b", 0)],
            id="backtick-in-info-string-is-not-a-fence",
        ),
        pytest.param(
            "# A\n```\n# x\n\n# y\n",
            [("# A\n```\n# x\n\n# y", ("A",), "a", 0)],
            id="unclosed-fence-runs-to-the-end",
        ),
        pytest.param(
            "---\ntitle: Doc\n# a YAML comment\n---\n# Real\n",
            [
                ("---\ntitle: Doc\n# a YAML comment\n---", (), None, 0),
                ("# Real", ("Real",), "real", 0),
            ],
            id="front-matter-holds-no-heading",
        ),
        pytest.param(
            "---\n# A\n",
            [("---", (), None, 0), ("# A", ("A",), "a", 0)],
            id="unclosed-front-matter-is-text",
        ),
        pytest.param(
            "# A\ntext" + " \t" * 60 + "\n\n" + " " * 70 + "\n# B\n" + "\n" * 50,
            [("# A\ntext", ("A",), "a", 0), ("# B", ("B",), "b", 0)],
            id="long-whitespace-runs-trimmed",
        ),
        pytest.param(
            "# Foo\n##### Foo\n## Foo\n## Foo\n",
            [
                ("# Foo\n##### Foo", ("Foo",), "foo", 0),
                ("## Foo", ("Foo", "Foo"), "foo-2", 0),
                ("## Foo", ("Foo", "Foo"), "foo-3", 0),
            ],
            id="duplicate-anchors-count-level-5-and-6-headings",
        ),
    ],
)
def test_sections_paths_and_anchors(
    text: str, expected: list[tuple[str, tuple[str, ...], str | None, int]]
) -> None:
    assert chunk_meta(text) == expected


@pytest.mark.parametrize(
    ("title", "slug"),
    [  # github-slugger's own fixtures, and cases the strategy's rule asks for
        ("alpha", "alpha"),
        ("bravoCharlieDelta", "bravocharliedelta"),
        ("heading with a - dash", "heading-with-a---dash"),
        ("heading with an _ underscore", "heading-with-an-_-underscore"),
        ("heading with a period.txt", "heading-with-a-periodtxt"),
        (
            "exchange.bind_headers(exchange, routing [, bindCallback])",
            "exchangebind_headersexchange-routing--bindcallback",
        ),
        ("apostrophe’s should be trimmed", "apostrophes-should-be-trimmed"),
        ("I ♥ unicode", "i--unicode"),
        ("en–dash", "endash"),
        ("😄 unicode emoji", "-unicode-emoji"),
        ("😄-😄 unicode emoji", "--unicode-emoji"),
        ("😄_😄 unicode emoji", "_-unicode-emoji"),
        (":ok_hand: Single", "ok_hand-single"),
        ("Привет non-latin 你好", "привет-non-latin-你好"),
        ("Inverse Kinematics (IK)!", "inverse-kinematics-ik"),
        ("Über Straße", "über-straße"),
        ("x² and ½", "x-and-"),  # Other_Number is dropped
        ("Ⅻ rules", "ⅻ-rules"),  # Letter_Number is kept
        ("Ⓐ circled", "ⓐ-circled"),  # an Alphabetic symbol is kept
        ("नमस्ते", "नमस्ते"),  # combining marks are kept
        # U+FE0F is a mark, so github-slugger keeps it after dropping the emoji before it.
        ("✔️ Done", "\ufe0f-done"),
        ("[Install](#install) guide", "install-guide"),
        ("![logo](logo.png) Title", "logo-title"),
        ('<a name="x"></a>Anchored <em>title</em>', "anchored-title"),
        ("`code` and *emphasis*", "code-and-emphasis"),
    ],
)
def test_github_slug(title: str, slug: str) -> None:
    assert github_slug(title) == slug


@pytest.mark.parametrize(
    ("titles", "anchors"),
    [  # github-slugger's de-duplication fixtures, fed as headings of one document
        (["alpha", "alpha"], ["alpha", "alpha-1"]),
        (
            ["echo", "echo", "echo 1", "echo-1", "echo"],
            ["echo", "echo-1", "echo-1-1", "echo-1-2", "echo-2"],
        ),
        (["foxtrot-1", "foxtrot", "foxtrot"], ["foxtrot-1", "foxtrot", "foxtrot-2"]),
        (["golf", "golf", "golf"], ["golf", "golf-1", "golf-2"]),
        (["Intro!", "intro", "INTRO?"], ["intro", "intro-1", "intro-2"]),
        (["😄", "🙂", ""], ["", "-1", "-2"]),
    ],
)
def test_duplicate_anchors(titles: list[str], anchors: list[str]) -> None:
    text = "\n\n".join(f"## {t}\n\nText." for t in titles)
    assert [s.section_anchor for s in SectionChunker().split(text)] == anchors


# --- splitting sections that do not fit -----------------------------------------------------

SENTENCES = [f"Sentence number {i:02d} is here." for i in range(12)]  # 27 characters each
assert all(len(s) == 27 for s in SENTENCES)


def test_sections_are_never_merged() -> None:
    text = "# A\nShort.\n## B\nShort too.\n## C\n"
    assert chunk_texts(text, max_tokens=512) == ["# A\nShort.", "## B\nShort too.", "## C"]


def test_giant_single_paragraph_splits_at_sentences() -> None:
    text = "## Long\n\n" + " ".join(SENTENCES)
    # 80 characters: the heading line and two sentences, then two sentences (55 characters;
    # three would be 83) per chunk.
    assert chunk_texts(text, max_tokens=20) == [
        "## Long\n\n" + " ".join(SENTENCES[0:2]),
        *(" ".join(SENTENCES[i : i + 2]) for i in range(2, 12, 2)),
    ]


def test_sentence_ends() -> None:
    text = '## S\n\nWhy? "Because!" he said. (Really.) Then\nnothing' + " ends here"
    assert chunk_texts(text, max_tokens=4) == [
        "## S\n\nWhy?",
        '"Because!"',
        "he said.",
        "(Really.)",
        "Then\nnothing",
        "ends here",
    ]


@pytest.mark.parametrize(
    ("text", "max_tokens", "expected"),
    [
        pytest.param(
            "## Words\n\n" + " ".join(f"w{i:02d}" for i in range(20)),
            5,
            [
                "## Words\n\nw00 w01",
                "w02 w03 w04 w05 w06",
                "w07 w08 w09 w10 w11",
                "w12 w13 w14 w15 w16",
                "w17 w18 w19",
            ],
            id="over-long-sentence-cut-at-whitespace-and-fills-the-heading-chunk",
        ),
        pytest.param(
            "## Heading here\n\nA sentence that fits alone. And more.",
            8,
            ["## Heading here", "A sentence that fits alone.", "And more."],
            id="a-sentence-that-fits-alone-is-not-cut-to-fill-the-heading-chunk",
        ),
        pytest.param(
            "## X\n\n" + "x" * 50,
            5,
            ["## X", "x" * 20, "x" * 20, "x" * 10],
            id="giant-word-cut-hard",
        ),
        pytest.param(
            "#" + " long heading" * 4,
            5,
            ["# long heading long", "heading long heading", "long heading"],
            id="over-long-heading-line",
        ),
        pytest.param(
            "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |",
            5,
            ["| a | b |\n|---|---|", "| 1 | 2 |\n| 3 | 4 |"],
            id="over-long-table-cut-at-newlines",
        ),
        pytest.param(
            "aaaa bbbb cccc\ndd ee ff gg hh",
            5,
            ["aaaa bbbb cccc", "dd ee ff gg hh"],
            id="a-newline-in-the-second-half-beats-a-later-space",
        ),
        pytest.param(
            "aaaa\nbbbb cccc dddd eeee",
            5,
            ["aaaa\nbbbb cccc dddd", "eeee"],
            id="a-newline-in-the-first-half-does-not",
        ),
    ],
)
def test_over_long_units(text: str, max_tokens: int, expected: list[str]) -> None:
    assert chunk_texts(text, max_tokens) == expected


CODE = "\n".join(
    [
        "```python",
        "import os",
        "",
        "",
        "@cache",
        "def load(path):",
        "    return open(path).read()",
        "",
        "",
        "class Store:",
        "    def get(self, key):",
        "        return self.data[key]",
        "```",
    ]
)


def test_code_block_that_fits_is_kept_whole() -> None:
    text = f"## Code\n\n{' '.join(SENTENCES[:3])}\n\n{CODE}\n\n{' '.join(SENTENCES[3:6])}"
    assert len(CODE) <= 40 * CHARS_PER_TOKEN < len(text)
    assert chunk_texts(text, max_tokens=40) == [
        f"## Code\n\n{' '.join(SENTENCES[:3])}",
        CODE,
        " ".join(SENTENCES[3:6]),
    ]


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        pytest.param(
            20,
            [
                "## Code\n\n```python\nimport os",
                "@cache\ndef load(path):\n    return open(path).read()",
                "class Store:\n    def get(self, key):\n        return self.data[key]\n```",
            ],
            id="class-with-its-method",
        ),
        pytest.param(
            15,
            [
                "## Code\n\n```python\nimport os",
                "@cache\ndef load(path):\n    return open(path).read()",
                "class Store:",
                "def get(self, key):\n        return self.data[key]\n```",
            ],
            id="method-split-from-its-class",
        ),
    ],
)
def test_giant_code_block_splits_at_definitions(max_tokens: int, expected: list[str]) -> None:
    # The decorator stays with its function; every cut falls before a definition.
    assert chunk_texts(f"## Code\n\n{CODE}", max_tokens) == expected


def test_code_without_definitions_splits_at_lines() -> None:
    code = "```\n" + "\n".join(f"echo step {i}" for i in range(6)) + "\n```"
    assert chunk_texts(f"# Run\n{code}", max_tokens=8) == [
        "# Run\n```\necho step 0",
        "echo step 1\necho step 2",
        "echo step 3\necho step 4",
        "echo step 5\n```",
    ]


ITEMS = [f"- item {i} is here" for i in range(6)]  # 16 characters each


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        pytest.param(
            30,
            ["## L\n\nIntro sentence here.", "\n".join(ITEMS) + "\n\nTail."],
            id="list-that-fits-is-kept-whole",
        ),
        pytest.param(
            10,
            [
                "## L\n\nIntro sentence here.",
                "\n".join(ITEMS[0:2]),
                "\n".join(ITEMS[2:4]),
                "\n".join(ITEMS[4:6]) + "\n\nTail.",
            ],
            id="list-that-does-not-fit-splits-at-items",
        ),
    ],
)
def test_lists(max_tokens: int, expected: list[str]) -> None:
    text = "## L\n\nIntro sentence here.\n\n" + "\n".join(ITEMS) + "\n\nTail."
    assert chunk_texts(text, max_tokens) == expected


def test_list_block_boundaries() -> None:
    # A bullet interrupts a paragraph; a loose list goes on over blank lines before items and
    # indented continuations; an unindented paragraph after a blank line ends it; nested
    # items are item boundaries too; "2." does not interrupt a paragraph.
    text = (
        "## L\n\nSee:\n- a one\n\n- b two\n\n  more b\n  - nested c\n\nAfter it ends. Year\n"
        "2024. was good."
    )
    assert chunk_texts(text, max_tokens=3) == [
        "## L\n\nSee:",
        "- a one",
        "- b two",
        "more b",
        "- nested c",
        "After it",
        "ends.",
        "Year\n2024.",
        "was good.",
    ]
    assert chunk_texts(text, max_tokens=10) == [
        "## L\n\nSee:",
        "- a one\n\n- b two\n\n  more b\n  - nested c",
        "After it ends. Year\n2024. was good.",
    ]


EQ_BEFORE = "The energy is given by the formula."  # 35 characters
EQ = "$$\nE = m c^2\n$$"
EQ_AFTER = "where m is the mass."  # 20 characters


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        pytest.param(
            20,
            [
                "## E\n\nAn opening paragraph.",
                f"{EQ_BEFORE}\n\n{EQ}\n\n{EQ_AFTER}",
                "An unrelated one.",
            ],
            id="equation-kept-with-the-paragraphs-around-it",
        ),
        pytest.param(
            12,
            [
                "## E\n\nAn opening paragraph.",
                EQ_BEFORE,
                f"{EQ}\n\n{EQ_AFTER}",
                "An unrelated one.",
            ],
            id="group-that-does-not-fit-splits-into-its-parts",
        ),
    ],
)
def test_display_equations(max_tokens: int, expected: list[str]) -> None:
    text = (
        f"## E\n\nAn opening paragraph.\n\n{EQ_BEFORE}\n\n{EQ}\n\n{EQ_AFTER}\n\nAn unrelated one."
    )
    assert chunk_texts(text, max_tokens) == expected


def test_paragraph_end_before_a_whitespace_line_that_is_not_blank() -> None:
    # "\t \r\t" is whitespace but not a blank line: the paragraph ends at "bb", and the
    # character fast path (a backward search) must agree with the unit by unit path.
    text = "# H\naa bb\n\t \r\t\n\ncc"
    expected = ["# H\naa bb", "cc"]
    assert chunk_texts(text, max_tokens=3) == expected
    assert chunk_texts(text, max_tokens=3, counter=chars4_again) == expected


def test_inline_and_bracket_equations() -> None:
    text = "# M\nFirst we note. Then:\n\\[\na + b\n\\]\nso it holds. Next one.\n$$x = 1$$ and more."
    # Both equations and the prose between them are one group (75 characters), which does
    # not fit, so it is packed as prose and equations.
    assert chunk_texts(text, max_tokens=12) == [
        "# M\nFirst we note. Then:\n\\[\na + b\n\\]",
        "so it holds. Next one.\n$$x = 1$$ and more.",
    ]
    assert chunk_texts(text, max_tokens=20) == [text]


def test_repeated_text_gets_exact_offsets() -> None:
    # text.find(chunk) would map every chunk to the first copy.
    block = "## Same\n\nSame sentence. Same sentence. Same sentence.\n\n"
    text = block * 5
    spans = SectionChunker(max_tokens=8).split(text)
    check_invariants(text, spans, 8)
    n = len(block)
    assert [(s.start, s.end) for s in spans] == [
        offsets for k in range(5) for offsets in ((k * n, k * n + 23), (k * n + 24, k * n + 53))
    ]
    assert [s.section_anchor for s in spans[::2]] == [
        "same",
        "same-1",
        "same-2",
        "same-3",
        "same-4",
    ]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("# " + "<a" * 100_000 + "\nbody", id="heading-full-of-html-openers"),
        pytest.param("# " + "[x](" * 100_000 + "\nbody", id="heading-full-of-link-openers"),
        pytest.param("# H\n" + "\\[ x\n" * 200_000, id="unclosed-equations"),
        pytest.param("```\n" * 100_000, id="fence-after-fence"),
        pytest.param("```\n" + "x ```\n" * 100_000, id="fence-chars-ending-every-line"),
        pytest.param("~~~\n" + "~~~x " * 100_000, id="fence-chars-in-one-long-line"),
        pytest.param("# H\n" + "- item\n" * 100_000, id="one-long-list"),
    ],
)
def test_adversarial_input_stays_linear(text: str) -> None:
    # Each takes well under a second; a quadratic scan of it takes minutes.
    started = time.perf_counter()
    spans = SectionChunker(max_tokens=16).split(text)
    assert time.perf_counter() - started < 5
    check_invariants(text, spans, 16)


# --- token counters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counter", "max_tokens", "expected"),
    [
        # The 5-word sentence does not fit: it is cut at whitespace and its first piece fills
        # the heading's chunk.
        pytest.param(
            words,
            4,
            ["## Two words\n\none", "two three four five.", "six seven eight."],
            id="words",
        ),
        pytest.param(  # 17, 20 and 16 bytes: 7, 8 and 7 tokens
            utf8_thirds,
            8,
            ["## Two words\n\none", "two three four five.", "six seven eight."],
            id="utf8-thirds-with-overhead",
        ),
        # A sentence that fits alone is not cut to fill the heading's chunk.
        pytest.param(
            words,
            5,
            ["## Two words", "one two three four five.", "six seven eight."],
            id="words-5-heading-alone",
        ),
    ],
)
def test_other_token_counters(counter: Counter, max_tokens: int, expected: list[str]) -> None:
    text = "## Two words\n\none two three four five. six seven eight."
    assert chunk_texts(text, max_tokens, counter) == expected


def q_heavy(text: str) -> int:
    """Not monotone: a text ending in "q" costs 50 more than the text one longer."""
    return len(text) + (50 if text.endswith("q") else 0)


@pytest.mark.parametrize(
    ("text", "max_tokens", "expected"),
    [
        # The whitespace cut "abq" does not fit, so the piece is cut hard instead.
        pytest.param("abq cdefghijk", 10, ["abq cdefgh", "ijk"], id="whitespace-cut-rejected"),
        # So are the hard cuts that trim back to "aq bq".
        pytest.param("aq bq  ccccccc", 7, ["aq b", "q  cccc", "ccc"], id="hard-cuts-rejected"),
    ],
)
def test_counter_that_is_not_monotone(text: str, max_tokens: int, expected: list[str]) -> None:
    assert chunk_texts(text, max_tokens, q_heavy) == expected


def test_counter_that_cannot_hold_a_character_raises() -> None:
    chunker = SectionChunker(max_tokens=2, token_counter=utf8_thirds)
    assert chunker.split("ab") == [Span(0, 2, (), None, 0)]  # 2 bytes: 0 + 2 tokens
    with pytest.raises(ValueError, match="no chunk can hold it"):
        chunker.split("日本")  # 3 bytes a character: 1 + 2 tokens
    # Only texts ending in a space fit, so no trimmed chunk ever does.
    spaces_only = SectionChunker(max_tokens=5, token_counter=lambda t: 0 if t[-1] == " " else 9)
    with pytest.raises(ValueError, match="no chunk can hold it"):
        spaces_only.split("abcd efgh")


# --- parameters and registry ----------------------------------------------------------------


def test_invalid_counter_raises() -> None:
    with pytest.raises(ValueError):
        SectionChunker(token_counter="chars4")  # type: ignore[arg-type]


# --- properties on generated Markdown -------------------------------------------------------

_TITLE_WORDS = st.sampled_from(
    ["Install", "install", "Guide", "API", "über", "日本", "2.0", "a-b", "x_y", "(note)", "🙂",
     "#", "##", "Step 1:", "FAQ?", ""]
)  # fmt: skip
_TITLES = st.lists(_TITLE_WORDS, max_size=3).map(" ".join)
_WORDS = st.sampled_from(
    ["word", "Text", "é", "日本語", "x" * 25, "a.", "b?", "c!", "e.g.", "(x).", "$5", "#tag",
     "`code`", "1.", "-", "*"]
)  # fmt: skip
_LINE_TEXT = st.lists(_WORDS, min_size=1, max_size=8).map(" ".join)


@st.composite
def _heading(draw: st.DrawFn) -> str:
    level = draw(st.integers(1, 7))
    indent = " " * draw(st.sampled_from([0, 0, 0, 1, 3, 4]))
    closing = draw(st.sampled_from(["", "", " #", " ###", "#"]))
    sep = draw(st.sampled_from([" ", " ", "\t", "  "]))
    return f"{indent}{'#' * level}{sep}{draw(_TITLES)}{closing}"


@st.composite
def _fence(draw: st.DrawFn) -> str:
    char = draw(st.sampled_from(["`", "~"]))
    length = draw(st.integers(3, 5))
    inner = draw(
        st.lists(
            st.one_of(
                _LINE_TEXT,
                _heading(),
                st.sampled_from(["def f(x):", "    return x", "", "```", "~~~", "x ```"]),
            ),
            max_size=6,
        )
    )
    close_length = draw(st.sampled_from([length, length, length + 1, length - 1]))
    close_indent = draw(st.sampled_from(["", "", " ", "   ", "    ", "\t", " \t"]))
    closing = close_indent + draw(
        st.sampled_from([char * close_length, char * close_length + "  ", char * 3 + "x", ""])
    )
    info = draw(st.sampled_from(["", "python", "a`b"]))
    return "\n".join([char * length + info, *inner, closing])


_BLOCK = st.one_of(
    _heading(),
    _heading(),
    _LINE_TEXT,
    st.lists(_LINE_TEXT, min_size=1, max_size=5).map("\n".join),  # a paragraph
    _fence(),
    st.lists(
        st.tuples(st.sampled_from(["- ", "* ", "1. ", "2) ", "  - "]), _LINE_TEXT),
        min_size=1,
        max_size=5,
    ).map(lambda items: "\n".join(m + t for m, t in items)),
    st.tuples(_LINE_TEXT, _LINE_TEXT).map(lambda t: f"$$\n{t[0]}\n$$\n{t[1]}"),
    _LINE_TEXT.map(lambda t: f"\\[ {t} \\]"),
    _LINE_TEXT.map(lambda t: f"{t}\n===="),
    st.sampled_from(["", " ", "\t", "---", " " * 40, "\t \r" * 12]),
)


@st.composite
def markdown(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(_BLOCK, max_size=14))
    seps = draw(
        st.lists(
            st.sampled_from(["\n", "\n\n", "\n \n"]), min_size=len(blocks), max_size=len(blocks)
        )
    )
    text = "".join(b + s for b, s in zip(blocks, seps, strict=True))
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 4)) == 0:
        text = "---\ntitle: x\n# yaml comment\n---\n" + text
    return text * draw(st.sampled_from([1, 1, 1, 2]))  # repeated text


MARKDOWN = st.one_of(markdown(), st.text(max_size=120))
SETTINGS = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(text=MARKDOWN, max_tokens=st.integers(1, 60))
def test_invariants_hold_for_generated_markdown(text: str, max_tokens: int) -> None:
    chunker = SectionChunker(max_tokens=max_tokens)
    spans = chunker.split(text)
    check_invariants(text, spans, max_tokens)
    # Deterministic: same instance, a fresh instance, and a pickled copy (as Beam ships it).
    assert chunker.split(text) == spans
    assert SectionChunker(max_tokens=max_tokens).split(text) == spans
    assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


@SETTINGS
@given(
    text=MARKDOWN,
    counter_and_limit=st.one_of(
        st.tuples(st.just(words), st.integers(1, 20)),
        st.tuples(st.just(utf8_thirds), st.integers(3, 40)),
    ),
)
def test_invariants_hold_with_other_token_counters(
    text: str, counter_and_limit: tuple[Counter, int]
) -> None:
    counter, max_tokens = counter_and_limit
    chunker = SectionChunker(max_tokens=max_tokens, token_counter=counter)
    spans = chunker.split(text)
    check_invariants(text, spans, max_tokens, counter)
    assert chunker.split(text) == spans


@SETTINGS
@given(text=MARKDOWN, max_tokens=st.integers(1, 60))
def test_character_fast_path_matches_the_general_path(text: str, max_tokens: int) -> None:
    fast = SectionChunker(max_tokens=max_tokens).split(text)
    assert SectionChunker(max_tokens=max_tokens, token_counter=chars4_again).split(text) == fast


# Sentence marks, closing characters and whitespace of every kind the regexes tell apart.
_UNIT_TEXT = st.lists(
    st.sampled_from(
        [".", "?", "!", '"', ")", "\u201d", "a", "b c", " ", "\t", "\n", "\r", "\xa0", "\n\n",
         " \n\t\n", "\r\n\r\n", "\n\r \n"]
    ),
    max_size=30,
).map("".join)  # fmt: skip


@SETTINGS
@given(
    before=_UNIT_TEXT, first=st.sampled_from(["a", ".", "?", ")"]), after=_UNIT_TEXT, data=st.data()
)
def test_unit_end_searches_match_their_regexes(
    before: str, first: str, after: str, data: st.DataObject
) -> None:
    # The packer finds unit ends with these searches rather than the slow regexes that
    # define them: they must agree for every unit start and end of range.
    text = before + first + after
    a = len(before)  # a unit starts at a non-whitespace character
    end = data.draw(st.integers(a + 1, len(text)))
    last = LAST_UNIT_END.match(text, a, end)
    assert last_unit_end(text, a, end) == (-1 if last is None else last.end())
    brk = UNIT_BREAK.search(text, a, end)
    assert first_unit_end(text, a, end) == (end if brk is None else unit_end(text, a, brk))


def test_reference_parser_agrees_on_a_known_document() -> None:
    # The oracle itself must be right for the properties above to mean anything.
    text = "pre\n# A\n```\n# no\n```\n  ## B ##\n##### C\n    # no\n~~~\n"
    doc = reference_parse(text)
    assert [(h.level, h.title) for h in doc.headings] == [(1, "A"), (2, "B"), (5, "C")]
    assert [text[a:b] for a, b in doc.fences] == ["```\n# no\n```", "~~~\n"]
    assert [(p, a) for _, p, a in reference_sections(text, doc)] == [
        ((), None),
        (("A",), "a"),
        (("A", "B"), "b"),
    ]


# --- the real corpus ------------------------------------------------------------------------


def _corpus() -> dict[str, str]:
    corpus = {}
    for path in sorted(SAMPLE_CORPUS.rglob("*.md")):
        # Raw bytes: read_text() would translate "\r\n".
        corpus[path.relative_to(SAMPLE_CORPUS).as_posix()] = path.read_bytes().decode("utf-8")
    return corpus


CORPUS = _corpus()


def test_corpus_is_present() -> None:
    assert len(CORPUS) >= 10


@pytest.mark.parametrize(
    ("max_tokens", "counter"),
    [(512, chars4), (64, chars4), (16, chars4), (40, words), (48, utf8_thirds)],
    ids=["defaults", "max64", "max16", "words40", "utf8-thirds48"],
)
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_invariants(name: str, max_tokens: int, counter: Counter) -> None:
    text = CORPUS[name]
    chunker = SectionChunker(max_tokens=max_tokens, token_counter=counter)
    spans = chunker.split(text)
    check_invariants(text, spans, max_tokens, counter)
    if counter is chars4:
        assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


def test_corpus_sections_follow_headings() -> None:
    text = CORPUS["runbooks/oncall-ingest.md"]
    spans = SectionChunker().split(text)
    paths = {s.section_path for s in spans}
    assert ("On-call runbook: ingest pipeline", "Alerts", "IngestLagHigh") in paths
    # The "# ..." comments in its bash block are not headings.
    assert not any(p and p[-1].startswith("Which version") for p in paths if p)
    anchors = [s.section_anchor for s in spans]
    assert "ingestlaghigh" in anchors and "useful-commands" in anchors
    assert re.fullmatch(r"[a-z0-9_-]+", "".join(a for a in anchors if a))


def test_none_and_bools_are_not_sizes_and_repr_names_the_parameters() -> None:
    for bad in (None, True):
        with pytest.raises(ValueError):
            SectionChunker(max_tokens=bad)  # type: ignore[arg-type]
    assert repr(SectionChunker()) == "SectionChunker(max_tokens=512)"
