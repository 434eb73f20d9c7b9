"""Sentence-aware chunking with overlap (docs/chunking.md, `sentence`), as exact offsets."""

from __future__ import annotations

import re

from chunkmill.chunking.base import (
    Span,
    TokenCounter,
    chars4,
    check_int,
    check_less,
    rstrip_end,
)
from chunkmill.chunking.overlap import overlap_start

_NONSPACE = re.compile(r"\S")
_SPACE = re.compile(r"\s")
# A sentence end: ".", "?" or "!" followed by whitespace. The lookahead keeps the whitespace
# out of the match, so m.end() is the end of the sentence.
_BOUNDARY = re.compile(r"[.?!](?=\s)")
# Anchored at a position and bounded by endpos, ".*" runs to endpos in C and backtracks only
# to the last sentence end before it: the usual cost is the tail of one sentence, and at
# worst the window, which is one chunk long. m.end() - 1 is the end of that sentence.
_LAST_BOUNDARY = re.compile(r".*[.?!]\s", re.DOTALL)
# A sentence end and the whitespace after it; m.end() is where the next sentence starts.
_SENTENCE_START = re.compile(r"[.?!]\s+(?=\S)")
# Matched from a known whitespace position to endpos, like _LAST_BOUNDARY.
_LAST_SPACE = re.compile(r".*\s", re.DOTALL)
_TERMINATORS = frozenset(".?!")


