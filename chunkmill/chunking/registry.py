"""The chunking strategies by name: ``make_chunker``, ``available``, ``strategy_parameters``.

This module imports every strategy; the strategies import only the contract
(:mod:`chunkmill.chunking.base`) and the helpers beside it, so the imports form no circle.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from chunkmill.chunking.base import Chunker
from chunkmill.chunking.paragraph import ParagraphChunker
from chunkmill.chunking.paragraph_window import ParagraphWindowChunker
from chunkmill.chunking.recursive import RecursiveChunker
from chunkmill.chunking.section import SectionChunker
from chunkmill.chunking.semantic import SemanticChunker
from chunkmill.chunking.sentence import SentenceChunker

STRATEGIES: dict[str, Callable[..., Chunker]] = {
    strategy.name: strategy
    for strategy in (
        ParagraphChunker,
        ParagraphWindowChunker,
        RecursiveChunker,
        SectionChunker,
        SemanticChunker,
        SentenceChunker,
    )
}


def available() -> list[str]:
    """Names of the strategies, sorted."""
    return sorted(STRATEGIES)


def strategy_parameters(name: str) -> frozenset[str]:
    """The keyword parameters strategy ``name`` takes, besides ``token_counter``."""
    signature = inspect.signature(STRATEGIES[name])
    return frozenset(
        p.name
        for p in signature.parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.name != "token_counter"
    )


def make_chunker(name: str, **params: Any) -> Chunker:
    """Build the strategy ``name`` with ``params`` (``None`` values mean "the default").

    Raises ``ValueError`` for an unknown name or an invalid parameter.
    """
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"unknown chunking strategy {name!r}; choose one of {', '.join(available())}"
        ) from None
    given = {k: v for k, v in params.items() if v is not None}
    try:
        return factory(**given)
    except TypeError as e:  # an unexpected keyword for this strategy
        raise ValueError(f"strategy {name!r}: {e}") from None
