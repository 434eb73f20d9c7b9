"""Hybrid section-aware chunking (docs/chunking.md, `section`), as exact offsets into the text."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterator

from chunkmill.chunking.base import (
    CHARS_PER_TOKEN,
    Span,
    TokenCounter,
    chars4,
    check_int,
    register,
    rstrip_end,
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

# --- document structure: headings and code fences -------------------------------------------

# A line that matters to the section structure: an ATX heading of any level (1-4 open
# sections; 5-6 only take part in anchor de-duplication, as on GitHub) or a code fence
# opener. sre enters its matcher at every "\n" of a "\n"-prefixed pattern, which costs more
# the more the pattern branches, so a plain prefilter finds the candidate lines and the full
# pattern is matched only there (together 3x faster than searching with the full pattern).
_STRUCT_CANDIDATE = re.compile(r"\n {0,3}[#`~]")
# Group 1 is a heading's #s, group 2 a fence; the match runs to the end of the line.
_STRUCT_LINE = re.compile(r" {0,3}(?:(#{1,6})(?=[ \t]|\r?$)|(`{3,}|~{3,}))[^\n]*", re.M)
# YAML front matter (Docusaurus strips it): "---" on the first line, closed by "---" or "...".
_FRONT_MATTER_OPEN = re.compile(r"---[ \t]*\r?\n")
_FRONT_MATTER_CLOSE = re.compile(r"\n(?:---|\.\.\.)[ \t]*(?=\r?$)", re.M)
# CommonMark's optional closing sequence: #s preceded by a space or tab, or the whole content.
_CLOSING_HASHES = re.compile(r"(?:^|[ \t])#+$")


# A fence character run that may close a fence: only spaces and tabs may follow it.
_CLOSING_RUN = {
    "`": re.compile(r"(`+)[ \t]*(?=\r?$)", re.M),
    "~": re.compile(r"(~+)[ \t]*(?=\r?$)", re.M),
}


def _closing_fence_end(text: str, pos: int, char: str, length: int) -> int:
    """End of the line that closes a fence opened by ``length`` ``char``s, searching from
    ``pos`` (the opening line's end): up to 3 spaces, at least ``length`` ``char``s, then only
    spaces and tabs. -1 if none does.

    Code lines are short, and a regex entering its matcher at every newline would cost more
    than the rest of the chunking; a run of three fence characters is rare inside code, so
    ``str.find`` jumps from one to the next and only those lines are checked."""
    triple, closing_run = char * 3, _CLOSING_RUN[char]
    while True:
        found = text.find(triple, pos)
        if found < 0:
            return -1
        # Most fences close with a line of just the opening run: no regex needed.
        if (
            text[found - 1] == "\n"
            and text.startswith(char * length, found)
            and text.startswith("\n", found + length)
        ):
            return found + length
        run = closing_run.match(text, found)
        if run is None:
            pos = found + 3
            continue
        line_start = text.rfind("\n", 0, found) + 1
        indent = found - line_start
        if (
            run.end(1) - found >= length
            and indent <= 3
            and text.count(" ", line_start, found) == indent
        ):
            return run.end()
        pos = run.end(1)


# --- blocks inside an over-long section ------------------------------------------------------

# Inside a list only a blank line can end it. Inside prose only a list or an equation can:
# _PROSE_CANDIDATE checks just the character after a line's indentation (a cheap pattern:
# see _STRUCT_CANDIDATE), and _BLOCK_START then tells what the line starts.
_BLANK_LINE = re.compile(r"\n[ \t]*\r?\n")
_BLANK_RUN = re.compile(r"\n[ \t]*\r?\n\s*")  # also all whitespace after it
_BLANK_REST = re.compile(r"[ \t]*\r?\n")
_PROSE_CANDIDATE = re.compile(r"\n[ \t]*[-*+0-9$\\]")
_LIST_OR_EQUATION_LEAD = "-*+0123456789$\\"  # the characters _PROSE_CANDIDATE looks for
# A line that continues a list after a blank line: an item line, or a line indented by 2+
# spaces or a tab.
_LIST_GOES_ON = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?=[ \t]|\r?$)|  |\t", re.M)
# How a block starts, matched at its line's start: group 1 is a list item's marker, else an
# equation's opener ends the match.
_BLOCK_START = re.compile(r" {0,3}([-*+]|\d{1,9}[.)])(?=[ \t]|\r?$)|[ \t]*(?:\$\$|\\\[)", re.M)
# Item boundaries inside a list, nested items included.
_ITEM_START = re.compile(r"\n[ \t]*(?:[-*+]|\d{1,9}[.)])(?=[ \t]|\r?$)", re.M)
# The start of a line that begins a definition in common languages, or an annotation,
# decorator or attribute that belongs to the definition below it.
_DEFINITION = (
    r"(?:@[A-Za-z_]|#\[|(?:def|class|function|func|fn|sub|public|private|protected|internal"
    r"|static|export|async|pub|impl|trait|struct|enum|interface|module|type)\b)"
)
# Definitions at the fence's own indentation (0-3 spaces), then at any indentation.
_TOP_DEFINITION = tuple(re.compile(rf"\n {{{k}}}{_DEFINITION}") for k in range(4))
_ANY_DEFINITION = re.compile(rf"\n[ \t]*{_DEFINITION}")
_ATTRIBUTE_LINE = re.compile(r"[ \t]*(?:@[A-Za-z_]|#\[)")
# Prose units end at a sentence end (".", "?" or "!", then any closing quotes or brackets,
# followed by whitespace) or a paragraph end (followed by a blank line). _UNIT_BREAK finds
# them forwards: group 1 ends a sentence, else the match starts at the paragraph's newline;
# m.end() is where the next unit starts. _LAST_UNIT_END defines the last one before endpos,
# as its match's end. A paragraph ends at its last non-whitespace character even when
# whitespace-only lines that are not blank (a "\r" inside) come before the blank line, hence
# the "\s*?". Both try their branches at every character, which is slow: _first_unit_end and
# _last_unit_end give the same results with the patterns after them.
_CLOSERS = r"[\"')\]\u2019\u201d\u00bb]*"
_MARK = rf"[.?!]{_CLOSERS}"
_UNIT_BREAK = re.compile(rf"({_MARK})\s+|\n[ \t]*\r?\n\s*")
_LAST_UNIT_END = re.compile(rf".*(?:{_MARK}(?=\s)|\S(?=\s*?\n[ \t]*\r?\n))", re.DOTALL)
# _LAST_UNIT_END's branches apart, the first once per mark character: the tail after ".*"
# starts with a literal in each, so sre backtracks from one occurrence of it to the next in C.
# _LAST_BLANK_LINE also finds the last blank line of a range.
_LAST_PERIOD_END = re.compile(rf".*\.{_CLOSERS}(?=\s)", re.DOTALL)
_LAST_RARE_MARK_END = (
    ("?", re.compile(rf".*\?{_CLOSERS}(?=\s)", re.DOTALL)),
    ("!", re.compile(rf".*!{_CLOSERS}(?=\s)", re.DOTALL)),
)
_LAST_BLANK_LINE = re.compile(r".*\n[ \t]*\r?\n", re.DOTALL)
# _UNIT_BREAK's sentence ends apart, searched forwards: each starts with a literal that sre
# finds in C. Its paragraph ends are _BLANK_LINE's matches.
_PERIOD_END = re.compile(rf"\.{_CLOSERS}(?=\s)")
_RARE_MARK_END = (
    ("?", re.compile(rf"\?{_CLOSERS}(?=\s)")),
    ("!", re.compile(rf"!{_CLOSERS}(?=\s)")),
)

_NONSPACE = re.compile(r"\S")
_SPACE = re.compile(r"\s")
# Matched from a known whitespace position to endpos: ".*" runs to endpos in C and backtracks
# only to the last whitespace character.
_LAST_SPACE = re.compile(r".*\s", re.DOTALL)

# Unit kinds. PROSE is "soft": it is split to fill the open chunk. The others are kept whole
# when they fit in a chunk of their own and are otherwise split into the next kind down.
(
    _HEADING,
    _PROSE,
    _SENTENCE,
    _LIST,
    _ITEM,
    _CODE,
    _DEFINITIONS,
    _NESTED,
    _LINE,
    _EQUATION,
    _GROUP,
) = range(11)

_Block = tuple[int, int, int, tuple["_Block", ...]]  # start, end, kind, parts of a _GROUP


@register("section")
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
        front = _FRONT_MATTER_OPEN.match(text)
        if front is not None:
            close = _FRONT_MATTER_CLOSE.search(text, front.end() - 1)
            if close is not None:
                fences.append((0, close.end()))
                fence_starts.append(0)
                skip_to = close.end()
        # One pass over the candidate lines. In a document of many short sections this loop
        # runs about once per section, so the path of a section that fits is kept inline.
        match_line = _STRUCT_LINE.match
        candidates = _STRUCT_CANDIDATE.finditer(text, skip_to)
        line_start = 0
        while True:
            m = match_line(text, line_start) if line_start >= skip_to else None
            if m is not None:
                hashes_start, hashes_end = m.span(1)
                if hashes_start >= 0:
                    title = text[hashes_end : m.end()].strip()
                    if title.endswith("#"):  # maybe a closing sequence
                        title = _heading_title(title)
                    if title.isascii() and "[" not in title and "<" not in title:
                        slug = _ascii_slug(title)
                    else:
                        slug = github_slug(title)
                    if slug in slugs:
                        slug = _dedupe_slug(slug, slugs)
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
                        skip_to = _closing_fence_end(
                            text, m.end(), text[fence_end - 1], fence_end - m.start(2)
                        )
                        if skip_to < 0:
                            skip_to = n
                        fences.append((line_start, skip_to))
                        fence_starts.append(line_start)
                        # Resume after the fence rather than scan its content a second time.
                        candidates = _STRUCT_CANDIDATE.finditer(text, skip_to)
            candidate = next(candidates, None)
            if candidate is None:
                break
            line_start = candidate.start() + 1
        packer.section_or_preamble(section_start, hash_pos, line_end, n, path, anchor, spans)
        return spans


# --- scanning --------------------------------------------------------------------------------


def _heading_title(raw: str) -> str:
    """A heading's text from its line after the opening #s (see SectionChunker)."""
    title = raw.strip()
    if title.endswith("#"):
        closing = _CLOSING_HASHES.search(title)
        if closing is not None:
            title = title[: closing.start()].rstrip()
    return title


# --- slugs -----------------------------------------------------------------------------------

# Both stop at the next opening bracket, so a long heading full of brackets stays linear.
_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
# Lowercase ASCII: keep letters, digits, "_" and "-"; " " becomes "-"; drop the rest. As
# bytes, because bytes.translate is a plain C loop, ten times faster than str.translate
# with a dict, and this runs once per heading; the table lowercases too (str.lower of ASCII
# only maps A-Z).
_ASCII_SLUG_TABLE = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ ", b"abcdefghijklmnopqrstuvwxyz-")
_ASCII_DROPPED = bytes(c for c in range(128) if not chr(c).isalnum() and chr(c) not in " -_")
# github-slugger keeps letters, marks, Nd and Nl numbers, connector punctuation...
_KEPT_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "Pc"})
# ...and the Alphabetic symbols (circled and squared Latin letters, category So).
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))


