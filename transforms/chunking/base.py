"""The chunker contract and the registry that plugs strategies in by name.

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

TokenCounter = Callable[[str], int]

# ADR-0006 estimates tokens as characters / 4.
CHARS_PER_TOKEN = 4


def chars4(text: str) -> int:
    """ADR-0006's token estimate: one token per four characters, rounded up."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class Span:
    """One chunk as a half-open character range ``[start, end)`` of the document text."""

    start: int
    end: int


class Chunker(Protocol):
    """What every strategy implements. Constructors take keyword-only parameters and raise
    ``ValueError`` on invalid ones, so a bad config fails at graph-build time."""

    name: str

    def params(self) -> Mapping[str, Any]:
        """The parameters that shape the output; they go into the config fingerprint."""
        ...

    def split(self, text: str) -> list[Span]:
        """Chunk ``text``; see the module docstring for the guarantees."""
        ...


_REGISTRY: dict[str, Callable[..., Chunker]] = {}


def register(name: str) -> Callable[[Callable[..., Chunker]], Callable[..., Chunker]]:
    """Class decorator: make a strategy available to ``make_chunker(name, ...)``."""

    def wrap(factory: Callable[..., Chunker]) -> Callable[..., Chunker]:
        if name in _REGISTRY:
            raise ValueError(f"chunking strategy {name!r} registered twice")
        _REGISTRY[name] = factory
        return factory

    return wrap


def available() -> list[str]:
    """Names of the registered strategies, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def make_chunker(name: str, **params: Any) -> Chunker:
    """Build the strategy ``name`` with ``params`` (``None`` values mean "the default").

    Raises ``ValueError`` for an unknown name or an invalid parameter.
    """
    _load_builtins()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown chunking strategy {name!r}; choose one of {', '.join(available())}"
        ) from None
    given = {k: v for k, v in params.items() if v is not None}
    try:
        return factory(**given)
    except TypeError as e:  # an unexpected keyword for this strategy
        raise ValueError(f"strategy {name!r}: {e}") from None


def _load_builtins() -> None:
    # Importing the strategy modules registers them; done lazily to avoid an import cycle.
    from transforms.chunking import paragraph  # noqa: F401
