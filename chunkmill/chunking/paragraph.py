"""Paragraph-boundary chunking (docs/chunking.md, `paragraph`), as exact offsets into the text."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence

from chunkmill.chunking.base import (
    CHARS_PER_TOKEN,
    Span,
    TokenCounter,
    chars4,
    check_int,
    check_less,
    register,
    rstrip_end,
)

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
_SPACE_RUN = re.compile(r"\s+")
# Matched from a paragraph start to endpos, it ends just after the last "\n" that a blank
# line and another "\n" follow (the last but one "\n" of the last separator), and group 1
# is the first character after that separator. ".*" jumps to endpos and backtracks, and as
# what follows it is a literal, the engine skips to each "\n" in a tight loop: about a
# nanosecond a character, where backtracking onto "\s" (_LAST_SPACE), or onto a group
# placed before the "\n", takes 8 to 12.
_LAST_BREAK = re.compile(r".*\n(?=[^\S\n]*\n\s*(\S))", re.DOTALL)


@register("paragraph")
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
       cuts (``_TokenSplit.largest_fit``); it is the last that fits when counts grow with
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
    """

    name = "paragraph"

    def __init__(
        self,
        *,
        max_tokens: int = 700,
        overlap_tokens: int = 80,
        token_counter: TokenCounter = chars4,
    ) -> None:
        check_int("max_tokens", max_tokens, 1)
        check_int("overlap_tokens", overlap_tokens, 0)
        check_less("overlap_tokens", overlap_tokens, "max_tokens", max_tokens)
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.token_counter = token_counter
        self.max_chars = max_tokens * CHARS_PER_TOKEN
        self.overlap_chars = overlap_tokens * CHARS_PER_TOKEN

    def __repr__(self) -> str:
        counter = "" if self.token_counter is chars4 else f", token_counter={self.token_counter!r}"
        return (
            f"ParagraphChunker(max_tokens={self.max_tokens}, "
            f"overlap_tokens={self.overlap_tokens}{counter})"
        )

    def params(self) -> dict[str, int]:
        return {"max_tokens": self.max_tokens, "overlap_tokens": self.overlap_tokens}

    def split(self, text: str) -> list[Span]:
        if self.token_counter is not chars4:
            return _TokenSplit(text, self.token_counter, self.max_tokens, self.overlap_tokens).run()
        first = _NONSPACE.search(text)
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
        # a backward search from the limit (_last_break) jumps past all of them. Only the
        # paragraph after them is looked at: as one unit it overflows, and its end bounds the
        # next chunk's overlap; cut into pieces, its first pieces may still fit.
        while True:
            sep = _SEPARATOR.search(text, para)
            if sep is None:
                para_end, after = last_end, n
            else:
                para_end, after = sep.start(), sep.end()
                if text[para_end - 1].isspace():
                    para_end = rstrip_end(text, para, para_end)
            units: Iterable[tuple[int, int]] = (
                ((para, para_end),)
                if para_end - para <= max_chars
                else _pieces(text, para, para_end, max_chars)
            )
            for unit_start, unit_end in units:
                if start < 0:
                    start, end = unit_start, unit_end
                elif unit_end - start <= max_chars:
                    end = unit_end
                else:
                    spans.append(Span(start, end))
                    start = self._overlap_start(text, start, end, unit_start, unit_end)
                    end = unit_end
            if after >= n:  # no paragraph left
                break
            limit = start + max_chars  # the open chunk takes every unit that ends by limit
            if last_end <= limit:
                end = last_end
                break
            para = after
            skip = _last_break(text, after, limit)
            if skip is not None:
                end, para = skip
        spans.append(Span(start, end))
        return spans

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
        yield start, rstrip_end(text, start, sep.start())
        start = sep.end()
    if start < len(text):  # else the last separator swallowed trailing whitespace
        yield start, rstrip_end(text, start, len(text))


def _last_break(text: str, lo: int, limit: int) -> tuple[int, int] | None:
    """``(end, next)``: the end of the last paragraph that starts at or after ``lo`` and ends
    at or before ``limit``, and the start of the paragraph after it; None if no paragraph
    does. A paragraph starts at ``lo`` and one ends after ``limit``."""
    # A separator is the part of a whitespace run from its first "\n" on, when the run holds
    # two; the paragraph before it ends where the run starts. So if limit falls in such a
    # run, the run counts, however far past limit its "\n" lie: search up to its end.
    hi = limit
    if text[limit].isspace():
        run_end = _NONSPACE.search(text, limit)
        assert run_end is not None
        hi = run_end.start()
    # Up to and including text[hi], which is not whitespace: the next paragraph's start.
    found = _LAST_BREAK.match(text, lo, hi + 1)
    if found is None:
        return None
    newline = found.end() - 1  # in the last run with two "\n", the last "\n" but one
    end = newline if not text[newline - 1].isspace() else rstrip_end(text, lo, newline)
    return end, found.start(1)


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
        yield start, rstrip_end(text, start, cut)
        after = _NONSPACE.search(text, cut, end)
        assert after is not None  # text[end - 1] is not whitespace and cut < end
        start = after.start()
    yield start, end


