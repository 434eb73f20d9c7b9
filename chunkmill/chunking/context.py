"""Context windows: a chunk's text framed by some text of its neighbours, for embedding.

This implements "Context Window Details" of the chunking and context-window API: the text
embedded for unit ``i`` of a document is the text of the units before it (up to
``prev_chars``), the unit itself, and the text of the units after it (up to ``next_chars``).
The stored chunk text stays the unit alone; only the embedding sees the window. The
functions are independent of the chunking strategy: *units* are any strings in document
order, normally the chunk texts of one document.

Definitions. A *word* is a maximal run of non-whitespace characters (``str.isspace``). The
*joiner* is ``"\\n\\n"``. Empty units carry no text and are skipped everywhere, as if absent.

Previous context ``P`` of unit ``i`` with budget ``prev_chars``: walk units ``i-1``,
``i-2``, ... and prepend each whole unit while the context, with the joiners between its
units, stays within ``prev_chars`` characters. The first unit that does not fit contributes
its longest suffix that fits (after the joiner it needs) and starts at a word start, with
``"..."`` prepended, and the walk stops. If no such suffix exists (no room left, or the room
ends inside a word), that unit contributes nothing and the walk stops too: the context is
always a contiguous tail of the text before the unit.

Next context ``N`` of unit ``i`` with budget ``next_chars``: the mirror image over units
``i+1``, ``i+2``, ..., keeping the longest prefix that ends at a word end, with ``"..."``
appended.

Window text: ``"\\n\\n".join`` of the non-empty parts among ``P``, the unit, ``N``.

Budget accounting, chosen so that a budget is a bound on context characters drawn from the
document: the joiners *between context units* count against the budget; the ``"..."`` and
the joiners that attach ``P`` and ``N`` to the unit do not. Hence

* ``len(P) <= prev_chars``, or ``len(P) <= prev_chars + 3`` when a unit was truncated (and
  only then does ``P`` get the ``"..."``); likewise for ``N`` and ``next_chars``;
* ``len(window.text) <= len(unit) + prev_chars + next_chars + 10``;
* ``P`` without its ``"..."`` is a suffix of ``"\\n\\n".join`` of the non-empty units before
  ``i``, and ``N`` without its ``"..."`` a prefix of the join of those after it;
* ``has_prev`` is ``P != ""`` and ``has_next`` is ``N != ""``, i.e. true iff at least one
  character of context was included; a budget of 0 gives no context at all, so
  ``prev_chars = next_chars = 0`` gives ``text == unit`` and both flags false.

Fitting a token limit (:func:`fitted_context_windows`). An embedder takes at most so many
tokens, so a window may be narrowed to fit ``max_tokens`` as a token counter counts its text.
The unit is never touched: only the budgets shrink, both in proportion, to
``(prev_chars * s // total, next_chars * s // total)`` for a share ``s`` in ``[0, total]``,
``total = prev_chars + next_chars``; the window is then built by the rules above, so its
``"..."`` markers and ``has_prev``/``has_next`` describe the context it really holds. A
window that fits at full budgets is kept as it is; otherwise ``s`` is found by bisection:
the window at ``s`` fits and the one at ``s + 1`` does not (where counts grow with the
budget, as they nearly do, it is the largest ``s`` that fits). If the unit alone does not
fit, it gets no context.

Truncating at word boundaries rather than at the exact budget keeps fragments such as
``"ation."`` out of the embedded text; a context never starts or ends inside a word of a
truncated unit. Units are used verbatim otherwise: chunk texts are never whitespace-only,
so no other trimming is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

JOINER = "\n\n"
ELLIPSIS = "..."


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The text to embed for one unit, and whether context was found on either side."""

    # Previous context + "\n\n" + the unit + "\n\n" + next context, omitting empty parts.
    text: str
    has_prev: bool
    has_next: bool


