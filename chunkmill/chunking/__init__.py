"""Chunking strategies, each a pure function of text, plugged in by name."""

from chunkmill.chunking.base import Chunker, Span, available, chars4, make_chunker

__all__ = ["Chunker", "Span", "available", "chars4", "make_chunker"]
