"""ADR-0006 paragraph-boundary chunking, computed as exact offsets into the document."""

from __future__ import annotations

import re
from collections.abc import Iterator

from transforms.chunking.base import CHARS_PER_TOKEN, Span, register

# A paragraph separator: a "\n" followed by at least one blank line (one holding only
# whitespace other than "\n") ending in "\n", so "\n\n", "\r\n\r\n" and "\n  \n" all
# separate. It then swallows all whitespace up to the next paragraph, so paragraphs after
# the first start right at its end. [^\S\n] cannot match "\n" and the tail is a plain
# character-class run, so matching is linear with no backtracking.
_SEPARATOR = re.compile(r"\n[^\S\n]*\n\s*")
_NONSPACE = re.compile(r"\S")
_SPACE = re.compile(r"\s")
# Matched from a known whitespace position to endpos: ".*" jumps to endpos and backtracks
# only to the last whitespace character, so the usual cost is a word's length. Backtracking
# is slow per character, hence the forward _SPACE scan first rules out a window of one word.
_LAST_SPACE = re.compile(r".*\s", re.DOTALL)
# Matched from one character before the overlap window so that a word starting exactly at
# the window's first position is found without relying on lookbehind across ``pos``.
_SPACE_THEN_WORD = re.compile(r"\s\S")


