"""Markdown structure kept whole by the strategies that cut at whitespace and punctuation
(``paragraph``, ``sentence``, ``recursive``): code fences, tables and lists.

Those strategies find their cuts with patterns over the text (blank lines, line ends,
sentence marks, spaces). :func:`masked` gives them a copy of the text, of the same length,
in which every such character inside a block that fits a chunk is replaced by a stand-in that
no pattern matches (an ASCII control character, or a private-use one). Offsets are the same
in both texts, so the spans the strategy finds in the copy are spans of the text, and no cut
falls inside a block that fits: such a block lies whole in a chunk. A block that does not
fit is masked line by line instead, each line that fits on its own in the same way, so it is
cut at its own lines (and a line alone over the budget where the strategy cuts any text).
Token counts are taken on the text itself: :class:`Unmasking` wraps a token counter so that
it counts what a copy's slice stands for.

A *block* is:

* a code fence: from a line opening with three or more backticks or tildes (indented up to
  three spaces) to the line closing it, or to the end of the text when none does;
* a table: a delimiter row (``|---|:--:|``, pipes and dashes with optional colons) with the
  header line above it and every non-blank line below it that holds a ``|``;
* a list: as the ``section`` strategy reads it (:func:`chunkmill.chunking.markdown.region_blocks`),
  from a line starting with a marker (``-``, ``*``, ``+``, ``1.``, ``1)``) to the blank line
  after which no item or indented line goes on.

Blocks that overlap are one block. A text holding a stand-in character already (a control
character such as U+0001, or one of that private-use range) is left as it is: its counts
could not be told from a masked copy's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from chunkmill.chunking.base import TokenCounter, rstrip_end
from chunkmill.chunking.markdown import NONSPACE, RUN_OF_THREE, closing_fence_end, list_blocks

# Stand-ins: ASCII control characters that are neither whitespace nor sentence marks for the
# ASCII characters the strategies cut at (str.translate has a fast path from ASCII to ASCII),
# and for other whitespace chr(_WIDE_STAND_IN + ord(c)), in Supplementary Private Use Area-A,
# which no Unicode text assigns (all whitespace lies below U+3001).
_ASCII_CUTS = "".join(c for c in map(chr, range(128)) if c.isspace()) + ".?!"
_ASCII_STAND_INS = "".join(map(chr, [*range(0x01, 0x09), *range(0x0E, 0x13)]))
_WIDE_CUTS = "".join(c for c in map(chr, range(128, 0x3001)) if c.isspace())
_WIDE_STAND_IN = 0xF0000
_UNMASK = str.maketrans(_ASCII_STAND_INS, _ASCII_CUTS)
_MASK_WIDE = str.maketrans({c: chr(_WIDE_STAND_IN + ord(c)) for c in _WIDE_CUTS})
_UNMASK_WIDE = str.maketrans({chr(_WIDE_STAND_IN + ord(c)): c for c in _WIDE_CUTS})
_WIDE_SPACE = re.compile(r"[^\S\x00-\x7f]")
_HAS_WIDE_STAND_IN = re.compile("[\U000f0000-\U000f3000]")
# A regex walks a text a character at a time; its UTF-8 bytes are walked by C. An ASCII
# character is its own single byte in UTF-8 and no byte of another character's is below
# 0x80, so the ASCII stand-ins and cut characters are found and replaced in the bytes
# exactly. The wide stand-ins (U+F0000..U+F3000) all start with the lead byte F3 and the
# wide whitespace with C2 (U+0085, U+00A0), E1 (U+1680), E2 (U+2000..U+205F) or E3
# (U+3000): a text without those bytes holds none, and needs no regex.
_ASCII_STAND_IN_BYTES = _ASCII_STAND_INS.encode()
_MASK_BYTES = bytes.maketrans(_ASCII_CUTS.encode(), _ASCII_STAND_IN_BYTES)
_UNMASK_BYTES = bytes.maketrans(_ASCII_STAND_IN_BYTES, _ASCII_CUTS.encode())
_WIDE_STAND_IN_LEAD = b"\xf3"
_WIDE_SPACE_LEADS = (b"\xc2", b"\xe1", b"\xe2", b"\xe3")

# Matched at a line's start, found by _next_fence_line (a "^" pattern under re.M is tried at
# every position).
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})[^\n]*")
_FENCE_RUNS = (RUN_OF_THREE["`"], RUN_OF_THREE["~"])
# A delimiter row holds a "|" then a dash (after blanks and a colon): the candidate to look
# for, matched in full (_DELIMITER_ROW) from its line's start.
_ROW_CANDIDATE = re.compile(r"\|[ \t]*:?-")
_DELIMITER_ROW = re.compile(
    r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*\r?$"
    r"|^ {0,3}\|[ \t]*:?-+:?[ \t]*\|[ \t]*\r?$",
    re.M,
)

# The lines below a delimiter row that hold a "|" (so are not blank), from the row's end.
_ROWS_BELOW = re.compile(r"(?:\n[^\n|]*\|[^\n]*)*")

# A block's measure against the budget: True when the range [start, end) fits a chunk.
Fits = Callable[[int, int], bool]


def blocks(text: str) -> list[tuple[int, int]]:
    """The trimmed ``(start, end)`` of every fence, table and list of ``text``, in order,
    overlapping ones merged."""
    fences = _fences(text)
    lists: list[tuple[int, int]] = []  # trimmed already
    gap = 0
    for start, end in fences:
        if start > gap:
            list_blocks(text, gap, start, lists)
        gap = end
    if len(text) > gap:
        list_blocks(text, gap, len(text), lists)
    found = _trimmed(text, fences)
    tables = _tables(text)
    if tables:
        found += _trimmed(text, tables)
    if lists:
        found += lists
    if len(found) < 2:
        return found
    return _merged(found)


def _tables(text: str) -> list[tuple[int, int]]:
    """Every table, in order: a line holding a ``|`` is looked at only if it holds a
    delimiter row's candidate, and a table's lines are stepped over once it is found."""
    out: list[tuple[int, int]] = []
    pos = 0
    while True:
        # A regex walks text a character at a time and str.find does not: the walk goes
        # from one line holding a "|" to the next, which most texts hold few of outside
        # their tables. A delimiter row among a table's lines below would make a table
        # inside this one (its header is a line above it and its rows run to the same
        # line without a "|"), so those lines are not looked at.
        pos = text.find("|", pos)
        if pos < 0:
            return out
        line_end = text.find("\n", pos)
        if line_end < 0:
            line_end = len(text)
        candidate = _ROW_CANDIDATE.search(text, pos, line_end)
        if candidate is not None:
            row = _DELIMITER_ROW.match(text, text.rfind("\n", 0, candidate.start()) + 1)
            if row is not None:
                out.append(_table(text, row.start(), row.end()))
                pos = out[-1][1]
                continue
        pos = line_end


def _trimmed(text: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` trimmed of whitespace at both ends, those of whitespace only dropped."""
    out: list[tuple[int, int]] = []
    for start, end in ranges:
        if text[start].isspace():
            first = NONSPACE.search(text, start, end)
            if first is None:
                continue
            start = first.start()
        out.append((start, rstrip_end(text, start, end)))
    return out


