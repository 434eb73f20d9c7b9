"""The chunker contract and the helpers every strategy shares; the strategies by name are
:mod:`chunkmill.chunking.registry`.

A chunker is a pure function of a document's text: it returns spans, never copies, so the
offset contract holds by construction::

    chunk_text == text[span.start:span.end]

Every strategy guarantees, for any input ``text``:

* ``0 <= span.start < span.end <= len(text)`` and ``text[span.start:span.end].strip() != ""``;
* spans come in document order (``start`` non-decreasing);
* every non-whitespace character of ``text`` lies inside at least one span;
* the output depends on ``text`` and the chunker's parameters only (no randomness).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

TokenCounter = Callable[[str], int]

# The default token estimate: characters / 4.
CHARS_PER_TOKEN = 4


def chars4(text: str) -> int:
    """The default token estimate: one token per four characters, rounded up."""
    return chars4_of_length(len(text))


def chars4_of_length(length: int) -> int:
    """``chars4`` of a text of ``length`` characters."""
    return (length + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class ParameterError(ValueError):
    """A bad parameter value or combination of values, naming the parameters to change.

    The message is a ``str.format`` template in which named fields are parameter names
    (``"{overlap_tokens}"``) and positional fields are values (``"{0}"``), so that each
    caller can spell the parameters its own way: ``str(error)`` names them as the Python API
    takes them (``overlap_tokens``), and :meth:`render` as a caller's table says (the CLI maps
    each to its flag, ``--overlap-tokens``). The chunkers and the config know parameter names
    only; which flag sets a parameter is the CLI's business.
    """

    def __init__(self, template: str, *values: object) -> None:
        self.template = template
        self.values = values
        self.params = tuple(
            dict.fromkeys(
                field
                for _, field, _, _ in string.Formatter().parse(template)
                if field and not field.isdigit()
            )
        )
        super().__init__(self.render({}))

    def render(self, names: Mapping[str, str]) -> str:
        """The message with each parameter spelt ``names[param]`` (the parameter's own name
        where ``names`` has none)."""
        return self.template.format(*self.values, **{p: names.get(p, p) for p in self.params})


def check_int(name: str, value: object, minimum: int) -> None:
    """Raise ``ParameterError`` unless ``value`` is an int of at least ``minimum``."""
    # bool is an int subclass; a True from a sloppy config must not mean 1.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParameterError(f"{{{name}}} must be an int, got {{0!r}}", value)
    if value < minimum:
        raise ParameterError(f"{{{name}}} must be at least {minimum}, got {{0}}", value)


def check_less(smaller: str, small: int, larger: str, large: int) -> None:
    """Raise ``ParameterError`` unless ``small < large``, naming both parameters and what to
    do about it."""
    if small >= large:
        raise ParameterError(
            f"{{{smaller}}} ({{0}}) must be less than {{{larger}}} ({{1}}); "
            f"lower {{{smaller}}} or raise {{{larger}}}",
            small,
            large,
        )


class Span(NamedTuple):
    """One chunk as a half-open character range ``[start, end)`` of the document text, with
    the structural metadata its strategy knows (``None`` where a strategy has none).

    A named tuple, not a frozen dataclass: chunkers make one per chunk, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) costs several times more.
    """

    start: int
    end: int
    # Markdown heading path at the chunk's position, outermost first ("section" strategy).
    section_path: tuple[str, ...] | None = None
    # URL fragment of the innermost section, slugged as GitHub and Docusaurus do.
    section_anchor: str | None = None
    # Index of the chunk within its section, from 0.
    section_chunk_index: int | None = None
    # "paragraph-window": the paragraph's index and the document's paragraph count.
    paragraph_index: int | None = None
    total_paragraphs: int | None = None


class Chunker(Protocol):
    """What every strategy implements. Constructors take keyword-only parameters and raise
    ``ParameterError`` (a ``ValueError`` naming the parameters) on invalid ones, so a bad
    config fails at graph-build time. A size parameter is called ``max_tokens`` when it is in
    tokens of ``token_counter`` and ``chunk_size`` or ``max_chars`` when it is in characters
    (:mod:`chunkmill.chunking.fitting` reads a strategy's limit by these names). Every
    constructor accepts ``token_counter: TokenCounter = chars4``; a strategy whose limit is
    in tokens measures chunks with it (and, when it is ``chars4``, may work in characters,
    which is the same thing and faster). ``token_counter`` is not part of ``params()``."""

    name: str

    def params(self) -> Mapping[str, Any]:
        """The parameters that shape the output; they go into the config fingerprint."""
        ...

    def split(self, text: str) -> list[Span]:
        """Chunk ``text``; see the module docstring for the guarantees."""
        ...


def rstrip_end(text: str, lo: int, hi: int) -> int:
    """The end of ``text[lo:hi]`` once trailing whitespace is dropped; ``text[lo]`` must not
    be whitespace. Every strategy trims its chunks with this, so a chunk never ends in
    whitespace, without copying the chunk to find out."""
    # Trailing runs are usually "", "\n" or "\n\n" (before a blank line): check three
    # characters one by one. As text[lo] is not whitespace, each one checked is at or after lo.
    if not text[hi - 1].isspace():
        return hi
    if not text[hi - 2].isspace():
        return hi - 1
    if not text[hi - 3].isspace():
        return hi - 2
    # A longer run: doubling windows keep even a megabyte of spaces linear without copying
    # the whole range.
    width = 16
    while True:
        window_start = max(lo, hi - width)
        kept = len(text[window_start:hi].rstrip())
        if kept or window_start == lo:
            return window_start + kept
        hi = window_start
        width *= 2
