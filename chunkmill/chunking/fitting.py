"""Fitting a strategy's chunks to the embedder: no chunk over the embedding limit, no tiny
chunk where a neighbour can take it.

:class:`FittedChunker` wraps any strategy and post-processes its spans, measured exactly with
the config's token counter:

1. **Cut.** A chunk whose text alone has more than ``max_embed_tokens`` tokens is cut into
   pieces that fit, as ``paragraph`` cuts an over-long paragraph: at the last ``"\\n"`` that
   keeps the piece within the limit, else at the last whitespace, else hard. Only the
   character-sized strategies (``sentence``, ``recursive``, ``paragraph-window``) can make
   such a chunk: their size is in characters and a tokenizer may count more tokens than the
   size suggests (code, numbers, non-Latin scripts). A token-sized strategy (``paragraph``,
   ``section``) is never cut: the config keeps its ``max_tokens`` within
   ``max_embed_tokens`` (:mod:`chunkmill.config` lowers the default, refuses a larger
   value given). Cutting rather than refusing: a limit in tokens cannot be checked against
   a size in characters before the text is seen.
2. **Merge.** A chunk of fewer than ``min_chunk_tokens`` tokens is joined to the previous
   chunk, or, if that does not fit, to the next one, when the joined chunk still fits the
   strategy's own limit (``max_tokens`` tokens, or ``chunk_size``/``max_chars``
   characters) and ``max_embed_tokens``; otherwise it stays as it is. A joined chunk is
   the contiguous slice from the first chunk's start to the second's end, so it is a slice
   of the text like any chunk. Joins repeat: a run of tiny chunks may become one.
   Section boundaries hold (``section`` chunks carry ``section_path``): a chunk joins only
   a chunk of its own section, with one exception. A section that is too small on its own
   (in practice a heading with nothing under it before its first subsection, ``# FAQ``
   then ``## Access``) joins the first chunk of the section right after it when that is one
   of its subsections: the joined chunk takes the subsection's ``section_path`` and anchor,
   and that path lists the parent's heading too, so it still names every heading in the
   chunk. Joining a sibling or a parent would give a path that misses one; the text before
   the first heading (no path) joins nothing after it.
3. **Renumber.** ``section_chunk_index`` and ``paragraph_index``/``total_paragraphs`` are
   recomputed for the chunks that result.

The third limit, that the text with its context window fits ``max_embed_tokens``, is the
context window's (:func:`chunkmill.chunking.context.fitted_context_windows`).

With ``keep_structure``, the strategy and the cuts above see the text through
:func:`chunkmill.chunking.structure.masked`: a code fence, table or list that fits a chunk
(the strategy's own limit and ``max_embed_tokens``) is never cut, and one that does not is
cut at its own lines. The strategy must then count with
:class:`~chunkmill.chunking.structure.Unmasking` (``chunkmill.config`` builds it so).

The contract of :mod:`chunkmill.chunking.base` holds for the result: cutting and joining
keep chunks trimmed slices in document order with strictly increasing starts and ends, and
no overlap larger than the strategy's. A piece cut from an overlapping chunk that lies inside
the next chunk adds nothing and is dropped. A chunk never gets empty, so a single character
that alone counts over ``max_embed_tokens`` (all-MiniLM-L6-v2 counts any character as at
most 5 tokens with ``[CLS]`` and ``[SEP]``) stays a chunk over the limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from chunkmill.chunking.base import (
    CHARS_PER_TOKEN,
    Chunker,
    Span,
    TokenCounter,
    chars4,
    chars4_of_length,
    check_int,
)
from chunkmill.chunking.paragraphs import pieces
from chunkmill.chunking.structure import Fits, Unmasking, masked
from chunkmill.chunking.token_split import TokenSplit

# How a strategy's size parameter is read: a limit in tokens of the token counter...
TOKEN_LIMIT_PARAM = "max_tokens"
# ...or in characters.
CHAR_LIMIT_PARAMS = ("chunk_size", "max_chars")


class FittedChunker:
    """``chunker``'s spans, cut to ``max_embed_tokens`` and with chunks under
    ``min_chunk_tokens`` merged (0: never); see the module docstring. Implements
    :class:`~transforms.chunking.base.Chunker`: ``params()`` are the strategy's plus these
    two, since both shape the output."""

    def __init__(
        self,
        chunker: Chunker,
        *,
        max_embed_tokens: int,
        min_chunk_tokens: int,
        token_counter: TokenCounter = chars4,
        keep_structure: bool = False,
    ) -> None:
        check_int("max_embed_tokens", max_embed_tokens, 1)
        check_int("min_chunk_tokens", min_chunk_tokens, 0)
        self.chunker = chunker
        self.name = chunker.name
        self.max_embed_tokens = max_embed_tokens
        self.min_chunk_tokens = min_chunk_tokens
        self.token_counter = token_counter
        self.keep_structure = keep_structure
        # What counts a masked copy's slices: the counter itself where counts are lengths.
        self._masked_counter = (
            token_counter if token_counter is chars4 else Unmasking(token_counter)
        )
        inner = chunker.params()
        self._max_tokens: int | None = inner.get(TOKEN_LIMIT_PARAM)
        self._max_chars: int | None = next(
            (inner[p] for p in CHAR_LIMIT_PARAMS if p in inner), None
        )
        # A strategy whose own limit in tokens is within max_embed_tokens never needs a cut.
        self._may_cut = self._max_tokens is None or self._max_tokens > max_embed_tokens

    def __repr__(self) -> str:
        return (
            f"FittedChunker({self.chunker!r}, max_embed_tokens={self.max_embed_tokens}, "
            f"min_chunk_tokens={self.min_chunk_tokens})"
        )

    def params(self) -> Mapping[str, Any]:
        return {
            **self.chunker.params(),
            "max_embed_tokens": self.max_embed_tokens,
            "min_chunk_tokens": self.min_chunk_tokens,
        }

    def split(self, text: str) -> list[Span]:
        return self.split_counted(text)[0]

    def split_counted(self, text: str) -> tuple[list[Span], list[int] | None]:
        """``split(text)``, and the token count of each chunk's text where fitting had to
        count them (None where it did not), so that a caller need not count them again."""
        work = masked(text, self._fits_in(text)) if self.keep_structure else text
        spans = self.chunker.split(work)
        if not spans or not (self._may_cut or self.min_chunk_tokens):
            return spans, None
        measure = _Measure(work, self.token_counter if work is text else self._masked_counter)
        if measure.by_length:
            counts = [chars4_of_length(s.end - s.start) for s in spans]
        else:
            counts = [measure.tokens(s.start, s.end) for s in spans]
        changed = False
        if self._may_cut and max(counts) > self.max_embed_tokens:
            spans, counts = self._cut(text, spans, counts, measure)
            changed = True
        if self.min_chunk_tokens and min(counts) < self.min_chunk_tokens:
            merged, counts = self._merge(spans, counts, measure)
            changed = changed or len(merged) != len(spans)
            spans = merged
        return (renumber(spans) if changed else spans), counts

    def _fits_in(self, text: str) -> Fits:
        """Whether ``text[start:end]`` fits a chunk on its own: the strategy's limit and
        ``max_embed_tokens``. Where counts are lengths, one comparison of lengths."""
        limit = self.max_embed_tokens
        if self._max_tokens is not None:
            limit = min(limit, self._max_tokens)
        counter = self.token_counter
        # chars4: chars4_of_length(size) <= limit. No tokenizer reads 16 characters as one
        # token on average: a longer text is spared the count.
        longest = limit * (CHARS_PER_TOKEN if counter is chars4 else 16)
        if self._max_chars is not None:
            longest = min(longest, self._max_chars)
        if counter is chars4:
            return lambda start, end: end - start <= longest
        return lambda start, end: end - start <= longest and counter(text[start:end]) <= limit

    # -- cut ------------------------------------------------------------------------------

    def _cut(
        self, text: str, spans: list[Span], counts: list[int], measure: _Measure
    ) -> tuple[list[Span], list[int]]:
        limit = self.max_embed_tokens
        out: list[tuple[Span, int]] = []
        for span, n in zip(spans, counts, strict=True):
            if n <= limit:
                out.append((span, n))
                continue
            for start, end, pieces_n in _cut_pieces(text, span.start, span.end, n, limit, measure):
                out.append((span._replace(start=start, end=end), pieces_n))
        # A piece of an overlapping chunk may start after the next chunk does; it then lies
        # inside that chunk (ends increase), adds nothing, and would break the order.
        out.sort(key=lambda pair: (pair[0].start, -pair[0].end))
        kept: list[tuple[Span, int]] = []
        for pair in out:
            if not kept or pair[0].end > kept[-1][0].end:
                kept.append(pair)
        return [s for s, _ in kept], [n for _, n in kept]

    # -- merge ----------------------------------------------------------------------------

    def _merge(
        self, spans: list[Span], counts: list[int], measure: _Measure
    ) -> tuple[list[Span], list[int]]:
        minimum = self.min_chunk_tokens
        out: list[Span] = []
        out_n: list[int] = []
        for span, n in zip(spans, counts, strict=True):
            if out and n < minimum and _same_section(out[-1], span):
                joined = self._join(out[-1], span, out[-1], measure)
                if joined is not None:
                    out[-1], out_n[-1] = joined
                    continue
            if out and out_n[-1] < minimum and _may_join_next(out[-1], span):
                joined = self._join(out[-1], span, span, measure)
                if joined is not None:
                    out[-1], out_n[-1] = joined
                    continue
            out.append(span)
            out_n.append(n)
        return out, out_n

    def _join(
        self, first: Span, second: Span, meta: Span, measure: _Measure
    ) -> tuple[Span, int] | None:
        """``first`` through ``second`` as one chunk with ``meta``'s metadata, and its
        tokens; None if it does not fit."""
        start, end = first.start, second.end
        if self._max_chars is not None and end - start > self._max_chars:
            return None
        n = measure.tokens(start, end)
        if n > self.max_embed_tokens or (self._max_tokens is not None and n > self._max_tokens):
            return None
        return meta._replace(start=start, end=end), n


class _Measure:
    """Tokens of slices of one text: with ``chars4`` from the length alone, without a copy."""

    def __init__(self, text: str, counter: TokenCounter) -> None:
        self.text = text
        self.counter = counter
        self.by_length = counter is chars4

    def tokens(self, start: int, end: int) -> int:
        if self.by_length:
            return chars4_of_length(end - start)
        return self.counter(self.text[start:end])


def _cut_pieces(
    text: str, start: int, end: int, n: int, limit: int, measure: _Measure
) -> Iterator[tuple[int, int, int]]:
    """``(start, end, tokens)`` of the pieces of the chunk [start, end) of ``n`` > ``limit``
    tokens, as ``paragraph`` cuts an over-long paragraph."""
    if measure.by_length:
        for a, b in pieces(text, start, end, limit * CHARS_PER_TOKEN):
            yield a, b, chars4_of_length(b - a)
        return
    split = TokenSplit(text, measure.counter, limit, 0)
    for a, b, content in split.pieces(start, end, n - split.base):
        yield a, b, content + split.base


def _section(span: Span) -> tuple[Any, Any]:
    return span.section_path, span.section_anchor


def _same_section(a: Span, b: Span) -> bool:
    """Whether two chunks of one document lie in the same section (always, for strategies
    without sections)."""
    return _section(a) == _section(b)


def _may_join_next(a: Span, b: Span) -> bool:
    """Whether ``a`` may join the chunk ``b`` after it: same section, or ``a`` is the whole
    of a section and ``b`` the first chunk of one of its subsections."""
    if _same_section(a, b):
        return True
    if a.section_path is None or b.section_path is None or a.section_anchor is None:
        return False
    # a is whole when it is its section's first chunk and the next chunk is in another.
    return (
        a.section_chunk_index == 0
        and b.section_chunk_index == 0
        and len(b.section_path) > len(a.section_path)
        and b.section_path[: len(a.section_path)] == a.section_path
    )


def renumber(spans: list[Span]) -> list[Span]:
    """``spans`` with the positional metadata recomputed: ``section_chunk_index`` counts
    within each run of one section, ``paragraph_index``/``total_paragraphs`` over the
    document. Fields a strategy leaves ``None`` stay ``None``."""
    out: list[Span] = []
    total = len(spans)
    previous: Span | None = None
    index = 0
    for k, span in enumerate(spans):
        if span.section_chunk_index is not None:
            same = previous is not None and _same_section(previous, span)
            index = index + 1 if same else 0
            span = span._replace(section_chunk_index=index)
        if span.paragraph_index is not None:
            span = span._replace(paragraph_index=k, total_paragraphs=total)
        out.append(span)
        previous = span
    return out