def github_slug(title: str) -> str:
    """The anchor GitHub and Docusaurus (github-slugger) give a heading, before
    de-duplication; see :class:`SectionChunker` for the rules."""
    if "[" in title:
        title = _LINK.sub(r"\1", title)
    if "<" in title:
        title = _HTML_TAG.sub("", title)
    text = title.lower()
    if text.isascii():
        return _ascii_slug(text)
    return "".join(ch for ch in text if ch in " -" or _slug_keeps(ch)).replace(" ", "-")


def _ascii_slug(title: str) -> str:
    """github_slug of an ASCII title without links or HTML."""
    return title.encode().translate(_ASCII_SLUG_TABLE, _ASCII_DROPPED).decode()


def _slug_keeps(ch: str) -> bool:
    if unicodedata.category(ch) in _KEPT_CATEGORIES:
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _ALPHABETIC_SYMBOLS)


def _dedupe_slug(base: str, seen: dict[str, int]) -> str:
    """github-slugger's de-duplication of ``base``, a slug already handed out: ``seen`` maps
    each slug handed out so far to the last suffix used with it as a base. The caller
    records the result in ``seen``."""
    slug = base
    while slug in seen:
        seen[base] += 1
        slug = f"{base}-{seen[base]}"
    return slug


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
        first = _NONSPACE.search(self.text, section_start, section_end)
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
        self.feed(hash_pos, rstrip_end(text, hash_pos, min(line_end, end)), _HEADING)
        self._feed_blocks(self._blocks(line_end, end))
        self._emit(path, anchor, spans)

    def _feed_blocks(self, blocks: list[_Block]) -> None:
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
            elif block[2] == _PROSE:
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

    def feed(self, s: int, e: int, kind: int, parts: tuple[_Block, ...] = ()) -> None:
        """Add the unit [s, e) (trimmed, non-empty) to the chunks."""
        start = self.start
        if start >= 0 and (e - start <= self.max_chars if self.char_mode else self.fits(start, e)):
            self.end = e
            self.heading_only = False
        elif kind == _PROSE:  # soft: fill the open chunk unit by unit
            if self.char_mode:
                self._pack_units(s, e, lines=False)
            else:
                for a, b in _prose_units(self.text, s, e):
                    self.feed(a, b, _SENTENCE)
        elif e - s <= self.max_chars if self.char_mode else self.fits(s, e):
            self._close()
            self.start, self.end, self.heading_only = s, e, kind == _HEADING
        elif kind in (_HEADING, _SENTENCE, _LINE):
            self._pieces(s, e)
        elif self.char_mode and kind in (_ITEM, _NESTED, _EQUATION):
            # The same as feeding the children below one by one, a chunk at a time.
            self._pack_units(s, e, lines=kind != _ITEM)
        else:
            for unit in self._children(s, e, kind, parts):
                self.feed(*unit)

    def _children(self, s: int, e: int, kind: int, parts: tuple[_Block, ...]) -> Iterator[_Block]:
        text = self.text
        if kind == _GROUP:
            yield from parts
        elif kind == _ITEM:
            for a, b in _prose_units(text, s, e):
                yield a, b, _SENTENCE, ()
        elif kind == _LIST:
            for a, b in _items(text, s, e):
                yield a, b, _ITEM, ()
        elif kind == _CODE:
            indent = s - text.rfind("\n", 0, s) - 1  # the fence's, 0-3 spaces
            for a, b in _code_parts(text, s, e, _TOP_DEFINITION[indent]):
                yield a, b, _DEFINITIONS, ()
        elif kind == _DEFINITIONS:
            for a, b in _code_parts(text, s, e, _ANY_DEFINITION):
                yield a, b, _NESTED, ()
        else:  # _NESTED, _EQUATION
            for a, b in _lines(text, s, e):
                yield a, b, _LINE, ()

    def _pack_units(self, s: int, e: int, lines: bool) -> None:
        """``feed`` of each unit of [s, e) in turn, in characters, where the units are lines
        if ``lines`` else sentences and paragraphs (see _UNIT_BREAK). The open chunk takes
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
            # up to the bound, such as the lookahead of _LAST_UNIT_END.
            bound = origin + max_chars  # < e
            if text[bound].isspace():
                found = _NONSPACE.search(text, bound, e)
                assert found is not None  # text[e - 1] is not whitespace
                bound = found.start()
            if lines:
                newline = text.rfind("\n", a, bound)
                last = -1 if newline < 0 else rstrip_end(text, a, newline)
            else:
                last = _last_unit_end(text, a, bound)
            if last >= 0:  # the units up to ``last`` fit: the chunk ends there
                self.start, self.end, self.heading_only = origin, last, False
                self._close()
            else:  # the first unit does not fit in the open chunk
                if lines:
                    newline = text.find("\n", a, e)
                    last = e if newline < 0 else rstrip_end(text, a, newline)
                else:
                    last = _first_unit_end(text, a, e)
                if start >= 0 and last - a <= max_chars:
                    self._close()  # it fits alone: it starts the next chunk
                    continue
                self._pieces(a, last)
            after = _NONSPACE.search(text, last, e)
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
            after = _NONSPACE.search(text, cut, e)
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
            space = _SPACE.search(text, a + 1, limit + 1)
            if space is not None:
                last = _LAST_SPACE.match(text, space.start(), limit + 1)
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

    def _blocks(self, lo: int, hi: int) -> list[_Block]:
        """The blocks of [lo, hi), a section body, with equations glued to their prose."""
        text = self.text
        blocks: list[_Block] = []
        equations = False
        pos = lo
        index = bisect_left(self.fence_starts, lo)
        while index < len(self.fences) and self.fences[index][0] < hi:
            fence_start, fence_end = self.fences[index]
            equations |= _region_blocks(text, pos, fence_start, blocks)
            first = fence_start  # the fence's first character, after up to 3 spaces
            while text[first] == " ":
                first += 1
            blocks.append((first, rstrip_end(text, first, min(fence_end, hi)), _CODE, ()))
            pos = fence_end
            index += 1
        equations |= _region_blocks(text, pos, hi, blocks)
        return _glue_equations(blocks, text) if equations else blocks


def _region_blocks(text: str, lo: int, hi: int, out: list[_Block]) -> bool:
    """Append the prose, list and equation blocks of [lo, hi), which holds no fence; return
    whether there was an equation. A prose block runs over blank lines: its paragraphs are
    told apart when it is packed."""
    first = _NONSPACE.search(text, lo, hi)
    if first is None:
        return False
    start = first.start()  # the first non-whitespace character of its line
    kind = _PROSE if text[start] not in _LIST_OR_EQUATION_LEAD else _block_kind(text, start, hi)
    equations = False
    missing: dict[str, int] = {}  # equation closers known to be absent from here to hi
    while True:
        if kind == _EQUATION:
            end = _equation_end(text, start, hi, missing)
            out.append((start, end, _EQUATION, ()))
            equations = True
            after = _NONSPACE.search(text, end, hi)
            if after is None:
                return True
            start = after.start()
            kind = (
                _PROSE
                if text[start] not in _LIST_OR_EQUATION_LEAD
                else _block_kind(text, start, hi)
            )
        elif kind == _LIST:
            pos = start
            while True:  # to the blank line that ends the list
                blank = _BLANK_RUN.search(text, pos, hi)
                if blank is None:
                    out.append((start, rstrip_end(text, start, hi), _LIST, ()))
                    return equations
                next_start = blank.end()  # the next non-whitespace character, if before hi
                if next_start == hi:
                    out.append((start, rstrip_end(text, start, blank.start()), _LIST, ()))
                    return equations
                line_start = text.rfind("\n", 0, next_start) + 1
                if not _LIST_GOES_ON.match(text, line_start, hi):
                    break
                pos = line_start - 1  # an item or an indented line: the list goes on
            out.append((start, rstrip_end(text, start, blank.start()), _LIST, ()))
            start = next_start
            kind = (
                _PROSE
                if text[start] not in _LIST_OR_EQUATION_LEAD
                else _block_kind(text, start, hi)
            )
        else:
            pos = start
            while True:  # to the list or equation that ends the prose
                candidate = _PROSE_CANDIDATE.search(text, pos, hi)
                if candidate is None:
                    out.append((start, rstrip_end(text, start, hi), _PROSE, ()))
                    return equations
                newline, pos = candidate.start(), candidate.end()
                line = _BLOCK_START.match(text, newline + 1, hi)
                if line is None:
                    continue
                marker = line.group(1)
                if marker is None:  # an equation
                    next_start, next_kind = line.end() - 2, _EQUATION
                    break
                # As in CommonMark, only a bullet or "1." / "1)" can interrupt a paragraph;
                # any number starts a list after a blank line.
                if marker[0] in "-*+" or marker[:-1] == "1" or _blank_before(text, newline):
                    next_start, next_kind = line.start(1), _LIST
                    break
            out.append((start, rstrip_end(text, start, newline), _PROSE, ()))
            start, kind = next_start, next_kind


def _block_kind(text: str, start: int, hi: int) -> int:
    """The kind of the block that starts at ``start``, the first non-whitespace character of
    its line. The callers check _LIST_OR_EQUATION_LEAD first: most blocks are prose."""
    line = _BLOCK_START.match(text, text.rfind("\n", 0, start) + 1, hi)
    if line is None:
        return _PROSE
    return _EQUATION if line.start(1) < 0 else _LIST


def _blank_before(text: str, newline: int) -> bool:
    """Whether the line that ends at ``newline`` is blank, as _BLANK_LINE has it."""
    return _BLANK_REST.match(text, text.rfind("\n", 0, newline) + 1, newline + 1) is not None


def _equation_end(text: str, opener: int, hi: int, missing: dict[str, int]) -> int:
    """End of the display equation whose ``$$`` or ``\\[`` is at ``opener``: the end of the
    line holding the closing delimiter, or of the opener's line if there is none before
    ``hi``. ``missing`` remembers failed searches, so many unclosed openers stay linear."""
    delimiter = "$$" if text[opener] == "$" else "\\]"
    closer = -1
    if opener + 2 < missing.get(delimiter, hi):
        closer = text.find(delimiter, opener + 2, hi)
        if closer < 0:
            missing[delimiter] = opener + 2
    line_end = text.find("\n", opener if closer < 0 else closer + 2, hi)
    return rstrip_end(text, opener, hi if line_end < 0 else line_end)


def _glue_equations(blocks: list[_Block], text: str) -> list[_Block]:
    """Merge each run of equations with the prose paragraphs right before and after them."""
    # First split each prose run next to an equation, so that only the paragraph that
    # touches the equation is glued to it.
    split: list[_Block] = []
    n = len(blocks)
    for i, block in enumerate(blocks):
        start, end, kind, _ = block
        if kind != _PROSE:
            split.append(block)
            continue
        if i > 0 and blocks[i - 1][2] == _EQUATION:
            first = _BLANK_LINE.search(text, start, end)
            if first is not None:
                split.append((start, rstrip_end(text, start, first.start()), _PROSE, ()))
                after = _NONSPACE.search(text, first.end(), end)
                assert after is not None  # text[end - 1] is not whitespace
                start = after.start()
        if i + 1 < n and blocks[i + 1][2] == _EQUATION:
            last = _LAST_BLANK_LINE.match(text, start, end)
            if last is not None:
                newline = text.rfind("\n", start, last.end() - 1)  # the blank line's first
                split.append((start, rstrip_end(text, start, newline), _PROSE, ()))
                after = _NONSPACE.search(text, last.end(), end)
                assert after is not None  # text[end - 1] is not whitespace
                start = after.start()
        split.append((start, end, _PROSE, ()))
    out: list[_Block] = []
    i, n = 0, len(split)
    while i < n:
        if split[i][2] != _EQUATION:
            out.append(split[i])
            i += 1
            continue
        parts = [out.pop()] if out and out[-1][2] == _PROSE else []
        while i < n and split[i][2] == _EQUATION:
            parts.append(split[i])
            i += 1
            if i < n and split[i][2] == _PROSE:
                parts.append(split[i])
                i += 1
        if len(parts) == 1:
            out.append(parts[0])
        else:
            out.append((parts[0][0], parts[-1][1], _GROUP, tuple(parts)))
    return out


# --- unit splitters: each yields trimmed, non-empty [start, end) ranges covering every
# --- non-whitespace character of [s, e), where s and e - 1 are not whitespace.


def _prose_units(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    """Sentences and paragraphs (see _UNIT_BREAK)."""
    a = s
    for m in _UNIT_BREAK.finditer(text, s, e):
        yield a, _unit_end(text, a, m)
        a = m.end()
    yield a, e


def _unit_end(text: str, a: int, m: re.Match[str]) -> int:
    """The end of the unit that starts at ``a`` and that the _UNIT_BREAK match ``m`` ends."""
    return m.end(1) if m.start(1) >= 0 else rstrip_end(text, a, m.start())


def _last_unit_end(text: str, a: int, bound: int) -> int:
    """The end of _LAST_UNIT_END.match(text, a, bound), or -1 if it does not match; text[a]
    is not whitespace.

    That regex backtracks from ``bound`` trying both of its branches at every character,
    about an eighth of split's time on the benchmark corpus. Its branches apart, each with
    a tail that starts with a literal, backtrack in C from one occurrence of that literal
    to the next. A match at q depends only on q and ``bound``, so each search starts at the
    latest end found so far: a later end needs a later mark or blank line (closing
    characters are no marks, and a paragraph ends before its blank line)."""
    found = _LAST_PERIOD_END.match(text, a, bound)
    last = a if found is None else found.end()  # every unit end is after a
    for mark, pattern in _LAST_RARE_MARK_END:
        # Most ranges hold no "?" or "!" after the last ".": a C scan for one is cheaper
        # than the backtracking.
        if text.rfind(mark, last, bound) >= 0:
            found = pattern.match(text, last, bound)
            if found is not None:
                last = found.end()
    blank = _LAST_BLANK_LINE.match(text, last, bound)
    if blank is not None:  # the paragraph ends at the last non-whitespace before it
        last = max(last, rstrip_end(text, a, text.rfind("\n", last, blank.end() - 1)))
    return last if last > a else -1


def _first_unit_end(text: str, a: int, e: int) -> int:
    """The end of the unit that starts at ``a`` (not whitespace), as _unit_end gives it for
    _UNIT_BREAK.search(text, a, e), or ``e`` if there is no break.

    _UNIT_BREAK has no literal to search for, so sre tries its branches at every character.
    Apart, each branch starts with a literal that sre skips to in C. The first break gives
    the first end, and one that starts before a sentence end ends before it too (a mark and
    its closing characters hold no whitespace), so later searches stop at the end so far."""
    found = _PERIOD_END.search(text, a, e)
    first = e if found is None else found.end()
    for mark, pattern in _RARE_MARK_END:
        if text.find(mark, a, first) >= 0:
            found = pattern.search(text, a, e)
            if found is not None:
                first = min(first, found.end())
    blank = _BLANK_LINE.search(text, a, first)
    if blank is not None:
        return rstrip_end(text, a, blank.start())
    return first


def _items(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    a = s
    for m in _ITEM_START.finditer(text, s, e):
        yield a, rstrip_end(text, a, m.start())
        marker = _NONSPACE.search(text, m.start(), e)
        assert marker is not None  # the item marker
        a = marker.start()
    yield a, e


def _code_parts(text: str, s: int, e: int, boundary: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    a = s
    for m in boundary.finditer(text, s, e):
        previous_line = max(a, text.rfind("\n", 0, m.start()) + 1)
        if _ATTRIBUTE_LINE.match(text, previous_line, m.start()):
            continue  # a decorator or annotation stays with its definition
        yield a, rstrip_end(text, a, m.start())
        first = _NONSPACE.search(text, m.start(), e)
        assert first is not None  # the keyword
        a = first.start()
    yield a, e


def _lines(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    a = s
    while True:
        newline = text.find("\n", a, e)
        if newline < 0:
            yield a, e
            return
        yield a, rstrip_end(text, a, newline)
        after = _NONSPACE.search(text, newline, e)
        assert after is not None  # text[e - 1] is not whitespace
        a = after.start()
