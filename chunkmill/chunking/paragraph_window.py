"""The "paragraph-window" strategy: one chunk per paragraph, for embedding with context.

The chunking and context-window API's "paragraph" strategy keeps every paragraph whole as its
own chunk and embeds it together with text from its neighbours. This module only cuts the
paragraphs; the pipeline builds each chunk's context window from the chunk texts with
:mod:`chunkmill.chunking.context` (previous 500 / next 300 characters by default).
"""

from __future__ import annotations

from chunkmill.chunking.base import Span, TokenCounter, chars4, check_int

# Reused so that "paragraph" means exactly the same thing in both strategies.
from chunkmill.chunking.paragraphs import paragraphs, pieces


class ParagraphWindowChunker:
    """One chunk per paragraph; a paragraph over ``max_chars`` characters is cut into pieces.

    Paragraphs are defined exactly as in the ``paragraph`` strategy
    (:class:`~transforms.chunking.paragraph.ParagraphChunker`): the text between separators
    (a ``"\\n"`` followed by one or more blank lines), trimmed of whitespace, whitespace-only
    paragraphs dropped. A paragraph longer than ``max_chars`` is cut into pieces of at most
    ``max_chars`` as that strategy cuts them: at the last ``"\\n"`` that keeps the piece
    within budget, else at the last whitespace character, else hard at ``max_chars`` (which
    may split a word), each piece trimmed at the cut. Each piece then counts as a paragraph of
    its own.

    The API document says chunk size and overlap are ignored for this strategy, and so they
    are; ``max_chars`` is only a safety cap. Embedding models have input limits (a few
    hundred to a few thousand tokens) and truncate or reject longer input, so one huge
    paragraph, such as a megabyte-long log line, would otherwise be embedded by its first
    few kilobytes only, or fail the batch. The default 8000 characters is about 2000 tokens
    by the characters / 4 estimate; the context window adds at most
    ``prev_chars + next_chars + 10`` characters on top. The cap is in characters, like the
    context budgets, so ``token_counter`` is accepted for the common constructor signature
    but not used. What is embedded is bounded in tokens by the config instead
    (``max_embed_tokens``, 512 by default: :mod:`chunkmill.chunking.fitting` cuts a longer
    paragraph and the context window is narrowed to fit).

    Guarantees, for any ``text`` (besides those of :mod:`chunkmill.chunking.base`):

    * every chunk has ``1 <= len <= max_chars`` characters, and its first and last
      characters are non-whitespace;
    * chunks are disjoint, with strictly increasing starts;
    * a paragraph of at most ``max_chars`` characters is exactly one chunk;
    * ``span.paragraph_index`` is the chunk's position in the output (from 0) and
      ``span.total_paragraphs`` the number of chunks;
    * time and extra memory are linear in ``len(text)``.
    """

    name = "paragraph-window"

    def __init__(self, *, max_chars: int = 8000, token_counter: TokenCounter = chars4) -> None:
        check_int("max_chars", max_chars, 1)
        self.max_chars = max_chars
        self.token_counter = token_counter

    def __repr__(self) -> str:
        return f"ParagraphWindowChunker(max_chars={self.max_chars})"

    def params(self) -> dict[str, int]:
        return {"max_chars": self.max_chars}

    def split(self, text: str) -> list[Span]:
        max_chars = self.max_chars
        units: list[tuple[int, int]] = []
        for start, end in paragraphs(text):
            if end - start <= max_chars:
                units.append((start, end))
            else:
                units.extend(pieces(text, start, end, max_chars))
        total = len(units)  # known only once every paragraph is cut, hence the two passes
        return [
            Span(start, end, paragraph_index=k, total_paragraphs=total)
            for k, (start, end) in enumerate(units)
        ]
