"""The token search of the paragraph strategy under an exact token counter: packing
paragraphs (and pieces of over-long ones) into chunks of at most ``max_tokens`` tokens as the
counter counts them, with overlap (docs/chunking.md, "Sizes: tokens and characters")."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence

from chunkmill.chunking.base import Span, TokenCounter
from chunkmill.chunking.paragraphs import (
    SPACE_RUN,
    SPACE_THEN_WORD,
    paragraphs,
)

# --- exact token counts ---------------------------------------------------------------------

Unit = tuple[int, int, int]  # (start, end, content tokens) of a trimmed unit


class TokenSplit:
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
            words = [m.end() - 1 for m in SPACE_THEN_WORD.finditer(text, low - 1, end)]
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
        for start, end in paragraphs(self.text):
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
        for m in SPACE_RUN.finditer(text, start, end):
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