def _table(text: str, row_start: int, row_end: int) -> tuple[int, int]:
    """The table around the delimiter row [row_start, row_end): its header line above and
    the non-blank lines holding a ``|`` below."""
    header = text.rfind("\n", 0, max(row_start - 1, 0)) + 1 if row_start else row_start
    if "|" not in text[header:row_start]:
        header = row_start
    rows = _ROWS_BELOW.match(text, row_end)
    assert rows is not None  # it matches the empty string
    return header, rows.end()


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Trimmed ranges in order, those that overlap or touch joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def masked(text: str, fits: Fits) -> str:
    """``text`` with the cut characters inside each block that ``fits`` replaced by
    stand-ins, and inside a block that does not, those of each of its lines that fits (its
    indentation and line end left as they are); ``text`` itself when there is nothing to
    mask."""
    if "\n" not in text:
        return text
    found = blocks(text)
    if not found:
        return text
    copy = _masked_whole(text)
    if copy is None:
        return text
    # Masking is character by character: the copy's slices are the blocks' masked parts.
    parts: list[str] = []
    done = 0
    for start, end in found:
        parts.append(text[done:start])
        if fits(start, end):
            parts.append(copy[start:end])
        else:
            parts.append(_masked_lines(text, copy, start, end, fits))
        done = end
    parts.append(text[done:])
    return "".join(parts)


def _masked_whole(text: str) -> str | None:
    """All of ``text`` masked, or None when it holds a stand-in already.

    One ``bytes.translate`` does it: an ASCII character is one byte of the same value in
    ASCII, Latin-1 and UTF-8 alike, and no byte of another character is below 0x80, so the
    ASCII cut characters are replaced, and the stand-ins found (as the bytes it deletes), in
    the text's bytes exactly. A text of ASCII or Latin-1 characters only (as CPython stores
    most texts, one byte a character) is encoded and decoded as Latin-1, a plain copy; any
    other as UTF-8. Wide whitespace (in Latin-1, U+0085 and U+00A0) needs ``str.translate``:
    see ``_WIDE_SPACE_LEADS``."""
    try:
        data, codec = text.encode("latin-1"), "latin-1"
    except UnicodeEncodeError:
        data, codec = text.encode("utf-8", "surrogatepass"), "utf-8"
    copy_data = data.translate(_MASK_BYTES, _ASCII_STAND_IN_BYTES)
    if len(copy_data) != len(data):
        return None  # an ASCII stand-in already
    if codec == "latin-1":
        wide = b"\x85" in data or b"\xa0" in data
    else:
        if _WIDE_STAND_IN_LEAD in data and _HAS_WIDE_STAND_IN.search(text):
            return None
        wide = any(lead in data for lead in _WIDE_SPACE_LEADS)
    copy = copy_data.decode(codec, "surrogatepass")
    if wide and _WIDE_SPACE.search(copy):
        copy = copy.translate(_MASK_WIDE)
    return copy