def build_context_window(
    texts: Sequence[str], index: int, prev_chars: int, next_chars: int
) -> ContextWindow:
    """The context window of ``texts[index]``; see the module docstring for the contract.

    Raises ``ValueError`` for a negative or non-int budget and ``IndexError`` unless
    ``0 <= index < len(texts)``. Time is linear in the output size plus the number of empty
    units skipped; use :func:`context_windows` for every unit of a document.
    """
    _check_budgets(prev_chars, next_chars)
    if not 0 <= index < len(texts):
        raise IndexError(f"index {index} out of range for {len(texts)} units")
    before = (texts[j] for j in range(index - 1, -1, -1))
    after = (texts[j] for j in range(index + 1, len(texts)))
    return _window(
        texts[index], _prev_context(before, prev_chars), _next_context(after, next_chars)
    )


def context_windows(texts: Sequence[str], prev_chars: int, next_chars: int) -> list[ContextWindow]:
    """``[build_context_window(texts, i, prev_chars, next_chars) for i in range(len(texts))]``,
    in time linear in ``len(texts)`` plus the output size.

    Each window reads only the units it includes plus the one where its budget ran out, so
    the total work is bounded by the output however large the document; empty units are
    indexed away once instead of being skipped again by every window.
    """
    _check_budgets(prev_chars, next_chars)
    nonempty = [j for j in range(len(texts)) if texts[j]]
    windows: list[ContextWindow] = []
    p = 0  # the number of non-empty units before unit i, so nonempty[p] >= i
    for i in range(len(texts)):
        while p < len(nonempty) and nonempty[p] < i:
            p += 1
        after_start = p + 1 if p < len(nonempty) and nonempty[p] == i else p
        before = (texts[nonempty[k]] for k in range(p - 1, -1, -1))
        after = (texts[nonempty[k]] for k in range(after_start, len(nonempty)))
        windows.append(
            _window(texts[i], _prev_context(before, prev_chars), _next_context(after, next_chars))
        )
    return windows


def fitted_context_windows(
    texts: Sequence[str],
    prev_chars: int,
    next_chars: int,
    count_tokens: Callable[[str], int],
    max_tokens: int,
) -> list[tuple[ContextWindow, int]]:
    """:func:`context_windows`, each window narrowed until ``count_tokens(window.text) <=
    max_tokens`` (see "Fitting a token limit" in the module docstring), with that count.

    Every window is counted once, as the caller needs its count anyway; only those over the
    limit cost more: a bisection over the share of the budgets, a count per step.
    """
    fitted: list[tuple[ContextWindow, int]] = []
    for index, window in enumerate(context_windows(texts, prev_chars, next_chars)):
        tokens = count_tokens(window.text)
        if tokens > max_tokens and (window.has_prev or window.has_next):
            window, tokens = _narrowed(
                texts, index, prev_chars, next_chars, count_tokens, max_tokens, tokens
            )
        fitted.append((window, tokens))
    return fitted


def fitted_budgets(
    texts: Sequence[str],
    index: int,
    prev_chars: int,
    next_chars: int,
    count_tokens: Callable[[str], int],
    max_tokens: int,
) -> tuple[int, int]:
    """The budgets ``(prev, next)`` that :func:`fitted_context_windows` builds the window of
    ``texts[index]`` with."""
    _check_budgets(prev_chars, next_chars)
    window = build_context_window(texts, index, prev_chars, next_chars)
    tokens = count_tokens(window.text)
    if tokens <= max_tokens or not (window.has_prev or window.has_next):
        return prev_chars, next_chars
    share = _fitted_share(texts, index, prev_chars, next_chars, count_tokens, max_tokens, tokens)
    return _shares(prev_chars, next_chars, share)


def _shares(prev_chars: int, next_chars: int, share: int) -> tuple[int, int]:
    total = prev_chars + next_chars
    return prev_chars * share // total, next_chars * share // total


def _narrowed(
    texts: Sequence[str],
    index: int,
    prev_chars: int,
    next_chars: int,
    count_tokens: Callable[[str], int],
    max_tokens: int,
    tokens: int,
) -> tuple[ContextWindow, int]:
    share = _fitted_share(texts, index, prev_chars, next_chars, count_tokens, max_tokens, tokens)
    window = build_context_window(texts, index, *_shares(prev_chars, next_chars, share))
    return window, count_tokens(window.text)