@register("paragraph")
class ParagraphChunker:
    """ADR-0006: pack whole paragraphs into chunks of at most ``max_tokens * 4`` characters.

    Definitions. A *separator* is a ``"\\n"`` followed by one or more blank lines, each
    terminated by ``"\\n"``; a blank line contains only whitespace other than ``"\\n"``
    (spaces, tabs, ``"\\r"``, Unicode spaces), so ``"\\n\\n"``, ``"\\r\\n\\r\\n"`` and
    ``"\\n  \\n"`` are all separators. No other character (a lone ``"\\r"``, ``"\\f"``,
    ``"\\u2029"``) separates paragraphs. A *paragraph* is the text between separators, trimmed
    of leading and trailing whitespace (``str.isspace``); whitespace-only paragraphs are
    dropped. Characters are Unicode code points; budgets are ``max_chars = max_tokens * 4``
    and ``overlap_chars = overlap_tokens * 4`` (ADR-0006 estimates a token as 4 characters).

    Algorithm.

    1. A paragraph longer than ``max_chars`` is cut into *pieces* of at most ``max_chars``:
       at the last ``"\\n"`` that keeps the piece within budget, else at the last whitespace
       character, else hard at ``max_chars`` (which may split a word or a grapheme cluster).
       Pieces are trimmed of whitespace at the cut. Paragraphs and pieces are *units*.
    2. A chunk is the contiguous slice from its start to the end of its last unit, so the
       separators between its paragraphs are included verbatim. Units are added while the
       slice stays within ``max_chars``; the unit that would overflow starts the next chunk.
    3. The next chunk first carries an overlap from the end of the previous chunk. The
       overlap window is the last ``overlap_chars`` characters of the previous chunk, made
       shorter if needed so that the new chunk, from the overlap through the new unit,
       fits in ``max_chars``. The
       overlap starts at the first word start (a non-whitespace character preceded by
       whitespace) inside the window, so it never starts mid-word or on whitespace. If the
       window is empty (``overlap_tokens=0``, or no room) or holds no word start (it lies
       inside one word), there is no overlap: the chunk starts at its first unit.

    Guarantees, for any ``text`` (besides those of :mod:`transforms.chunking.base`):

    * every chunk ``text[s.start:s.end]`` has ``1 <= len <= max_chars`` characters and both
      its first and last characters are non-whitespace;
    * starts and ends are both strictly increasing, so no chunk contains another;
    * consecutive chunks overlap by at most ``overlap_chars`` characters, and a chunk never
      starts before the previous chunk's start; with ``overlap_tokens=0`` chunks are
      disjoint;
    * every chunk ends at a unit end and starts at a unit start or, when it carries an
      overlap, at a word start inside the previous chunk;
    * empty or whitespace-only ``text`` gives ``[]``;
    * time and extra memory are linear in ``len(text)``; no chunk text is copied.
    """

    name = "paragraph"

    def __init__(self, *, max_tokens: int = 700, overlap_tokens: int = 80) -> None:
        for key, value in (("max_tokens", max_tokens), ("overlap_tokens", overlap_tokens)):
            # bool is an int subclass; a True from a sloppy config must not mean 1.
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{key} must be an int, got {value!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if overlap_tokens < 0:
            raise ValueError(f"overlap_tokens must be >= 0, got {overlap_tokens}")
        if overlap_tokens >= max_tokens:
            raise ValueError(
                f"overlap_tokens ({overlap_tokens}) must be < max_tokens ({max_tokens})"
            )
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.max_chars = max_tokens * CHARS_PER_TOKEN
        self.overlap_chars = overlap_tokens * CHARS_PER_TOKEN

    def __repr__(self) -> str:
        return (
            f"ParagraphChunker(max_tokens={self.max_tokens}, overlap_tokens={self.overlap_tokens})"
        )

    def params(self) -> dict[str, int]:
        return {"max_tokens": self.max_tokens, "overlap_tokens": self.overlap_tokens}

    def split(self, text: str) -> list[Span]:
        max_chars = self.max_chars
        spans: list[Span] = []
        start = end = -1  # the open chunk; -1 until the first unit arrives
        for unit_start, unit_end in self._units(text):
            if start < 0:
                start, end = unit_start, unit_end
            elif unit_end - start <= max_chars:
                end = unit_end
            else:
                spans.append(Span(start, end))
                start = self._overlap_start(text, start, end, unit_start, unit_end)
                end = unit_end
        if start >= 0:
            spans.append(Span(start, end))
        return spans

    def _units(self, text: str) -> Iterator[tuple[int, int]]:
        """Paragraphs and pieces of over-long paragraphs, trimmed, in document order."""
        max_chars = self.max_chars
        for start, end in _paragraphs(text):
            if end - start <= max_chars:
                yield start, end
            else:
                yield from _pieces(text, start, end, max_chars)

    def _overlap_start(
        self, text: str, prev_start: int, prev_end: int, unit_start: int, unit_end: int
    ) -> int:
        """Where the chunk that opens with unit [unit_start, unit_end) starts."""
        # Bounded by the overlap budget and by the room the new unit leaves. The caller only
        # gets here when unit_end - prev_start > max_chars, so low > prev_start: the overlap
        # never reaches before the previous chunk and the new chunk starts strictly later.
        low = max(prev_end - self.overlap_chars, unit_end - self.max_chars)
        if low >= prev_end:
            return unit_start
        word = _SPACE_THEN_WORD.search(text, low - 1, prev_end)
        # Without a word start the window is the tail of one word. That is common: a piece
        # of a long paragraph nearly fills max_chars, shrinking the window to a few
        # characters, and a fragment such as "ation." adds noise, not context.
        return unit_start if word is None else word.end() - 1


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """Trimmed, non-empty paragraph spans in document order."""
    first = _NONSPACE.search(text)
    if first is None:
        return
    start = first.start()
    for sep in _SEPARATOR.finditer(text, start):
        yield start, _rstrip_end(text, start, sep.start())
        start = sep.end()
    if start < len(text):  # else the last separator swallowed trailing whitespace
        yield start, _rstrip_end(text, start, len(text))


def _rstrip_end(text: str, lo: int, hi: int) -> int:
    """The end of [lo, hi) once trailing whitespace is dropped; text[lo] is not whitespace."""
    # Trailing runs are usually empty or one "\r" or space: check those directly. If
    # text[hi - 1] is whitespace then hi - 1 > lo, as text[lo] is not.
    if not text[hi - 1].isspace():
        return hi
    if not text[hi - 2].isspace():
        return hi - 1
    # A longer run: doubling windows keep even a megabyte of spaces linear without copying
    # the whole paragraph.
    width = 16
    while True:
        window_start = max(lo, hi - width)
        kept = len(text[window_start:hi].rstrip())
        if kept or window_start == lo:
            return window_start + kept
        hi = window_start
        width *= 2


def _pieces(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """Cut the trimmed paragraph [start, end) into trimmed pieces of <= max_chars."""
    while end - start > max_chars:
        limit = start + max_chars  # a cut at limit leaves a piece of exactly max_chars
        # Searching from start + 1 keeps every piece non-empty: text[start] is not whitespace.
        cut = text.rfind("\n", start + 1, limit + 1)
        if cut < 0:
            space = _SPACE.search(text, start + 1, limit + 1)
            if space is None:
                # One run of max_chars + 1 non-whitespace characters: no better place to cut.
                yield start, limit
                start = limit
                continue
            last_space = _LAST_SPACE.match(text, space.start(), limit + 1)
            assert last_space is not None  # it matches at least the space just found
            cut = last_space.end() - 1
        yield start, _rstrip_end(text, start, cut)
        after = _NONSPACE.search(text, cut, end)
        assert after is not None  # text[end - 1] is not whitespace and cut < end
        start = after.start()
    yield start, end
