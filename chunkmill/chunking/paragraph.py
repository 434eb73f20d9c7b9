"""Paragraph-boundary chunking (docs/chunking.md, `paragraph`), as exact offsets into the text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from chunkmill.chunking.base import (
    CHARS_PER_TOKEN,
    ParameterError,
    Span,
    TokenCounter,
    chars4,
    check_int,
    check_less,
    rstrip_end,
)
from chunkmill.chunking.overlap import overlap_start
from chunkmill.chunking.paragraphs import (
    NONSPACE,
    SEPARATOR,
    last_break,
    paragraphs,
    pieces,
)
from chunkmill.chunking.token_split import TokenSplit


class ParagraphChunker:
    """Packs whole paragraphs into chunks of at most ``max_tokens * 4`` characters.

    Definitions. A *separator* is a ``"\\n"`` followed by one or more blank lines, each
    terminated by ``"\\n"``; a blank line contains only whitespace other than ``"\\n"``
    (spaces, tabs, ``"\\r"``, Unicode spaces), so ``"\\n\\n"``, ``"\\r\\n\\r\\n"`` and
    ``"\\n  \\n"`` are all separators. No other character (a lone ``"\\r"``, ``"\\f"``,
    ``"\\u2029"``) separates paragraphs. A *paragraph* is the text between separators, trimmed
    of leading and trailing whitespace (``str.isspace``); whitespace-only paragraphs are
    dropped. Characters are Unicode code points; budgets are ``max_chars = max_tokens * 4``
    and ``overlap_chars = overlap_tokens * 4`` (a token is estimated as 4 characters).

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

    Guarantees, for any ``text`` (besides those of :mod:`chunkmill.chunking.base`):

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

    Exact token counts. With a ``token_counter`` other than ``chars4`` (``c``, say; see
    :mod:`chunkmill.chunking.tokens`), the same algorithm runs with budgets measured by
    ``c``, exactly, instead of in characters. ``base = c("")`` is what any text costs (2
    for BERT's ``[CLS]`` and ``[SEP]``, 0 for ``whitespace``) and a text's *content* is
    ``c(text) - base``. The limit is ``c(chunk) <= max_tokens``, special tokens included;
    the overlap's budget is ``overlap_tokens`` of content.

    1. A paragraph that fits is a unit. One that does not is cut into pieces as above: each
       ends at the last line end that keeps it within budget, else at the last whitespace
       of its first line that does, else hard, at the longest prefix of its first word that
       does. Each piece is counted exactly. "Last" comes from a search over the candidate
       cuts (``TokenSplit.largest_fit``); it is the last that fits when counts grow with
       the text, as they do for real tokenizers (nearly: WordPiece counts a word of over
       100 characters as one ``[UNK]``).
    2. Units are added while the chunk's count, *estimated* as its count so far plus the
       content of the whitespace gap and of the unit (each counted alone), fits. The chunk
       is then counted exactly; should it not fit (a tokenizer merged text across a gap),
       it keeps the longest run of its units that does. The estimate is exact for counters
       that split text at whitespace (``whitespace``, BERT's WordPiece), so with them the
       packing is exactly as greedy as with characters.
    3. The overlap starts at the earliest word start ``w`` after the previous chunk's start
       such that ``text[w:prev_end]`` has a content of at most ``overlap_tokens`` and of at
       most the room that the gap and the first unit leave (by the estimate): the overlap
       grows from the previous chunk's end word by word while it fits. Its content is
       counted exactly. If not even the last word fits, there is no overlap; if the chunk
       with its overlap turns out not to fit, the overlap is dropped.

    With ``c = len`` and both budgets four times larger this gives exactly the chunks of
    the character version, except next to a line end with whitespace before its ``"\\n"``:
    the character version cuts at the ``"\\n"``, so it counts that whitespace; exact counts
    measure the trimmed piece.

    Guarantees with exact counts: those above, with ``c(chunk) <= max_tokens`` in place of
    the length bound and an overlap content of at most ``overlap_tokens``; but a chunk is
    never empty, so the limit holds whenever every single character fits on its own. A
    character that does not becomes a chunk by itself (all-MiniLM-L6-v2 counts any single
    character as at most 5 tokens, [CLS] and [SEP] included, so with it any
    ``max_tokens >= 5`` is safe). Counting is near-linear: each paragraph is counted once;
    each chunk once more if it holds more than one unit or an overlap; each cut (a piece's
    end, an overlap's start) takes one to three counts of at most about twice the piece,
    plus a count of one word. About 2.5 to 4 times the text is counted in all.

    Sentence overlap (``overlap_sentences`` N > 0; ``overlap_tokens`` must then be 0). Cuts
    inside a line, where a paragraph's lines leave no other place, fall at sentence ends,
    and the chunk after such a cut repeats the sentences before it, so that a passage the
    cut would split lies whole in one of the two chunks:

    1. Units: a paragraph that fits the limit is a unit. One that does not is cut into its
       lines (at ``"\n"``, trimmed); a line that does not fit, into its sentences (a
       sentence ends at ``.``, ``?`` or ``!`` with any closing quotes or brackets, followed
       by whitespace); a sentence that does not fit is cut as a long paragraph is above.
       A unit *ends a line* when it is a paragraph, a line, or the last unit of its line.
    2. Chunks: each takes units from its first while the chunk, counted exactly (all of
       it, not unit by unit), fits ``max_tokens``: the largest such run of units, found by
       doubling then halving the number of units.
    3. Overlap: when a chunk's last unit does not end a line, the next chunk starts up to
       N units back: at the earliest of the previous chunk's last N units (never its first)
       such that none of the units carried ends a line and the new chunk, from there through
       the unit after the previous chunk, still fits.

    Guarantees as above (chunks trimmed, starts and ends strictly increasing, every
    non-whitespace character in a chunk, the limit kept by every chunk of more than one
    character), except that an overlap is whole units, at most N of them, and only at a
    cut inside a line.
    """

    name = "paragraph"

    def __init__(
        self,
        *,
        max_tokens: int = 700,
        overlap_tokens: int = 80,
        overlap_sentences: int = 0,
        token_counter: TokenCounter = chars4,
    ) -> None:
        check_int("max_tokens", max_tokens, 1)
        check_int("overlap_tokens", overlap_tokens, 0)
        check_int("overlap_sentences", overlap_sentences, 0)
        check_less("overlap_tokens", overlap_tokens, "max_tokens", max_tokens)
        if overlap_sentences and overlap_tokens:
            raise ParameterError(
                "{overlap_sentences} and {overlap_tokens} are two kinds of overlap: "
                "set one of them to 0"
            )
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.overlap_sentences = overlap_sentences
        self.token_counter = token_counter
        self.max_chars = max_tokens * CHARS_PER_TOKEN
        self.overlap_chars = overlap_tokens * CHARS_PER_TOKEN

    def __repr__(self) -> str:
        counter = "" if self.token_counter is chars4 else f", token_counter={self.token_counter!r}"
        sentences = f", overlap_sentences={self.overlap_sentences}" * bool(self.overlap_sentences)
        return (
            f"ParagraphChunker(max_tokens={self.max_tokens}, "
            f"overlap_tokens={self.overlap_tokens}{sentences}{counter})"
        )

    def params(self) -> dict[str, int]:
        # overlap_sentences only when set, so that configs without it keep their fingerprint.
        found = {"max_tokens": self.max_tokens, "overlap_tokens": self.overlap_tokens}
        if self.overlap_sentences:
            found["overlap_sentences"] = self.overlap_sentences
        return found

    def split(self, text: str) -> list[Span]:
        if self.overlap_sentences:
            return SentenceOverlap(
                text, self.token_counter, self.max_tokens, self.overlap_sentences
            ).run()
        if self.token_counter is not chars4:
            return TokenSplit(text, self.token_counter, self.max_tokens, self.overlap_tokens).run()
        first = NONSPACE.search(text)
        if first is None:
            return []
        max_chars = self.max_chars
        n = len(text)
        last_end = rstrip_end(text, first.start(), n)  # the last paragraph's end
        spans: list[Span] = []
        start = end = -1  # the open chunk; -1 until the first unit arrives
        para = first.start()  # the next paragraph to add
        # A chunk takes every unit that ends by start + max_chars, its limit, and a paragraph
        # that starts after the chunk's first unit and ends by the limit is one unit, never
        # cut. So instead of adding paragraphs one at a time (there are several per chunk),
        # a backward search from the limit (last_break) jumps past all of them. Only the
        # paragraph after them is looked at: as one unit it overflows, and its end bounds the
        # next chunk's overlap; cut into pieces, its first pieces may still fit.
        while True:
            sep = SEPARATOR.search(text, para)
            if sep is None:
                para_end, after = last_end, n
            else:
                para_end, after = sep.start(), sep.end()
                if text[para_end - 1].isspace():
                    para_end = rstrip_end(text, para, para_end)
            units: Iterable[tuple[int, int]] = (
                ((para, para_end),)
                if para_end - para <= max_chars
                else pieces(text, para, para_end, max_chars)
            )
            for unit_start, unit_end in units:
                if start < 0:
                    start, end = unit_start, unit_end
                elif unit_end - start <= max_chars:
                    end = unit_end
                else:
                    spans.append(Span(start, end))
                    start = overlap_start(
                        text, end, unit_start, unit_end, overlap=self.overlap_chars, size=max_chars
                    )
                    end = unit_end
            if after >= n:  # no paragraph left
                break
            limit = start + max_chars  # the open chunk takes every unit that ends by limit
            if last_end <= limit:
                end = last_end
                break
            para = after
            skip = last_break(text, after, limit)
            if skip is not None:
                end, para = skip
        spans.append(Span(start, end))
        return spans


# A sentence's end: a mark, any closing quotes or brackets, then whitespace (not included).
SENTENCE_END = re.compile(r"[.?!][\"'\u201d\u2019)\]]*(?=\s)")

Unit = tuple[int, int, bool]  # (start, end, whether it ends a line)


class SentenceOverlap:
    """One ``ParagraphChunker.split`` with ``overlap_sentences``; see "Sentence overlap" in
    the class docstring."""

    def __init__(self, text: str, counter: TokenCounter, max_tokens: int, overlap: int):
        self.text = text
        self.counter = counter
        self.max_tokens = max_tokens
        self.overlap = overlap

    def fits(self, start: int, end: int) -> bool:
        if self.counter is chars4:
            return end - start <= self.max_tokens * CHARS_PER_TOKEN
        return self.counter(self.text[start:end]) <= self.max_tokens

    def units(self) -> Iterator[Unit]:
        text = self.text
        for start, end in paragraphs(text):
            if self.fits(start, end):
                yield start, end, True
                continue
            for line_start, line_end in _trimmed(text, start, end, "\n"):
                if self.fits(line_start, line_end):
                    yield line_start, line_end, True
                    continue
                sentences = list(_sentences(text, line_start, line_end))
                for k, (a, b) in enumerate(sentences):
                    last = k == len(sentences) - 1
                    if self.fits(a, b):
                        yield a, b, last
                        continue
                    cut = list(self._cut(a, b))
                    for m, (c, d) in enumerate(cut):
                        yield c, d, last and m == len(cut) - 1

    def _cut(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """A sentence over the limit in pieces, as ``paragraph`` cuts a long paragraph."""
        if self.counter is chars4:
            yield from pieces(self.text, start, end, self.max_tokens * CHARS_PER_TOKEN)
            return
        split = TokenSplit(self.text, self.counter, self.max_tokens, 0)
        for a, b, _ in split.pieces(start, end, split.cost(start, end)):
            yield a, b

    def run(self) -> list[Span]:
        units = list(self.units())
        spans: list[Span] = []
        first = 0
        while first < len(units):
            after = self._last_fit(units, first) + 1  # the chunk is units[first:after]
            spans.append(Span(units[first][0], units[after - 1][1]))
            if after == len(units):
                break
            start = after
            if not units[after - 1][2]:  # a cut inside a line: carry units back
                while (
                    start - 1 > first
                    and after - (start - 1) <= self.overlap
                    and not units[start - 1][2]
                    and self.fits(units[start - 1][0], units[after][1])
                ):
                    start -= 1
            first = start
        return spans

    def _last_fit(self, units: list[Unit], first: int) -> int:
        """The last unit of the largest run from ``first`` that fits (``first`` itself when
        none longer does): doubling, then halving."""
        start = units[first][0]
        good, step = first, 1
        while good + step < len(units) and self.fits(start, units[good + step][1]):
            good += step
            step *= 2
        bad = min(good + step, len(units))  # the run through units[bad] does not fit
        while bad - good > 1:
            middle = (good + bad) // 2
            if self.fits(start, units[middle][1]):
                good = middle
            else:
                bad = middle
        return good


def _trimmed(text: str, start: int, end: int, separator: str) -> Iterator[tuple[int, int]]:
    """The non-empty, trimmed parts of text[start:end] between ``separator`` s."""
    at = start
    while at < end:
        cut = text.find(separator, at, end)
        stop = end if cut < 0 else cut
        first = NONSPACE.search(text, at, stop)
        if first is not None:
            yield first.start(), rstrip_end(text, first.start(), stop)
        at = stop + 1


def _sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The trimmed sentences of the trimmed line text[start:end]."""
    at = start
    for mark in SENTENCE_END.finditer(text, start, end):
        if mark.end() >= end:
            break
        yield at, mark.end()
        after = NONSPACE.search(text, mark.end(), end)
        assert after is not None  # the line ends in non-whitespace
        at = after.start()
    yield at, end
