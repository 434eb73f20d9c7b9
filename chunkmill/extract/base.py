"""The contract of every extractor: ``Extracted`` out, or ``ExtractionError`` with a stable
reason code; and ``clean_text``, the step every decoded or parsed text goes through first
(``cleanup.clean_up`` follows it)."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

REASONS: frozenset[str] = frozenset(
    {
        "empty",
        "binary",
        "undecodable",
        "corrupt",
        "encrypted",
        "no_text",
        "unsupported",
        # Set by the isolation and limits around extraction (transforms.isolation).
        "timeout",
        "memory",
        "too_large",
    }
)

# Long enough for an exception's gist, short enough for an errors/ cell read by a person.
_MAX_MESSAGE_CHARS = 300

_NEWLINES = re.compile(r"\r\n?")


class ExtractionError(Exception):
    """A document that cannot be turned into text.

    ``reason`` is one of ``REASONS``: a stable code for the errors/ table. ``message`` is for
    people: one line, at most 300 characters, whitespace collapsed and control characters
    replaced (guaranteed here, whatever the caller passes). It never names the document's
    path, which may be a signed URL; the errors/ row carries the URI separately.

    Raises ``ValueError`` for a reason outside ``REASONS`` (a programming error).
    """

    def __init__(self, reason: str, message: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown extraction error reason {reason!r}")
        self.reason = reason
        self.message = one_line(message)
        super().__init__(self.message)

    def __reduce__(self):
        # The default pickling re-calls __init__ with self.args (the message only); keep both
        # fields so the error survives a trip through a worker subprocess.
        return (type(self), (self.reason, self.message))

    def __repr__(self) -> str:
        return f"ExtractionError({self.reason!r}, {self.message!r})"


@dataclass(frozen=True, slots=True)
class Extracted:
    """One document's text.

    ``text`` is the text chunk offsets refer to; it holds no lone surrogate (so it always
    encodes as UTF-8), no noncharacter and no control character but tab and newline.
    ``format`` is one of ``FORMATS``. For PDFs, ``page_starts[i]`` is the offset in ``text``
    where page ``i`` (0-based) starts: 0 for the first page, increasing (not strictly, an
    empty page may start where the next does); ``None`` for every other format. ``lossy`` is
    true when ``text`` is not an exact decoding of the bytes: the encoding was guessed by a
    detector, or characters (NULs, invalid sequences, lone surrogates) were dropped or
    replaced; the clean-up of every format (``cleanup``) is part of extraction and does not
    make a text lossy. ``outline``: for a PDF with bookmarks, ``(offset, path)`` pairs sorted
    by offset, where ``path`` is the heading path (outermost first) from ``offset`` on;
    ``None`` when the document has none. ``extracted_by``: for a PDF, what read each page,
    ``"text"`` (its text layer) or ``"ocr"``; ``None`` for every other format.
    """

    text: str
    format: str
    page_starts: tuple[int, ...] | None = None
    lossy: bool = False
    # PDFs with an outline (bookmarks): (offset in text, heading path) in offset order.
    outline: tuple[tuple[int, tuple[str, ...]], ...] | None = None
    # PDFs: what read each page's text, "text" (its text layer) or "ocr"; None otherwise.
    extracted_by: tuple[str, ...] | None = None

    def pages_of(self, start: int, end: int) -> tuple[int, int] | None:
        """1-based ``(first_page, last_page)`` covering ``text[start:end]``; ``None`` for a
        document without pages.

        ``end`` is exclusive, so a span ending exactly where a page starts does not reach that
        page. An empty span (``start == end``) maps to the page holding ``start``. Raises
        ``ValueError`` unless ``0 <= start <= end <= len(text)``.
        """
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"span [{start}, {end}) outside text of length {len(self.text)}")
        if self.page_starts is None:
            return None
        # bisect_right - 1 is the 0-based index of the last page starting at or before the
        # offset; with an empty page, that is the later of the pages starting there, i.e. the
        # page whose text holds the character.
        first = bisect_right(self.page_starts, start)
        last = bisect_right(self.page_starts, max(start, end - 1))
        return (first, last)

    def extracted_by_of(self, start: int, end: int) -> str | None:
        """What read the pages of ``text[start:end]``: ``"text"``, ``"ocr"``, or
        ``"text+ocr"`` for a span over pages of both; ``None`` for a document without
        pages."""
        pages = self.pages_of(start, end)
        if pages is None or self.extracted_by is None:
            return None
        found = set(self.extracted_by[pages[0] - 1 : pages[1]])
        return "+".join(sorted(found, reverse=True))

    def section_at(self, offset: int) -> tuple[str, ...] | None:
        """The outline's heading path at ``offset``: ``()`` before the first bookmark,
        ``None`` for a document without an outline."""
        if self.outline is None:
            return None
        index = bisect_right(self.outline, offset, key=lambda entry: entry[0])
        return self.outline[index - 1][1] if index else ()


def normalise_newlines(text: str) -> str:
    # "\r\n" first (one regex alternative), so a CRLF becomes one "\n", not two.
    return _NEWLINES.sub("\n", text) if "\r" in text else text


def clean_text(text: str, *, surrogates: bool = True) -> tuple[str, bool]:
    """``(text, changed)``: newlines normalised, NUL characters dropped, lone surrogates
    replaced by U+FFFD (valid surrogate pairs joined). ``changed`` says whether anything but
    newlines changed. Every extractor's text goes through here: a NUL breaks C readers of
    the Parquet files, and a lone surrogate cannot be encoded as UTF-8 at all. ``surrogates``
    False: the caller knows the text holds none (strict UTF-8 decodes none)."""
    changed = False
    if "\x00" in text:
        text = text.replace("\x00", "")
        changed = True
    if surrogates and _has_surrogates(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        changed = True
    return normalise_newlines(text), changed


def _has_surrogates(text: str) -> bool:
    # UTF-8 cannot encode a surrogate code point, paired or not; the encoder finds one ten
    # times faster than a regular expression does.
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def one_line(message: str) -> str:
    """``message`` on one printable line of at most ``_MAX_MESSAGE_CHARS`` characters."""
    line = " ".join(str(message).split())
    # Control characters other than whitespace (ESC, DEL, C1) could rewrite a terminal or
    # a log line; exception text from a parser can quote bytes of a hostile file.
    line = "".join(c if c.isprintable() else "?" for c in line)
    if len(line) > _MAX_MESSAGE_CHARS:
        line = line[: _MAX_MESSAGE_CHARS - 3] + "..."
    return line