class SentenceChunker:
    """Packs whole sentences into chunks of at most ``chunk_size`` characters, each
    chunk carrying about ``chunk_overlap`` characters from the end of the previous one.

    Definitions. A *sentence end* is a ``"."``, ``"?"`` or ``"!"`` followed by a whitespace
    character (``str.isspace``: the rule names ``". "`` and ``".\\n"``; tabs, ``"\\r"`` as in
    ``".\\r\\n"`` and Unicode spaces count as well); the sentence includes the mark, not the
    whitespace. *Sentences* are the text between sentence ends, trimmed of whitespace;
    whitespace-only ones are dropped. Nothing else ends a sentence: a heading or a list item
    without a final mark runs on into the next line. A *sentence start* is the first
    character of a sentence other than the document's first, i.e. a non-whitespace character
    whose preceding whitespace run follows a sentence-ending mark. A *word start* is a
    non-whitespace character preceded by whitespace. Characters are Unicode code points.

    Algorithm.

    1. A sentence longer than ``chunk_size`` is cut into *pieces* of at most ``chunk_size``:
       at the last whitespace character that keeps the piece within budget, else hard at
       ``chunk_size`` characters (which may split a word). Pieces are trimmed of whitespace
       at the cut. Sentences and pieces are *units*.
    2. A chunk is the contiguous slice from its start to the end of its last unit, so the
       whitespace between its sentences is included verbatim. Units are added while the
       slice stays within ``chunk_size``; the unit that would overflow starts the next chunk.
    3. The next chunk first carries an overlap from the end of the previous chunk. The
       overlap window is the last ``chunk_overlap`` characters of the previous chunk, made
       shorter if needed so that the new chunk, from the overlap through its first unit,
       fits in ``chunk_size``. The overlap starts at the first sentence start inside the
       window, so it is made of whole sentences when one fits; else at the first word start
       inside the window, so it never starts mid-word or on whitespace. If the window is
       empty (``chunk_overlap=0``, or no room) or holds no word start, there is no overlap.

    Guarantees, for any ``text`` (besides those of :mod:`chunkmill.chunking.base`):

    * every chunk has ``1 <= len <= chunk_size`` characters and both its first and last
      characters are non-whitespace;
    * starts and ends are both strictly increasing, so no chunk contains another;
    * consecutive chunks overlap by at most ``chunk_overlap`` characters, and with
      ``chunk_overlap=0`` they are disjoint;
    * a sentence of at most ``chunk_size`` characters is never cut: it lies whole inside a
      chunk, and a chunk starts inside it only when carrying an overlap;
    * every chunk ends at a unit end and starts at a unit start or, when it carries an
      overlap, at a sentence start or word start inside the previous chunk;
    * empty or whitespace-only ``text`` gives ``[]``;
    * time and extra memory are linear in ``len(text)``; no chunk text is copied.

    Sizes are in characters, as the rule specifies; ``token_counter`` is accepted for the
    common constructor signature and not used.
    """

    name = "sentence"

    def __init__(
        self,
        *,
        chunk_size: int = 1000,
        chunk_overlap: int = 200,
        token_counter: TokenCounter = chars4,
    ) -> None:
        _check_sizes(chunk_size, chunk_overlap)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.token_counter = token_counter

    def __repr__(self) -> str:
        return f"SentenceChunker(chunk_size={self.chunk_size}, chunk_overlap={self.chunk_overlap})"

    def params(self) -> dict[str, int]:
        return {"chunk_size": self.chunk_size, "chunk_overlap": self.chunk_overlap}

    def split(self, text: str) -> list[Span]:
        first = _NONSPACE.search(text)
        if first is None:
            return []
        chunk_size = self.chunk_size
        text_end = rstrip_end(text, first.start(), len(text))
        spans: list[Span] = []
        # The open chunk is [start, stop). Rather than visiting sentences one by one, each
        # round extends the chunk to the last sentence end within budget in one regex call,
        # then finds the unit that overflows; Python work is per chunk, not per sentence.
        start = first.start()
        stop = self._unit_end(text, start, text_end)
        while True:
            limit = start + chunk_size
            if text_end <= limit:  # the rest is whole units (or a sentence's last piece)
                stop = text_end
                break
            # The sentences that end by limit lie inside the window, so each fits whole.
            last = _LAST_BOUNDARY.match(text, stop, limit + 1)
            if last is not None:
                stop = last.end() - 1
            # stop < text_end here, so a non-whitespace character follows.
            unit_start = _NONSPACE.search(text, stop).start()  # type: ignore[union-attr]
            unit_end = self._unit_end(text, unit_start, text_end)
            if unit_end <= limit:
                # Only the first piece of an over-long sentence can still fit. Its sentence
                # ends past limit and the next piece ends past limit too (it ends on
                # whitespace after the last one within budget, or is cut hard), so the next
                # round finds nothing to add and closes the chunk.
                stop = unit_end
                continue
            spans.append(Span(start, stop))
            start = self._overlap_start(text, start, stop, unit_start, unit_end)
            stop = unit_end
        spans.append(Span(start, stop))
        return spans

    def _unit_end(self, text: str, start: int, text_end: int) -> int:
        """The end of the unit starting at ``start`` (a non-whitespace character)."""
        limit = start + self.chunk_size
        # endpos limit + 1 lets the mark sit at limit - 1 with its whitespace at limit.
        boundary = _BOUNDARY.search(text, start, limit + 1)
        if boundary is not None:
            return boundary.end()
        if text_end <= limit:
            return text_end
        # An over-long sentence: its first piece ends at the last whitespace within budget.
        # Searching from start + 1 keeps the piece non-empty; the forward search first rules
        # out a budget-long word cheaply before _LAST_SPACE backtracks.
        space = _SPACE.search(text, start + 1, limit + 1)
        if space is None:
            return limit
        last_space = _LAST_SPACE.match(text, space.start(), limit + 1)
        assert last_space is not None  # it matches at least the space just found
        return rstrip_end(text, start, last_space.end() - 1)

    def _overlap_start(
        self, text: str, prev_start: int, prev_end: int, unit_start: int, unit_end: int
    ) -> int:
        """Where the chunk whose first new unit is [unit_start, unit_end) starts: the first
        sentence start of the overlap window, else its first word start."""
        word_start = overlap_start(
            text, prev_end, unit_start, unit_end, overlap=self.chunk_overlap, size=self.chunk_size
        )
        if word_start == unit_start:  # nothing carried over
            return unit_start
        # Every sentence start is a word start, so the first one in the window is either
        # word_start itself or found by searching from there. Whether word_start is one
        # depends on the character before its whitespace run, which may begin before the window.
        before = rstrip_end(text, prev_start, word_start)
        if text[before - 1] in _TERMINATORS:
            return word_start
        sentence = _SENTENCE_START.search(text, word_start, prev_end)
        return word_start if sentence is None else sentence.end()


def _check_sizes(chunk_size: object, chunk_overlap: object) -> None:
    """Raise ``ParameterError`` unless ``0 <= chunk_overlap < chunk_size`` are ints."""
    check_int("chunk_size", chunk_size, 1)
    check_int("chunk_overlap", chunk_overlap, 0)
    assert isinstance(chunk_size, int) and isinstance(chunk_overlap, int)
    check_less("chunk_overlap", chunk_overlap, "chunk_size", chunk_size)
