"""Hybrid section-aware chunking (docs/chunking.md, `section`), as exact offsets into the text."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator

from chunkmill.chunking.base import (
    CHARS_PER_TOKEN,
    Span,
    TokenCounter,
    chars4,
    check_int,
    rstrip_end,
)
from chunkmill.chunking.markdown import (
    ANY_DEFINITION,
    CODE,
    DEFINITIONS,
    EQUATION,
    FRONT_MATTER_CLOSE,
    FRONT_MATTER_OPEN,
    GROUP,
    HEADING,
    ITEM,
    LAST_SPACE,
    LINE,
    LIST,
    NESTED,
    NONSPACE,
    PROSE,
    SENTENCE,
    SPACE,
    STRUCT_CANDIDATE,
    STRUCT_LINE,
    TOP_DEFINITION,
    Block,
    ascii_slug,
    closing_fence_end,
    code_parts,
    dedupe_slug,
    first_unit_end,
    github_slug,
    glue_equations,
    heading_title,
    items,
    last_unit_end,
    lines,
    prose_units,
    region_blocks,
)

# Span(...) runs a Python-level __new__ that fills in the defaults; tuple.__new__ builds the
# same named tuple in C at half the cost, once per chunk. It needs every field, in order:
# these five, then two that are None.
_new_span = tuple.__new__
if Span._fields[:5] != (
    "start",
    "end",
    "section_path",
    "section_anchor",
    "section_chunk_index",
) or Span(0, 1) != (0, 1, None, None, None, None, None):  # not an assert: python -O drops those
    raise ImportError("Span's fields changed: update the _new_span calls in section.py")


class SectionChunker:
    """One chunk per Markdown section; a section over ``max_tokens`` is split at
    block, then sentence boundaries. No overlap between chunks.

    Structure. Lines are separated by ``"\\n"`` (a ``"\\r"`` before it belongs to the line
    ending). A *heading* is an ATX heading line of level 1-4: up to 3 spaces, 1-4 ``#``, then
    a space, a tab or the end of the line. Setext headings and levels 5-6 are text. A line
    inside a *fenced code block* is never a heading: a fence opens with a line of up to 3
    spaces then 3+ backticks (no backtick after them on that line) or 3+ tildes, and closes
    with a line of up to 3 spaces, at least as many of the same character and only spaces or
    tabs; an unclosed fence runs to the end of the document (CommonMark). YAML front matter
    (a first line ``---``, closed by a ``---`` or ``...`` line) is treated like a fence.

    A *section* runs from a heading line to the next heading line (exclusive), or from the
    document start to the first heading; it is trimmed of surrounding whitespace and dropped
    if whitespace-only. Sections never merge: they are the natural boundaries.

    Metadata, the same for every chunk of a section:

    * ``section_path``: the heading texts in effect, outermost first. A heading of level n
      closes every open heading of level >= n; skipped levels leave no gap (``#`` then
      ``###`` gives a path of 2). A heading text is its line after the opening ``#`` s,
      stripped of whitespace and of a closing ``#`` sequence (one preceded by a space or tab,
      or making up the whole text); inline Markdown is kept verbatim. ``()`` before the first
      heading.
    * ``section_anchor``: github-slugger's slug of the section's heading (GitHub and
      Docusaurus): lowercase; drop every character except letters, marks, decimal and letter
      numbers, connector punctuation (``_``), ``-`` and ``" "``; then ``" "`` becomes ``"-"``.
      Links and images count as their bracketed text and HTML tags are dropped first. A slug
      already used in the document (by any ATX heading, levels 5-6 included) gets ``-1``,
      ``-2``, ... in order of appearance. ``None`` before the first heading.
    * ``section_chunk_index``: the chunk's position within its section, from 0.

    Limit. A chunk fits if ``token_counter(chunk) <= max_tokens``; with the default
    ``chars4`` that is ``len(chunk) <= max_tokens * 4``, computed without copying text.

    Splitting a section that does not fit. Its body (after the heading line) is read as
    blocks. A *blank line* holds only spaces and tabs (and maybe a ``"\r"`` before its
    ``"\n"``). An *item line* has up to 3 spaces, then ``-``, ``*``, ``+`` or 1-9 digits and
    ``.`` or ``)``, then a space, a tab or the end of the line.

    * *Code*: a fenced code block (or the front matter).
    * *List*: from an item line over every following line, and over blank lines when the
      next non-blank line is an item line or is indented by 2+ spaces or a tab. Any item line
      starts a list at the start of the body or after a blank line, a fence or an equation;
      inside a paragraph only ``-``, ``*``, ``+``, ``1.`` or ``1)`` does (as in CommonMark).
    * *Display equation*: a line starting (after spaces and tabs) with ``$$`` or ``\\[``,
      through the line holding the next ``$$`` or ``\\]`` (possibly the same line), or only
      that line if none follows before the next fence or the section end. Inside a list it
      is part of the list.
    * *Prose*: anything else, up to a blank line, an item line that starts a list or an
      equation.

    An equation is glued into one block with the prose right before and after it (a chain
    when equations and prose alternate). The heading line, then the blocks, are packed
    greedily into contiguous chunks: each unit extends the open chunk while it still fits.

    * Prose is added sentence by sentence. A sentence ends at ``.``, ``?`` or ``!``, plus
      any closing quotes or brackets, followed by whitespace: a regex in place of a sentence
      spaCy or NLTK, so "e.g. x" ends a sentence, but it is linear and far faster.
    * A code block, list, equation or glued group that does not fit in the open chunk
      starts a new chunk if it fits in one of its own; else it is split into smaller units:
      code at lines that start a definition at the fence's indentation (``def``, ``class``,
      ``function``, ``func``, ``fn``, ``public``, ``private``, ``static``, ``export``,
      ``impl``, ... or a decorator, annotation or attribute line, which keeps the definition
      below it), then at such lines at any indentation, then at lines; a list at items
      (nested ones too), then at sentences; an equation at lines; a group into its prose and
      equations.
    * A sentence, line or heading line that does not fit alone is cut into pieces: at the
      last ``"\\n"`` in the second half of the room, else at the last whitespace, else hard
      (which may split a word). The first piece of a unit that follows a lone heading line
      fills the heading's chunk when that cut falls at whitespace.

    So a heading is alone in its chunk only when its section is just the heading, or when the
    unit after it cannot share the chunk: it fits in a chunk of its own but not beside the
    heading (keeping code, lists and sentences whole wins over filling), or its first piece
    would need a hard cut.

    Guarantees, for any ``text`` (besides those of :mod:`chunkmill.chunking.base`):

    * every chunk fits, and its first and last characters are not whitespace;
    * starts and ends are strictly increasing; chunks are disjoint and never cross a section
      boundary; the first chunk of a section starts at its heading's ``#``;
    * a section that fits is one chunk, and so is a code block that fits;
    * ``split`` raises ``ValueError`` if ``token_counter`` counts some single character as
      more than ``max_tokens``, as no chunk could hold it;
    * with ``chars4``, time and extra memory are linear in ``len(text)`` and no chunk text is
      copied. Another counter is called on the candidate chunk about once per unit added,
      and O(log) times per cut of an over-long unit.
    """

    name = "section"

    def __init__(self, *, max_tokens: int = 512, token_counter: TokenCounter = chars4) -> None:
        check_int("max_tokens", max_tokens, 1)
        if not callable(token_counter):
            raise ValueError(f"token_counter must be callable, got {token_counter!r}")
        self.max_tokens = max_tokens
        self.token_counter = token_counter
        self.max_chars = max_tokens * CHARS_PER_TOKEN

    def __repr__(self) -> str:
        return f"SectionChunker(max_tokens={self.max_tokens})"

    def params(self) -> dict[str, int]:
        return {"max_tokens": self.max_tokens}

    def split(self, text: str) -> list[Span]:
        char_mode = self.token_counter is chars4
        max_chars = self.max_chars
        if char_mode:

            def fits(a: int, b: int) -> bool:
                return b - a <= max_chars

        else:
            counter, max_tokens = self.token_counter, self.max_tokens

            def fits(a: int, b: int) -> bool:
                return counter(text[a:b]) <= max_tokens

        packer = _Packer(text, fits, self)
        fences, fence_starts = packer.fences, packer.fence_starts
        spans: list[Span] = []
        slugs: dict[str, int] = {}
        levels: list[int] = []  # the open headings, outermost first
        titles: list[str] = []
        path: tuple[str, ...] = ()
        anchor: str | None = None
        section_start, hash_pos, line_end = 0, -1, -1  # the section being read
        n = len(text)
        skip_to = 0  # candidate lines before this are inside a fence or front matter
        front = FRONT_MATTER_OPEN.match(text)
        if front is not None:
            close = FRONT_MATTER_CLOSE.search(text, front.end() - 1)
            if close is not None:
                fences.append((0, close.end()))
                fence_starts.append(0)
                skip_to = close.end()
        # One pass over the candidate lines. In a document of many short sections this loop
        # runs about once per section, so the path of a section that fits is kept inline.
        match_line = STRUCT_LINE.match
        candidates = STRUCT_CANDIDATE.finditer(text, skip_to)
        line_start = 0
        while True:
            m = match_line(text, line_start) if line_start >= skip_to else None
            if m is not None:
                hashes_start, hashes_end = m.span(1)
                if hashes_start >= 0:
                    title = text[hashes_end : m.end()].strip()
                    if title.endswith("#"):  # maybe a closing sequence
                        title = heading_title(title)
                    if title.isascii() and "[" not in title and "<" not in title:
                        slug = ascii_slug(title)
                    else:
                        slug = github_slug(title)
                    if slug in slugs:
                        slug = dedupe_slug(slug, slugs)
                    slugs[slug] = 0
                    level = hashes_end - hashes_start
                    if level <= 4:
                        if hash_pos >= 0 and char_mode:
                            # rstrip_end(text, hash_pos, line_start) unrolled: the section
                            # ends with the newline before this line, and mostly with "\n\n".
                            end = line_start - 1
                            if text[end - 1].isspace():
                                if text[end - 2].isspace():
                                    end = rstrip_end(text, hash_pos, end)
                                else:
                                    end -= 1
                            if end - hash_pos <= max_chars:
                                spans.append(
                                    _new_span(Span, (hash_pos, end, path, anchor, 0, None, None))
                                )
                            else:
                                packer.section(hash_pos, line_end, end, path, anchor, spans)
                        else:
                            packer.section_or_preamble(
                                section_start, hash_pos, line_end, line_start, path, anchor, spans
                            )
                        while levels and levels[-1] >= level:
                            levels.pop()
                            titles.pop()
                        levels.append(level)
                        titles.append(title)
                        path, anchor = tuple(titles), slug
                        section_start, hash_pos, line_end = line_start, hashes_start, m.end()
                else:
                    fence_end = m.end(2)
                    # A backtick in a backtick fence's info string makes the line inline code.
                    if text[fence_end - 1] != "`" or "`" not in text[fence_end : m.end()]:
                        skip_to = closing_fence_end(
                            text, m.end(), text[fence_end - 1], fence_end - m.start(2)
                        )
                        if skip_to < 0:
                            skip_to = n
                        fences.append((line_start, skip_to))
                        fence_starts.append(line_start)
                        # Resume after the fence rather than scan its content a second time.
                        candidates = STRUCT_CANDIDATE.finditer(text, skip_to)
            candidate = next(candidates, None)
            if candidate is None:
                break
            line_start = candidate.start() + 1
        packer.section_or_preamble(section_start, hash_pos, line_end, n, path, anchor, spans)
        return spans


# --- splitting and packing -------------------------------------------------------------------


class _Packer:
    """Chunks one section at a time into ``spans``; lives for one ``split`` call."""

    def __init__(
        self,
        text: str,
        fits: Callable[[int, int], bool],
        chunker: SectionChunker,
    ) -> None:
        self.text = text
        self.fits = fits
        self.char_mode = chunker.token_counter is chars4
        self.max_chars = chunker.max_chars
        self.max_tokens = chunker.max_tokens
        # Fences found so far, in order: those of a section are known when it is chunked.
        self.fences: list[tuple[int, int]] = []
        self.fence_starts: list[int] = []
        self.chunks: list[tuple[int, int]] = []
        self.start = self.end = -1  # the open chunk; -1 when none is open
        self.heading_only = False  # the open chunk holds only a heading line

    def section_or_preamble(
        self,
        section_start: int,
        hash_pos: int,
        line_end: int,
        section_end: int,
        path: tuple[str, ...],
        anchor: str | None,
        spans: list[Span],
    ) -> None:
        """Append the chunks of the section [section_start, section_end) to ``spans``.
        ``hash_pos`` and ``line_end`` locate its heading line; -1 for the text before the
        first heading, which is dropped if whitespace-only."""
        if hash_pos >= 0:
            end = rstrip_end(self.text, hash_pos, section_end)
            if self.fits(hash_pos, end):
                spans.append(_new_span(Span, (hash_pos, end, path, anchor, 0, None, None)))
            else:
                self.section(hash_pos, line_end, end, path, anchor, spans)
            return
        first = NONSPACE.search(self.text, section_start, section_end)
        if first is None:
            return
        start = first.start()
        end = rstrip_end(self.text, start, section_end)
        if self.fits(start, end):
            spans.append(_new_span(Span, (start, end, path, anchor, 0, None, None)))
            return
        self.chunks = []
        self._feed_blocks(self._blocks(section_start, end))
        self._emit(path, anchor, spans)

    def section(
        self,
        hash_pos: int,
        line_end: int,
        end: int,
        path: tuple[str, ...],
        anchor: str | None,
        spans: list[Span],
    ) -> None:
        """Append the chunks of the section whose heading's ``#`` is at ``hash_pos``, whose
        heading line ends at ``line_end`` and whose last non-whitespace character is at
        ``end - 1``; it does not fit in one chunk."""
        text = self.text
        self.chunks = []
        self.feed(hash_pos, rstrip_end(text, hash_pos, min(line_end, end)), HEADING)
        self._feed_blocks(self._blocks(line_end, end))
        self._emit(path, anchor, spans)

    def _feed_blocks(self, blocks: list[Block]) -> None:
        """``feed`` each block in turn."""
        if not self.char_mode:
            for block in blocks:
                self.feed(*block)
            return
        # Most blocks just extend the open chunk, and most others are prose: feed's first
        # two cases, without the call.
        max_chars = self.max_chars
        for block in blocks:
            start = self.start
            if start >= 0 and block[1] - start <= max_chars:
                self.end = block[1]
                self.heading_only = False
            elif block[2] == PROSE:
                self._pack_units(block[0], block[1], lines=False)
            else:
                self.feed(*block)

    def _emit(self, path: tuple[str, ...], anchor: str | None, spans: list[Span]) -> None:
        """Close the open chunk and append the section's chunks to ``spans``."""
        self._close()
        spans.extend(
            [
                _new_span(Span, (s, e, path, anchor, index, None, None))
                for index, (s, e) in enumerate(self.chunks)
            ]
        )

    # -- packing --

    def feed(self, s: int, e: int, kind: int, parts: tuple[Block, ...] = ()) -> None:
        """Add the unit [s, e) (trimmed, non-empty) to the chunks."""
        start = self.start
        if start >= 0 and (e - start <= self.max_chars if self.char_mode else self.fits(start, e)):
            self.end = e
            self.heading_only = False
        elif kind == PROSE:  # soft: fill the open chunk unit by unit
            if self.char_mode:
                self._pack_units(s, e, lines=False)
            else:
                for a, b in prose_units(self.text, s, e):
                    self.feed(a, b, SENTENCE)
        elif e - s <= self.max_chars if self.char_mode else self.fits(s, e):
            self._close()
            self.start, self.end, self.heading_only = s, e, kind == HEADING
        elif kind in (HEADING, SENTENCE, LINE):
            self._pieces(s, e)
        elif self.char_mode and kind in (ITEM, NESTED, EQUATION):
            # The same as feeding the children below one by one, a chunk at a time.
            self._pack_units(s, e, lines=kind != ITEM)
        else:
            for unit in self._children(s, e, kind, parts):
                self.feed(*unit)

    def _children(self, s: int, e: int, kind: int, parts: tuple[Block, ...]) -> Iterator[Block]:
        text = self.text
        if kind == GROUP:
            yield from parts
        elif kind == ITEM:
            for a, b in prose_units(text, s, e):
                yield a, b, SENTENCE, ()
        elif kind == LIST:
            for a, b in items(text, s, e):
                yield a, b, ITEM, ()
        elif kind == CODE:
            indent = s - text.rfind("\n", 0, s) - 1  # the fence's, 0-3 spaces
            for a, b in code_parts(text, s, e, TOP_DEFINITION[indent]):
                yield a, b, DEFINITIONS, ()
        elif kind == DEFINITIONS:
            for a, b in code_parts(text, s, e, ANY_DEFINITION):
                yield a, b, NESTED, ()
        else:  # NESTED, EQUATION
            for a, b in lines(text, s, e):
                yield a, b, LINE, ()

    def _pack_units(self, s: int, e: int, lines: bool) -> None:
        """``feed`` of each unit of [s, e) in turn, in characters, where the units are lines
        if ``lines`` else sentences and paragraphs (see UNIT_BREAK). The open chunk takes
        every unit up to the last unit end within its budget, found with one backward search,
        so the cost is per chunk rather than per unit."""
        text, max_chars = self.text, self.max_chars
        a = s  # the next unit's start
        while True:
            start = self.start
            origin = a if start < 0 else start
            if e - origin <= max_chars:  # the rest fits
                self.start, self.end, self.heading_only = origin, e, False
                return
            # The first non-whitespace character at or after the limit bounds the search:
            # a unit end found before it is within the limit, and so is all that follows it
            # up to the bound, such as the lookahead of LAST_UNIT_END.
            bound = origin + max_chars  # < e
            if text[bound].isspace():
                found = NONSPACE.search(text, bound, e)
                assert found is not None  # text[e - 1] is not whitespace
                bound = found.start()
            if lines:
                newline = text.rfind("\n", a, bound)
                last = -1 if newline < 0 else rstrip_end(text, a, newline)
            else:
                last = last_unit_end(text, a, bound)
            if last >= 0:  # the units up to ``last`` fit: the chunk ends there
                self.start, self.end, self.heading_only = origin, last, False
                self._close()
            else:  # the first unit does not fit in the open chunk
                if lines:
                    newline = text.find("\n", a, e)
                    last = e if newline < 0 else rstrip_end(text, a, newline)
                else:
                    last = first_unit_end(text, a, e)
                if start >= 0 and last - a <= max_chars:
                    self._close()  # it fits alone: it starts the next chunk
                    continue
                self._pieces(a, last)
            after = NONSPACE.search(text, last, e)
            if after is None:
                return
            a = after.start()

    def _close(self) -> None:
        if self.start >= 0:
            self.chunks.append((self.start, self.end))
            self.start = -1
            self.heading_only = False

    def _pieces(self, s: int, e: int) -> None:
        """Cut the unit [s, e), which does not fit alone, into pieces that do."""
        text = self.text
        a = s
        # Right after a lone heading line the first piece fills the heading's chunk.
        origin = self.start if self.start >= 0 and self.heading_only else a
        while not self.fits(origin, e):
            limit = self._limit(origin, a, e)
            cut = self._cut(origin, a, limit) if limit > a else -1
            if cut < 0:
                if origin == a:
                    raise ValueError(
                        f"token_counter counts {text[a]!r} as more than max_tokens="
                        f"{self.max_tokens}; no chunk can hold it"
                    )
                origin = a  # no room beside the heading: start a chunk of its own
                continue
            self._place(origin, a, cut)
            after = NONSPACE.search(text, cut, e)
            assert after is not None  # text[e - 1] is not whitespace and cut < e
            a = origin = after.start()
        self._place(origin, a, e)

    def _place(self, origin: int, a: int, b: int) -> None:
        if origin == a:
            self._close()
            self.start = a
        self.end = b
        self.heading_only = False

    def _limit(self, origin: int, a: int, e: int) -> int:
        """The largest end in [a, e) such that [origin, end) fits, or ``a`` if none does;
        the caller knows that [origin, e) does not fit."""
        if self.char_mode:
            return max(a, min(e - 1, origin + self.max_chars))
        fits = self.fits
        good, bad, step = a, e, self.max_tokens
        # Gallop from a, so that the cost depends on the chunk's length, not the unit's.
        while good + step < e:
            if not fits(origin, good + step):
                bad = good + step
                break
            good += step
            step *= 2
        while bad - good > 1:
            middle = (good + bad) // 2
            if fits(origin, middle):
                good = middle
            else:
                bad = middle
        return good

    def _cut(self, origin: int, a: int, limit: int) -> int:
        """The end of the piece that starts at ``a`` when [origin, limit) is the most that
        fits: at a newline in the second half, else at whitespace, else hard at ``limit``
        (only when the piece starts its own chunk). -1 if no piece can be made."""
        text = self.text
        cut = text.rfind("\n", a + 1 + (limit - a) // 2, limit + 1)
        if cut < 0:
            space = SPACE.search(text, a + 1, limit + 1)
            if space is not None:
                last = LAST_SPACE.match(text, space.start(), limit + 1)
                assert last is not None  # it matches at least the space just found
                cut = last.end() - 1
        if cut > a:
            end = rstrip_end(text, a, cut)
            if self.char_mode or self.fits(origin, end):
                return end
        if origin != a:
            return -1
        if self.char_mode:
            return limit  # no whitespace in (a, limit]: text[limit - 1] is not whitespace
        # A counter that is not monotone may reject a shorter text; back off until one fits.
        for hard in range(limit, a, -1):
            end = rstrip_end(text, a, hard)
            if self.fits(a, end):
                return end
        return -1

    # -- blocks --

    def _blocks(self, lo: int, hi: int) -> list[Block]:
        """The blocks of [lo, hi), a section body, with equations glued to their prose."""
        text = self.text
        blocks: list[Block] = []
        equations = False
        pos = lo
        index = bisect_left(self.fence_starts, lo)
        while index < len(self.fences) and self.fences[index][0] < hi:
            fence_start, fence_end = self.fences[index]
            equations |= region_blocks(text, pos, fence_start, blocks)
            first = fence_start  # the fence's first character, after up to 3 spaces
            while text[first] == " ":
                first += 1
            blocks.append((first, rstrip_end(text, first, min(fence_end, hi)), CODE, ()))
            pos = fence_end
            index += 1
        equations |= region_blocks(text, pos, hi, blocks)
        return glue_equations(blocks, text) if equations else blocks
