"""The overlap a packing strategy carries from one chunk into the next, as an offset."""

from __future__ import annotations

from chunkmill.chunking.paragraphs import SPACE_THEN_WORD


def overlap_start(
    text: str, prev_end: int, unit_start: int, unit_end: int, *, overlap: int, size: int
) -> int:
    """Where the chunk that opens with the unit ``[unit_start, unit_end)`` starts, the
    previous chunk ending at ``prev_end``: at the first word start of the window it may carry
    over, else at ``unit_start``.

    The window is at most ``overlap`` characters before ``prev_end`` and leaves the chunk
    within ``size`` characters. A caller comes here only when the unit does not fit in the
    previous chunk (``unit_end - prev_start > size``), so the window begins after the previous
    chunk's start and the new chunk starts strictly later. A window with no word start is the
    tail of one word: a fragment such as "ation." adds noise, not context, so none is carried.
    """
    low = max(prev_end - overlap, unit_end - size)
    if low >= prev_end:
        return unit_start
    word = SPACE_THEN_WORD.search(text, low - 1, prev_end)
    return unit_start if word is None else word.end() - 1
