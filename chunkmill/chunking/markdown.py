"""Markdown structure for section-aware chunking: headings, code fences and front matter,
GitHub-style heading anchors, the blocks of an over-long section (prose, lists, definitions,
code, equations) and the units each block splits into. Offsets only: nothing here packs
chunks (``section.py`` does)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from chunkmill.chunking.base import rstrip_end

# --- document structure: headings and code fences -------------------------------------------

# A line that matters to the section structure: an ATX heading of any level (1-4 open
# sections; 5-6 only take part in anchor de-duplication, as on GitHub) or a code fence
# opener. sre enters its matcher at every "\n" of a "\n"-prefixed pattern, which costs more
# the more the pattern branches, so a plain prefilter finds the candidate lines and the full
# pattern is matched only there (together 3x faster than searching with the full pattern).
STRUCT_CANDIDATE = re.compile(r"\n {0,3}[#`~]")
# Group 1 is a heading's #s, group 2 a fence; the match runs to the end of the line.
STRUCT_LINE = re.compile(r" {0,3}(?:(#{1,6})(?=[ \t]|\r?$)|(`{3,}|~{3,}))[^\n]*", re.M)
# YAML front matter (Docusaurus strips it): "---" on the first line, closed by "---" or "...".
FRONT_MATTER_OPEN = re.compile(r"---[ \t]*\r?\n")
FRONT_MATTER_CLOSE = re.compile(r"\n(?:---|\.\.\.)[ \t]*(?=\r?$)", re.M)
# CommonMark's optional closing sequence: #s preceded by a space or tab, or the whole content.
_CLOSING_HASHES = re.compile(r"(?:^|[ \t])#+$")


# A fence character run that may close a fence: only spaces and tabs may follow it.
_CLOSING_RUN = {
    "`": re.compile(r"(`+)[ \t]*(?=\r?$)", re.M),
    "~": re.compile(r"(~+)[ \t]*(?=\r?$)", re.M),
}


# Three fence characters: a regex for a literal skips through text faster than str.find.
RUN_OF_THREE = {"`": re.compile("```"), "~": re.compile("~~~")}


def closing_fence_end(text: str, pos: int, char: str, length: int) -> int:
    """End of the line that closes a fence opened by ``length`` ``char``s, searching from
    ``pos`` (the opening line's end): up to 3 spaces, at least ``length`` ``char``s, then only
    spaces and tabs. -1 if none does.

    Code lines are short, and a regex entering its matcher at every newline would cost more
    than the rest of the chunking; a run of three fence characters is rare inside code, so
    a search for the literal run jumps from one to the next and only those lines are
    checked."""
    triple, closing_run = RUN_OF_THREE[char], _CLOSING_RUN[char]
    while True:
        at = triple.search(text, pos)
        if at is None:
            return -1
        found = at.start()
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
# see STRUCT_CANDIDATE), and _BLOCK_START then tells what the line starts.
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
TOP_DEFINITION = tuple(re.compile(rf"\n {{{k}}}{_DEFINITION}") for k in range(4))
ANY_DEFINITION = re.compile(rf"\n[ \t]*{_DEFINITION}")
_ATTRIBUTE_LINE = re.compile(r"[ \t]*(?:@[A-Za-z_]|#\[)")
# Prose units end at a sentence end (".", "?" or "!", then any closing quotes or brackets,
# followed by whitespace) or a paragraph end (followed by a blank line). UNIT_BREAK finds
# them forwards: group 1 ends a sentence, else the match starts at the paragraph's newline;
# m.end() is where the next unit starts. LAST_UNIT_END defines the last one before endpos,
# as its match's end. A paragraph ends at its last non-whitespace character even when
# whitespace-only lines that are not blank (a "\r" inside) come before the blank line, hence
# the "\s*?". Both try their branches at every character, which is slow: first_unit_end and
# last_unit_end give the same results with the patterns after them.
_CLOSERS = r"[\"')\]\u2019\u201d\u00bb]*"
_MARK = rf"[.?!]{_CLOSERS}"
UNIT_BREAK = re.compile(rf"({_MARK})\s+|\n[ \t]*\r?\n\s*")
LAST_UNIT_END = re.compile(rf".*(?:{_MARK}(?=\s)|\S(?=\s*?\n[ \t]*\r?\n))", re.DOTALL)
# LAST_UNIT_END's branches apart, the first once per mark character: the tail after ".*"
# starts with a literal in each, so sre backtracks from one occurrence of it to the next in C.
# _LAST_BLANK_LINE also finds the last blank line of a range.
_LAST_PERIOD_END = re.compile(rf".*\.{_CLOSERS}(?=\s)", re.DOTALL)
_LAST_RARE_MARK_END = (
    ("?", re.compile(rf".*\?{_CLOSERS}(?=\s)", re.DOTALL)),
    ("!", re.compile(rf".*!{_CLOSERS}(?=\s)", re.DOTALL)),
)
_LAST_BLANK_LINE = re.compile(r".*\n[ \t]*\r?\n", re.DOTALL)
# UNIT_BREAK's sentence ends apart, searched forwards: each starts with a literal that sre
# finds in C. Its paragraph ends are _BLANK_LINE's matches.
_PERIOD_END = re.compile(rf"\.{_CLOSERS}(?=\s)")
_RARE_MARK_END = (
    ("?", re.compile(rf"\?{_CLOSERS}(?=\s)")),
    ("!", re.compile(rf"!{_CLOSERS}(?=\s)")),
)

NONSPACE = re.compile(r"\S")
SPACE = re.compile(r"\s")
# Matched from a known whitespace position to endpos: ".*" runs to endpos in C and backtracks
# only to the last whitespace character.
LAST_SPACE = re.compile(r".*\s", re.DOTALL)

# Unit kinds. PROSE is "soft": it is split to fill the open chunk. The others are kept whole
# when they fit in a chunk of their own and are otherwise split into the next kind down.
(
    HEADING,
    PROSE,
    SENTENCE,
    LIST,
    ITEM,
    CODE,
    DEFINITIONS,
    NESTED,
    LINE,
    EQUATION,
    GROUP,
) = range(11)

Block = tuple[int, int, int, tuple["Block", ...]]  # start, end, kind, parts of a GROUP


# --- scanning --------------------------------------------------------------------------------


def heading_title(raw: str) -> str:
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
        return ascii_slug(text)
    return "".join(ch for ch in text if ch in " -" or _slug_keeps(ch)).replace(" ", "-")


def ascii_slug(title: str) -> str:
    """github_slug of an ASCII title without links or HTML."""
    return title.encode().translate(_ASCII_SLUG_TABLE, _ASCII_DROPPED).decode()


def _slug_keeps(ch: str) -> bool:
    if unicodedata.category(ch) in _KEPT_CATEGORIES:
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _ALPHABETIC_SYMBOLS)


def dedupe_slug(base: str, seen: dict[str, int]) -> str:
    """github-slugger's de-duplication of ``base``, a slug already handed out: ``seen`` maps
    each slug handed out so far to the last suffix used with it as a base. The caller
    records the result in ``seen``."""
    slug = base
    while slug in seen:
        seen[base] += 1
        slug = f"{base}-{seen[base]}"
    return slug


def region_blocks(text: str, lo: int, hi: int, out: list[Block]) -> bool:
    """Append the prose, list and equation blocks of [lo, hi), which holds no fence; return
    whether there was an equation. A prose block runs over blank lines: its paragraphs are
    told apart when it is packed."""
    first = NONSPACE.search(text, lo, hi)
    if first is None:
        return False
    start = first.start()  # the first non-whitespace character of its line
    kind = PROSE if text[start] not in _LIST_OR_EQUATION_LEAD else _block_kind(text, start, hi)
    equations = False
    missing: dict[str, int] = {}  # equation closers known to be absent from here to hi
    while True:
        if kind == EQUATION:
            end = _equation_end(text, start, hi, missing)
            out.append((start, end, EQUATION, ()))
            equations = True
            after = NONSPACE.search(text, end, hi)
            if after is None:
                return True
            start = after.start()
            kind = (
                PROSE if text[start] not in _LIST_OR_EQUATION_LEAD else _block_kind(text, start, hi)
            )
        elif kind == LIST:
            pos = start
            while True:  # to the blank line that ends the list
                blank = _BLANK_RUN.search(text, pos, hi)
                if blank is None:
                    out.append((start, rstrip_end(text, start, hi), LIST, ()))
                    return equations
                next_start = blank.end()  # the next non-whitespace character, if before hi
                if next_start == hi:
                    out.append((start, rstrip_end(text, start, blank.start()), LIST, ()))
                    return equations
                line_start = text.rfind("\n", 0, next_start) + 1
                if not _LIST_GOES_ON.match(text, line_start, hi):
                    break
                pos = line_start - 1  # an item or an indented line: the list goes on
            out.append((start, rstrip_end(text, start, blank.start()), LIST, ()))
            start = next_start
            kind = (
                PROSE if text[start] not in _LIST_OR_EQUATION_LEAD else _block_kind(text, start, hi)
            )
        else:
            pos = start
            while True:  # to the list or equation that ends the prose
                candidate = _PROSE_CANDIDATE.search(text, pos, hi)
                if candidate is None:
                    out.append((start, rstrip_end(text, start, hi), PROSE, ()))
                    return equations
                newline, pos = candidate.start(), candidate.end()
                line = _BLOCK_START.match(text, newline + 1, hi)
                if line is None:
                    continue
                marker = line.group(1)
                if marker is None:  # an equation
                    next_start, next_kind = line.end() - 2, EQUATION
                    break
                # As in CommonMark, only a bullet or "1." / "1)" can interrupt a paragraph;
                # any number starts a list after a blank line.
                if marker[0] in "-*+" or marker[:-1] == "1" or _blank_before(text, newline):
                    next_start, next_kind = line.start(1), LIST
                    break
            out.append((start, rstrip_end(text, start, newline), PROSE, ()))
            start, kind = next_start, next_kind


def list_blocks(text: str, lo: int, hi: int, out: list[tuple[int, int]]) -> None:
    """Append the ``(start, end)`` of each LIST block of [lo, hi), which holds no fence, as
    ``region_blocks`` finds them."""
    found: list[Block] = []
    region_blocks(text, lo, hi, found)
    out.extend((start, end) for start, end, kind, _ in found if kind == LIST)


def _block_kind(text: str, start: int, hi: int) -> int:
    """The kind of the block that starts at ``start``, the first non-whitespace character of
    its line. The callers check _LIST_OR_EQUATION_LEAD first: most blocks are prose."""
    line = _BLOCK_START.match(text, text.rfind("\n", 0, start) + 1, hi)
    if line is None:
        return PROSE
    return EQUATION if line.start(1) < 0 else LIST


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


def glue_equations(blocks: list[Block], text: str) -> list[Block]:
    """Merge each run of equations with the prose paragraphs right before and after them."""
    # First split each prose run next to an equation, so that only the paragraph that
    # touches the equation is glued to it.
    split: list[Block] = []
    n = len(blocks)
    for i, block in enumerate(blocks):
        start, end, kind, _ = block
        if kind != PROSE:
            split.append(block)
            continue
        if i > 0 and blocks[i - 1][2] == EQUATION:
            first = _BLANK_LINE.search(text, start, end)
            if first is not None:
                split.append((start, rstrip_end(text, start, first.start()), PROSE, ()))
                after = NONSPACE.search(text, first.end(), end)
                assert after is not None  # text[end - 1] is not whitespace
                start = after.start()
        if i + 1 < n and blocks[i + 1][2] == EQUATION:
            last = _LAST_BLANK_LINE.match(text, start, end)
            if last is not None:
                newline = text.rfind("\n", start, last.end() - 1)  # the blank line's first
                split.append((start, rstrip_end(text, start, newline), PROSE, ()))
                after = NONSPACE.search(text, last.end(), end)
                assert after is not None  # text[end - 1] is not whitespace
                start = after.start()
        split.append((start, end, PROSE, ()))
    out: list[Block] = []
    i, n = 0, len(split)
    while i < n:
        if split[i][2] != EQUATION:
            out.append(split[i])
            i += 1
            continue
        parts = [out.pop()] if out and out[-1][2] == PROSE else []
        while i < n and split[i][2] == EQUATION:
            parts.append(split[i])
            i += 1
            if i < n and split[i][2] == PROSE:
                parts.append(split[i])
                i += 1
        if len(parts) == 1:
            out.append(parts[0])
        else:
            out.append((parts[0][0], parts[-1][1], GROUP, tuple(parts)))
    return out


# --- unit splitters: each yields trimmed, non-empty [start, end) ranges covering every
# --- non-whitespace character of [s, e), where s and e - 1 are not whitespace.


def prose_units(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    """Sentences and paragraphs (see UNIT_BREAK)."""
    a = s
    for m in UNIT_BREAK.finditer(text, s, e):
        yield a, unit_end(text, a, m)
        a = m.end()
    yield a, e


def unit_end(text: str, a: int, m: re.Match[str]) -> int:
    """The end of the unit that starts at ``a`` and that the UNIT_BREAK match ``m`` ends."""
    return m.end(1) if m.start(1) >= 0 else rstrip_end(text, a, m.start())


def last_unit_end(text: str, a: int, bound: int) -> int:
    """The end of LAST_UNIT_END.match(text, a, bound), or -1 if it does not match; text[a]
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


def first_unit_end(text: str, a: int, e: int) -> int:
    """The end of the unit that starts at ``a`` (not whitespace), as unit_end gives it for
    UNIT_BREAK.search(text, a, e), or ``e`` if there is no break.

    UNIT_BREAK has no literal to search for, so sre tries its branches at every character.
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


def items(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    a = s
    for m in _ITEM_START.finditer(text, s, e):
        yield a, rstrip_end(text, a, m.start())
        marker = NONSPACE.search(text, m.start(), e)
        assert marker is not None  # the item marker
        a = marker.start()
    yield a, e


def code_parts(text: str, s: int, e: int, boundary: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    a = s
    for m in boundary.finditer(text, s, e):
        previous_line = max(a, text.rfind("\n", 0, m.start()) + 1)
        if _ATTRIBUTE_LINE.match(text, previous_line, m.start()):
            continue  # a decorator or annotation stays with its definition
        yield a, rstrip_end(text, a, m.start())
        first = NONSPACE.search(text, m.start(), e)
        assert first is not None  # the keyword
        a = first.start()
    yield a, e


def lines(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    a = s
    while True:
        newline = text.find("\n", a, e)
        if newline < 0:
            yield a, e
            return
        yield a, rstrip_end(text, a, newline)
        after = NONSPACE.search(text, newline, e)
        assert after is not None  # text[e - 1] is not whitespace
        a = after.start()