# --- exact token counts ---------------------------------------------------------------------

Unit = tuple[int, int, int]  # (start, end, content tokens) of a trimmed unit


class _TokenSplit:
    """One ``ParagraphChunker.split`` measured with a token counter other than ``chars4``;
    see "Exact token counts" in the class docstring.

    All budgets here are in *content* tokens: ``counter(s) - counter("")``, the tokens ``s``
    adds beyond the special tokens every text gets.
    """

    # Gaps between units are short whitespace strings that repeat ("\n\n", "\n    "); their
    # costs are kept per call, for at most this many distinct gaps of at most 64 characters.
    _GAP_CACHE_SIZE = 64

    def __init__(self, text: str, counter: TokenCounter, max_tokens: int, overlap_tokens: int):
        self.text = text
        self.counter = counter
        self.base = counter("")
        self.budget = max_tokens - self.base
        self.overlap_tokens = overlap_tokens
        self._gaps: dict[str, int] = {}

    def cost(self, start: int, end: int) -> int:
        """Content tokens of text[start:end], counted exactly."""
        return self.counter(self.text[start:end]) - self.base

    def gap_cost(self, start: int, end: int) -> int:
        gap = self.text[start:end]
        cost = self._gaps.get(gap)
        if cost is None:
            cost = self.counter(gap) - self.base
            if len(gap) <= 64 and len(self._gaps) < self._GAP_CACHE_SIZE:
                self._gaps[gap] = cost
        return cost

    # -- packing --------------------------------------------------------------------------

    def run(self) -> list[Span]:
        units = self.units()
        spans: list[Span] = []
        if not units:
            return spans
        budget = self.budget
        n = len(units)
        first = 0  # the chunk's first unit
        start, _, est = units[0]  # the chunk's start and its content, estimated or exact
        exact = True
        j = 1  # the next unit to consider
        while True:
            while j < n:
                add = self.gap_cost(units[j - 1][1], units[j][0]) + units[j][2]
                if est + add > budget:
                    break
                est += add
                exact = False
                j += 1
            end = units[j - 1][1]
            if not exact:
                est = self.cost(start, end)
                if est > budget:  # the estimate missed tokens formed across a gap: back off
                    ends = [u[1] for u in units[first:j]]
                    carried = start < units[first][0]
                    lo, lo_cost = (-1, None) if carried else (0, units[first][2])
                    k, cost = self.largest_fit(
                        ends,
                        start,
                        lo=lo,
                        lo_cost=lo_cost,
                        hi=len(ends) - 1,
                        hi_cost=est,
                        budget=budget,
                        guess=(end - start) * budget / max(est, 1),
                    )
                    if k < 0:  # even overlap + first unit does not fit: drop the overlap
                        start, _, est = units[first]
                        exact = True
                        j = first + 1
                        continue
                    j = first + k + 1
                    end, est = ends[k], cost
                exact = True
            spans.append(Span(start, end))
            if j >= n:
                return spans
            unit_start, _, unit_cost = units[j]
            gap = self.gap_cost(end, unit_start)
            room = min(self.overlap_tokens, budget - gap - unit_cost)
            carry = self.overlap(start, end, est, room) if room > 0 else None
            if carry is None:
                start, est = unit_start, unit_cost
                exact = True
            else:
                start, overlap_cost = carry
                est = overlap_cost + gap + unit_cost
                exact = False
            first = j
            j += 1

    def overlap(self, start: int, end: int, cost: int, room: int) -> tuple[int, int] | None:
        """The earliest word start w in (start, end) with content(text[w:end]) <= room, and
        that content; None if not even the last word fits."""
        text = self.text
        density = max(cost, 1) / (end - start)  # tokens per character of the chunk
        window = int(2 * room / density) + 64
        while True:
            low = max(start + 1, end - window)
            # Word starts in [low, end), nearest first, so that sizes end - w increase.
            words = [m.end() - 1 for m in _SPACE_THEN_WORD.finditer(text, low - 1, end)]
            words.reverse()
            k, found = self.largest_fit(
                words, end, forward=False, lo=-1, budget=room, guess=room / density
            )
            if k < 0:
                return None
            if k < len(words) - 1 or low == start + 1:
                return words[k], found
            window *= 4  # the farthest word start in the window fits: look farther back

    # -- units ----------------------------------------------------------------------------

    def units(self) -> list[Unit]:
        """Paragraphs that fit, and pieces of those that do not (the rule's first step)."""
        units: list[Unit] = []
        for start, end in _paragraphs(self.text):
            cost = self.cost(start, end)
            if cost <= self.budget:
                units.append((start, end, cost))
            else:
                units.extend(self.pieces(start, end, cost))
        return units

    def pieces(self, start: int, end: int, cost: int) -> Iterator[Unit]:
        """Cut the paragraph [start, end), whose content ``cost`` exceeds the budget, into
        pieces as the character version does: each ends at the last line end that keeps it
        within budget, else at the last whitespace (of its first line) that does, else hard
        at the longest prefix (of its first word) that does."""
        text, budget = self.text, self.budget
        # Candidate cuts: every whitespace run; a run holding "\n" is a line end (it holds
        # one at most: two would make a blank line, a separator). The paragraph's end is
        # the last of both. A piece [s, cut) is trimmed; the next one starts after the run.
        cuts: list[int] = []  # run starts
        after: list[int] = []  # run ends
        line_end_at: list[int] = []  # indices into cuts of the line ends
        for m in _SPACE_RUN.finditer(text, start, end):
            if text.find("\n", m.start(), m.end()) >= 0:
                line_end_at.append(len(cuts))
            cuts.append(m.start())
            after.append(m.end())
        line_end_at.append(len(cuts))
        cuts.append(end)
        after.append(end)
        line_ends = [cuts[i] for i in line_end_at]
        guess = budget * (end - start) / max(cost, 1)  # characters of a piece that fits
        s, w, line = start, 0, 0  # a piece starts at s, before cuts[w] and line_ends[line]
        while True:
            word_end = cuts[w]
            stop = line_end_at[line] + 1  # the current line's cuts are cuts[w:stop]
            lo, lo_cost, hi, k = w - 1, None, stop, -1
            if word_end - s > 2 * guess + 64:
                # A long first word (a blob, a URL): find whether it fits without counting
                # it whole, which, repeated for each of its hard pieces, would be quadratic.
                inside = range(s + 1, word_end + 1)
                h, found = self.largest_fit(
                    inside, s, lo=-1, budget=budget, guess=guess, steps=False
                )
                if h < len(inside) - 1:  # it does not: cut it hard
                    piece = self._hard_piece(s, inside, h, found)
                    yield piece
                    s = piece[1]  # before word_end, still inside the word
                    continue
                lo, lo_cost = w, found  # the whole word fits
            elif cuts[stop - 1] - s <= guess:
                # The rest of the line likely fits: look for the most whole lines that do.
                j, found = self.largest_fit(line_ends, s, lo=line - 1, budget=budget, guess=guess)
                if j >= line:
                    k = line_end_at[j]
                else:
                    hi = stop - 1  # not even the rest of the line fits
            if k < 0:
                # The longest piece that ends in the current line, its end included. The
                # search never probes far beyond what fits, however long the line.
                k, found = self.largest_fit(
                    cuts, s, lo=lo, lo_cost=lo_cost, hi=hi, stop=stop, budget=budget, guess=guess
                )
                if k == stop - 1:  # the rest of the line fits: take the most lines that do
                    j, found = self.largest_fit(
                        line_ends, s, lo=line, lo_cost=found, budget=budget, guess=guess
                    )
                    k = line_end_at[j]
            if k >= w:
                yield s, cuts[k], found
            else:  # not even the first word fits: cut it hard
                inside = range(s + 1, word_end)
                h, found = self.largest_fit(
                    inside, s, lo=-1, budget=budget, guess=guess, steps=False
                )
                piece = self._hard_piece(s, inside, h, found)
                yield piece
                if piece[1] < word_end:
                    s = piece[1]  # inside the word
                    continue
                k = w  # that one character was the whole word
            if cuts[k] == end:
                return
            s, w = after[k], k + 1
            while line_end_at[line] < w:
                line += 1

    def _hard_piece(self, s: int, inside: range, h: int, found: int) -> Unit:
        """The piece a search over the cuts ``inside`` a word found (index ``h``, content
        ``found``). A chunk is never empty: if nothing fits, one character goes anyway."""
        if h >= 0:
            return s, inside[h], found
        return s, s + 1, self.cost(s, s + 1)

    # -- search ---------------------------------------------------------------------------

    def largest_fit(
        self,
        cands: Sequence[int],
        origin: int,
        *,
        forward: bool = True,
        lo: int,
        lo_cost: int | None = None,
        hi: int | None = None,
        hi_cost: int | None = None,
        stop: int | None = None,
        budget: int,
        guess: float,
        steps: bool = True,
    ) -> tuple[int, int]:
        """The largest index k in (lo, hi) whose piece fits ``budget``, with its content;
        ``(lo, lo_cost)`` if none does (``lo_cost`` -1 if it was None).

        Candidate k's piece is text[origin:cands[k]] if ``forward`` (cands ascending), else
        text[cands[k]:origin] (cands descending); either way its size |cands[k] - origin|
        grows with k. Candidates end at ``stop`` (default ``len(cands)``). ``lo`` fits with
        content ``lo_cost``, or, if that is None, is a bound below the candidates. ``hi``
        (default ``stop``) does not fit, with content ``hi_cost`` if known; ``hi == stop``
        means no bound above. ``guess`` is the expected size of the answer, in characters.

        Every probe counts a piece exactly, so an answer always fits. A probe aims where the
        count reaches the budget, interpolating between the bracket's ends (or from the
        fitting end's tokens per character); it bisects instead after two probes in a row
        that did not halve the bracket. With no bound above, no probe is more than about
        twice the size of the larger of ``guess`` and the longest piece known to fit: a
        candidate farther out is first approached by probing a piece that ends before it
        (if that does not fit, nothing beyond does); after two fitting probes in a row the
        search gallops, doubling. With ``steps``, when a piece fits, the next candidate is
        ruled out without a probe if the piece's count plus that of the step to it, counted
        alone (a whitespace run and a word), exceeds the budget; with counters that split
        text at whitespace that estimate is exact. (Not so for cuts inside a word, which
        such counters merge with the step: those searches probe.) So a search costs one to
        three counts of at most about twice the answer (or of the known bound), however
        long the text beyond it. The answer is the largest when counts grow with the size
        and the step estimate is exact.
        """

        def size(position: int) -> int:
            return position - origin if forward else origin - position

        def count(position: int) -> int:
            if forward:
                return self.cost(origin, position)
            return self.cost(position, origin)

        if stop is None:
            stop = len(cands)
        if hi is None:
            hi = stop
        found = lo_cost is not None
        lo_size = size(cands[lo]) if found else 0
        lo_count = lo_cost if lo_cost is not None else 0  # an empty piece holds nothing
        hi_size = size(cands[hi]) if hi < stop else 0
        reach = lo_size  # the longest piece, candidate or not, known to fit
        slow = 0  # probes in a row that did not halve a bounded bracket
        fits_in_a_row = 0
        while hi - lo > 1:
            bounded = hi < stop
            cap = int(2 * max(reach, guess)) + 64  # how far a search with no bound may probe
            if not bounded and size(cands[lo + 1]) > cap:
                # The next candidate lies far out (after a long word or line): probe the
                # piece that ends at cap. If it does not fit, nothing beyond does.
                cost = count(origin + cap if forward else origin - cap)
                if cost > budget:
                    hi, hi_size, hi_cost = lo + 1, cap, cost
                else:
                    reach = cap
                continue
            if bounded and slow >= 2:
                k = (lo + hi) // 2
            else:
                if bounded and hi_cost is not None:  # interpolate between lo and hi
                    slope = (hi_size - lo_size) / max(hi_cost - lo_count, 1)
                    want = lo_size + (budget - lo_count) * slope
                elif found:  # from lo's tokens per character
                    want = lo_size * budget / max(lo_count, 1)
                    if fits_in_a_row > 1:  # creeping up on a full budget: gallop
                        want = max(want, 2 * lo_size)
                else:
                    want = guess
                if not bounded:
                    want = min(want, cap)
                k = bisect_right(cands, want, lo + 1, hi, key=size) - 1
                k = min(max(k, lo + 1), hi - 1)
            cost = count(cands[k])
            width = hi - lo
            if cost <= budget:
                lo, lo_size, lo_count, found = k, size(cands[k]), cost, True
                reach = max(reach, lo_size)
                fits_in_a_row += 1
                if steps and k + 1 < hi and size(cands[k + 1]) - lo_size <= lo_size // 4 + 64:
                    # Does the next candidate fit? Estimate it from the short step to it,
                    # counted alone (a word, say), rather than count a whole piece again.
                    a, b = (cands[k], cands[k + 1]) if forward else (cands[k + 1], cands[k])
                    step = self.cost(a, b)
                    if cost + step > budget:
                        hi, hi_size, hi_cost = k + 1, size(cands[k + 1]), cost + step
            else:
                hi, hi_size, hi_cost = k, size(cands[k]), cost
                fits_in_a_row = 0
            slow = slow + 1 if bounded and 2 * (hi - lo) > width else 0
        return lo, lo_count if found else -1