def _fitted_share(
    texts: Sequence[str],
    index: int,
    prev_chars: int,
    next_chars: int,
    count_tokens: Callable[[str], int],
    max_tokens: int,
    tokens: int,
) -> int:
    """The share ``s`` of the budgets: the window at ``s`` fits or ``s`` is 0, and the one at
    ``s + 1`` does not. ``tokens`` counts the window at full budgets, which does not fit."""
    lo, hi = 0, prev_chars + next_chars
    lo_tokens, hi_tokens = count_tokens(texts[index]), tokens
    if lo_tokens > max_tokens:
        return 0
    slow = 0  # probes in a row that did not halve the bracket
    while hi - lo > 1:
        width = hi - lo
        if slow >= 2:
            share = (lo + hi) // 2
        else:  # counts grow about linearly with the context: aim where they reach the limit
            share = lo + (hi - lo) * (max_tokens - lo_tokens) // max(hi_tokens - lo_tokens, 1)
            share = min(max(share, lo + 1), hi - 1)
        window = build_context_window(texts, index, *_shares(prev_chars, next_chars, share))
        counted = count_tokens(window.text)
        if counted <= max_tokens:
            lo, lo_tokens = share, counted
        else:
            hi, hi_tokens = share, counted
        slow = slow + 1 if 2 * (hi - lo) > width else 0
    return lo


def _check_budgets(prev_chars: int, next_chars: int) -> None:
    for key, value in (("prev_chars", prev_chars), ("next_chars", next_chars)):
        # bool is an int subclass; a True from a sloppy config must not mean 1.
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{key} must be an int, got {value!r}")
        if value < 0:
            raise ValueError(f"{key} must be >= 0, got {value}")


def _window(main: str, prev: str, next_: str) -> ContextWindow:
    text = JOINER.join(part for part in (prev, main, next_) if part)
    return ContextWindow(text, has_prev=bool(prev), has_next=bool(next_))


def _prev_context(units: Iterable[str], budget: int) -> str:
    """The previous context from ``units``, nearest first."""
    whole, cut = _context_parts(units, budget, _tail_from_word_start)
    if cut:
        whole.append(ELLIPSIS + cut)
    whole.reverse()
    return JOINER.join(whole)


def _next_context(units: Iterable[str], budget: int) -> str:
    """The next context from ``units``, nearest first."""
    whole, cut = _context_parts(units, budget, _head_to_word_end)
    if cut:
        whole.append(cut + ELLIPSIS)
    return JOINER.join(whole)


def _context_parts(
    units: Iterable[str], budget: int, cut: Callable[[str, int], str]
) -> tuple[list[str], str]:
    """What a context takes of ``units`` (nearest first) within ``budget`` characters, a
    joiner counted between two parts: the whole units that fit, nearest first, and then
    ``cut(unit, room)`` of the first unit that does not (``""`` if none was cut)."""
    whole: list[str] = []
    room = budget
    for unit in units:
        if not unit:
            continue
        if whole:
            room -= len(JOINER)
        if room <= 0:  # checked before touching the unit: a spent budget reads no further
            break
        if len(unit) > room:
            return whole, cut(unit, room)
        whole.append(unit)
        room -= len(unit)
    return whole, ""


def _tail_from_word_start(unit: str, room: int) -> str:
    """The longest suffix of ``unit`` of at most ``room`` characters that starts at a word
    start, or ``""``; requires ``0 < room < len(unit)``. Costs O(room)."""
    cut = len(unit) - room
    tail = unit[cut:]
    if unit[cut - 1].isspace() or tail[0].isspace():  # the cut is not inside a word
        return tail.lstrip()
    # Drop the rest of the word the cut went through, and the whitespace after it.
    rest = tail.split(None, 1)
    return rest[1] if len(rest) == 2 else ""


def _head_to_word_end(unit: str, room: int) -> str:
    """The longest prefix of ``unit`` of at most ``room`` characters that ends at a word
    end, or ``""``; requires ``0 < room < len(unit)``. Costs O(room)."""
    head = unit[:room]
    if unit[room].isspace() or head[-1].isspace():  # the cut is not inside a word
        return head.rstrip()
    # Drop the start of the word the cut went through, and the whitespace before it.
    rest = head.rsplit(None, 1)
    return rest[0] if len(rest) == 2 else ""