def _masked_lines(text: str, copy: str, start: int, end: int, fits: Fits) -> str:
    """The block [start, end) that does not fit, each of its trimmed lines that fits taken
    from ``copy``, the rest from ``text``."""
    parts: list[str] = []
    line_start = start
    while line_start < end:
        line_end = text.find("\n", line_start, end)
        if line_end < 0:
            line_end = end
        first = NONSPACE.search(text, line_start, line_end)
        if first is None:
            parts.append(text[line_start:line_end])
        else:
            last = rstrip_end(text, first.start(), line_end)
            inner = copy if fits(first.start(), last) else text
            parts += [
                text[line_start : first.start()],
                inner[first.start() : last],
                text[last:line_end],
            ]
        if line_end < end:
            parts.append("\n")
        line_start = line_end + 1
    return "".join(parts)


def unmasked(text: str) -> str:
    """A masked copy (or a slice of one) as the text it stands for."""
    if text.isascii():
        return text.translate(_UNMASK)
    data = text.encode("utf-8", "surrogatepass")
    text = data.translate(_UNMASK_BYTES).decode("utf-8", "surrogatepass")
    if _WIDE_STAND_IN_LEAD in data and _HAS_WIDE_STAND_IN.search(text):
        text = text.translate(_UNMASK_WIDE)
    return text


class Unmasking:
    """``counter`` counting what a masked copy's slice stands for (see the module
    docstring), so that a strategy measures the text, not the copy. Pickles as its counter
    does."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def __call__(self, text: str) -> int:
        return self.counter(unmasked(text))

    def __repr__(self) -> str:
        return f"Unmasking({self.counter!r})"


# An ATX heading line (levels 1 to 6): group 1 its #s, group 2 its title.
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\r?$", re.M)
# CommonMark's optional closing sequence of #s.
_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")


def heading_paths(text: str, starts: list[int]) -> list[tuple[str, ...]]:
    """The Markdown heading path (outermost first) in effect at each of ``starts`` (in
    order): the ATX headings outside code fences that begin at or before it."""
    fences = _fences(text)
    events: list[tuple[int, int, str]] = []
    fence = 0
    for m in _HEADING.finditer(text):
        while fence < len(fences) and fences[fence][1] <= m.start():
            fence += 1
        if fence < len(fences) and fences[fence][0] <= m.start():
            continue
        title = _CLOSING.sub("", (m.group(2) or "").strip()).strip()
        if title:
            events.append((m.start(), len(m.group(1)), title))
    paths: list[tuple[str, ...]] = []
    levels: list[tuple[int, str]] = []
    k = 0
    for start in starts:
        while k < len(events) and events[k][0] <= start:
            _, level, title = events[k]
            while levels and levels[-1][0] >= level:
                levels.pop()
            levels.append((level, title))
            k += 1
        paths.append(tuple(title for _, title in levels))
    return paths


def _fences(text: str) -> list[tuple[int, int]]:
    """Every code fence: from its opening line to the end of its closing line (or of the
    text); a backtick run with a backtick after it on its line is inline code."""
    out: list[tuple[int, int]] = []
    runs = _FENCE_RUNS if "~" in text else _FENCE_RUNS[:1]  # most texts hold no "~"
    pos = 0
    while True:
        m = _FENCE.match(text, pos) if pos == 0 else None
        if m is None:
            line_start = _next_fence_line(text, pos, runs)
            if line_start < 0:
                return out
            m = _FENCE.match(text, line_start)
            assert m is not None  # a fence line's start
        run = m.group(1)
        if run[0] == "`" and "`" in text[m.end(1) : m.end()]:
            pos = m.end()
            continue
        end = closing_fence_end(text, m.end(), run[0], len(run))
        if end < 0:
            end = len(text)
        out.append((m.start(), end))
        pos = max(end, m.end() + 1)


def _next_fence_line(text: str, pos: int, runs: tuple[re.Pattern[str], ...]) -> int:
    """The start of the first line after a newline, at or after ``pos``, that opens with up
    to three spaces then a run of ``runs`` (three backticks, three tildes); -1 if none does.

    A regex for a literal run skips through the text twice as fast as one tried at every
    newline (or than ``str.find``); only the lines holding a run are looked at, each once."""
    found = -1
    for run in runs:
        at = pos
        end = len(text) if found < 0 else found
        while True:
            k = run.search(text, at, end)
            if k is None:
                break
            start = k.start()
            line_start = text.rfind("\n", 0, start) + 1
            indent = start - line_start
            if (
                line_start >= max(pos, 1)
                and indent <= 3
                and text.startswith(" " * indent, line_start)
            ):
                found = line_start
                break
            at = text.find("\n", start)  # no other run on this line opens a fence
            if at < 0:
                break
    return found
