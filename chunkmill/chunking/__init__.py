"""Chunking strategies, each a pure function of text, chosen by name."""

from chunkmill.chunking.base import Chunker, Span, chars4
from chunkmill.chunking.registry import available, make_chunker

__all__ = ["Chunker", "Span", "available", "chars4", "make_chunker"]
