"""Paragraphs as offsets: the paragraph spans of a text, the last paragraph break before a
limit, and the cutting of an over-long paragraph into pieces at line or word boundaries.
Shared by the paragraph, paragraph-window and fitted strategies."""

from __future__ import annotations

import re
from collections.abc import Iterator

from chunkmill.chunking.base import rstrip_end

# A paragraph separator: a "\n" followed by at least one blank line (one holding only
# whitespace other than "\n") ending in "\n", so "\n\n", "\r\n\r\n" and "\n  \n" all
# separate. It then swallows all whitespace up to the next paragraph, so paragraphs after
# the first start right at its end. [^\S\n] cannot match "\n" and the tail is a plain
# character-class run, so matching is linear with no backtracking.
SEPARATOR = re.compile(r"\n[^\S\n]*\n\s*")
NONSPACE = re.compile(r"\S")
SPACE = re.compile(r"\s")
# Matched from a known whitespace position to endpos: ".*" jumps to endpos and backtracks
# only to the last whitespace character, so the usual cost is a word's length. Backtracking
# is slow per character, hence the forward SPACE scan first rules out a window of one word.
LAST_SPACE = re.compile(r".*\s", re.DOTALL)
# Matched from one character before the overlap window so that a word starting exactly at
# the window's first position is found without relying on lookbehind across ``pos``.
SPACE_THEN_WORD = re.compile(r"\s\S")
SPACE_RUN = re.compile(r"\s+")
# Matched from a paragraph start to endpos, it ends just after the last "\n" that a blank
# line and another "\n" follow (the last but one "\n" of the last separator), and group 1
# is the first character after that separator. ".*" jumps to endpos and backtracks, and as
# what follows it is a literal, the engine skips to each "\n" in a tight loop: about a
# nanosecond a character, where backtracking onto "\s" (LAST_SPACE), or onto a group
# placed before the "\n", takes 8 to 12.
LAST_BREAK = re.compile(r".*\n(?=[^\S\n]*\n\s*(\S))", re.DOTALL)


def paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """Trimmed, non-empty paragraph spans in document order."""
    first = NONSPACE.search(text)
    if first is None:
        return
    start = first.start()
    for sep in SEPARATOR.finditer(text, start):
        yield start, rstrip_end(text, start, sep.start())
        start = sep.end()
    if start < len(text):  # else the last separator swallowed trailing whitespace
        yield start, rstrip_end(text, start, len(text))


def last_break(text: str, lo: int, limit: int) -> tuple[int, int] | None:
    """``(end, next)``: the end of the last paragraph that starts at or after ``lo`` and ends
    at or before ``limit``, and the start of the paragraph after it; None if no paragraph
    does. A paragraph starts at ``lo`` and one ends after ``limit``."""
    # A separator is the part of a whitespace run from its first "\n" on, when the run holds
    # two; the paragraph before it ends where the run starts. So if limit falls in such a
    # run, the run counts, however far past limit its "\n" lie: search up to its end.
    hi = limit
    if text[limit].isspace():
        run_end = NONSPACE.search(text, limit)
        assert run_end is not None
        hi = run_end.start()
    # Up to and including text[hi], which is not whitespace: the next paragraph's start.
    found = LAST_BREAK.match(text, lo, hi + 1)
    if found is None:
        return None
    newline = found.end() - 1  # in the last run with two "\n", the last "\n" but one
    end = newline if not text[newline - 1].isspace() else rstrip_end(text, lo, newline)
    return end, found.start(1)


def pieces(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """Cut the trimmed paragraph [start, end) into trimmed pieces of <= max_chars."""
    while end - start > max_chars:
        limit = start + max_chars  # a cut at limit leaves a piece of exactly max_chars
        # Searching from start + 1 keeps every piece non-empty: text[start] is not whitespace.
        cut = text.rfind("\n", start + 1, limit + 1)
        if cut < 0:
            space = SPACE.search(text, start + 1, limit + 1)
            if space is None:
                # One run of max_chars + 1 non-whitespace characters: no better place to cut.
                yield start, limit
                start = limit
                continue
            last_space = LAST_SPACE.match(text, space.start(), limit + 1)
            assert last_space is not None  # it matches at least the space just found
            cut = last_space.end() - 1
        yield start, rstrip_end(text, start, cut)
        after = NONSPACE.search(text, cut, end)
        assert after is not None  # text[end - 1] is not whitespace and cut < end
        start = after.start()
    yield start, end
