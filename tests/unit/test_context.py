"""Tests for the strategy-independent context windows of ``chunkmill.chunking.context``."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import overload

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill.chunking import chars4
from chunkmill.chunking.context import (
    ContextWindow,
    build_context_window,
    context_windows,
    fitted_budgets,
    fitted_context_windows,
)
from chunkmill.chunking.tokens import load_token_counter

ELLIPSIS = "..."

# --- an oracle written independently of the implementation ---------------------------------
#
# For units without leading or trailing whitespace, the greedy walk of the contract has a
# declarative equivalent: joined with "\n\n" (whitespace), unit starts and ends are word starts
# and ends of the joined text, so the previous context is the longest suffix of the joined
# previous units within budget that starts at a word start, with "..." iff that start is not
# the start of a unit; the next context mirrors it.


def _is_word_start(text: str, k: int) -> bool:
    return not text[k].isspace() and (k == 0 or text[k - 1].isspace())


def _is_word_end(text: str, k: int) -> bool:
    return not text[k - 1].isspace() and (k == len(text) or text[k].isspace())


def _unit_bounds(units: list[str]) -> tuple[str, set[int], set[int]]:
    """The units joined with "\\n\\n", and the offsets where units start and end."""
    starts, ends, offset = set(), set(), 0
    for unit in units:
        starts.add(offset)
        ends.add(offset + len(unit))
        offset += len(unit) + 2
    return "\n\n".join(units), starts, ends


def reference_prev(texts: Sequence[str], index: int, budget: int) -> str:
    joined, starts, _ = _unit_bounds([t for t in texts[:index] if t])
    for k in range(max(0, len(joined) - budget), len(joined)):
        if _is_word_start(joined, k):
            return ("" if k in starts else ELLIPSIS) + joined[k:]
    return ""


def reference_next(texts: Sequence[str], index: int, budget: int) -> str:
    joined, _, ends = _unit_bounds([t for t in texts[index + 1 :] if t])
    for k in range(min(budget, len(joined)), 0, -1):
        if _is_word_end(joined, k):
            return joined[:k] + ("" if k in ends else ELLIPSIS)
    return ""


def reference_window(texts: Sequence[str], index: int, prev: int, next_: int) -> ContextWindow:
    p, n = reference_prev(texts, index, prev), reference_next(texts, index, next_)
    text = "\n\n".join(part for part in (p, texts[index], n) if part)
    return ContextWindow(text, has_prev=bool(p), has_next=bool(n))


# --- reading the parts back out of a window -------------------------------------------------


def prev_part(texts: Sequence[str], index: int, prev_chars: int) -> str:
    """The previous context alone: with no next context the window is P + "\\n\\n" + main."""
    window = build_context_window(texts, index, prev_chars, 0)
    main = texts[index]
    assert not window.has_next
    if not window.has_prev:
        assert window.text == main
        return ""
    if not main:
        return window.text
    assert window.text.endswith("\n\n" + main)
    return window.text[: len(window.text) - len(main) - 2]


def next_part(texts: Sequence[str], index: int, next_chars: int) -> str:
    window = build_context_window(texts, index, 0, next_chars)
    main = texts[index]
    assert not window.has_prev
    if not window.has_next:
        assert window.text == main
        return ""
    if not main:
        return window.text
    assert window.text.startswith(main + "\n\n")
    return window.text[len(main) + 2 :]


def check_window(texts: Sequence[str], index: int, prev_chars: int, next_chars: int) -> None:
    """The guarantees of the module docstring, for units of any shape."""
    window = build_context_window(texts, index, prev_chars, next_chars)
    main = texts[index]
    p = prev_part(texts, index, prev_chars)
    n = next_part(texts, index, next_chars)
    assert window == ContextWindow(
        "\n\n".join(x for x in (p, main, n) if x), has_prev=bool(p), has_next=bool(n)
    )
    assert len(window.text) <= len(main) + prev_chars + next_chars + 10

    # P is a suffix of the units before, joined, maybe behind "..."; N a prefix of the units
    # after, maybe followed by "...". A unit may itself start or end with "...", so either
    # reading may hold, but one must, within budget.
    before = "\n\n".join(t for t in texts[:index] if t)
    assert (len(p) <= prev_chars and before.endswith(p)) or (
        p.startswith(ELLIPSIS) and 0 < len(p) - 3 <= prev_chars and before.endswith(p[3:])
    ), (before, p)
    after = "\n\n".join(t for t in texts[index + 1 :] if t)
    assert (len(n) <= next_chars and after.startswith(n)) or (
        n.endswith(ELLIPSIS) and 0 < len(n) - 3 <= next_chars and after.startswith(n[:-3])
    ), (after, n)


# --- edge cases -----------------------------------------------------------------------------

A, B, C = "alpha beta", "gamma delta", "epsilon zeta"  # 10, 11 and 12 characters


@pytest.mark.parametrize(
    ("texts", "index", "prev_chars", "next_chars", "expected"),
    [
        pytest.param([A], 0, 500, 300, (A, False, False), id="single-unit"),
        pytest.param([A, B, C], 1, 0, 0, (B, False, False), id="zero-budgets-give-main-only"),
        pytest.param(
            [A, B, C], 1, 500, 300, (f"{A}\n\n{B}\n\n{C}", True, True), id="both-sides-fit"
        ),
        pytest.param([A, B, C], 0, 500, 0, (A, False, False), id="first-unit-has-no-prev"),
        pytest.param([A, B, C], 2, 0, 500, (C, False, False), id="last-unit-has-no-next"),
        pytest.param([A, B, C], 2, 23, 0, (f"{A}\n\n{B}\n\n{C}", True, False), id="prev-exact-fit"),
        pytest.param([A, B, C], 0, 0, 25, (f"{A}\n\n{B}\n\n{C}", False, True), id="next-exact-fit"),
        # 22 = 11 + 2 + 9: the joiner counts, so A does not fit; its last word does.
        pytest.param(
            [A, B, C], 2, 22, 0, (f"...beta\n\n{B}\n\n{C}", True, False), id="prev-joiner-counts"
        ),
        pytest.param(
            [A, B, C], 0, 0, 24, (f"{A}\n\n{B}\n\nepsilon...", False, True), id="next-joiner-counts"
        ),
        # After B, 1 or 2 characters remain: not even room for the joiner, so stop without "...".
        pytest.param([A, B, C], 2, 12, 0, (f"{B}\n\n{C}", True, False), id="prev-budget-in-joiner"),
        pytest.param([A, B, C], 2, 13, 0, (f"{B}\n\n{C}", True, False), id="prev-budget-at-joiner"),
        pytest.param([A, B, C], 2, 11, 0, (f"{B}\n\n{C}", True, False), id="prev-budget-spent"),
        pytest.param([A, B, C], 0, 0, 12, (f"{A}\n\n{B}", False, True), id="next-budget-in-joiner"),
        # A truncation keeps whole words only: with room for "a delta", "...delta"; a room
        # inside one word keeps nothing of that unit.
        pytest.param(
            [A, B, C], 2, 7, 0, (f"...delta\n\n{C}", True, False), id="prev-snaps-to-word"
        ),
        pytest.param(
            [A, B, C], 0, 0, 9, (f"{A}\n\ngamma...", False, True), id="next-snaps-to-word"
        ),
        pytest.param([A, B, C], 2, 4, 0, (C, False, False), id="prev-room-inside-one-word"),
        pytest.param([A, B, C], 0, 0, 4, (A, False, False), id="next-room-inside-one-word"),
        pytest.param(["x" * 50, "y"], 1, 10, 0, ("y", False, False), id="giant-word-not-cut"),
        pytest.param(["a bc", "y"], 1, 3, 0, ("...bc\n\ny", True, False), id="cut-after-space"),
        pytest.param(["ab c", "y"], 1, 1, 0, ("...c\n\ny", True, False), id="cut-at-word-start"),
        pytest.param(["y", "ab c"], 0, 0, 2, ("y\n\nab...", False, True), id="next-cut-at-space"),
        pytest.param(
            ["a\n\n\nb", "y"], 1, 3, 0, ("...b\n\ny", True, False), id="cut-in-whitespace"
        ),
        pytest.param([A, "", "", B], 3, 12, 0, (f"{A}\n\n{B}", True, False), id="empty-units-skip"),
        pytest.param(["", A], 0, 100, 100, (A, False, True), id="empty-main-is-omitted"),
        pytest.param([A, "", B], 1, 100, 100, (f"{A}\n\n{B}", True, True), id="empty-main-joins"),
        pytest.param(["", ""], 1, 100, 100, ("", False, False), id="all-empty"),
        # Identical units: offsets play no part, the units are taken by position.
        pytest.param(["same"] * 4, 1, 4, 4, ("same\n\nsame\n\nsame", True, True), id="repeated"),
    ],
)
def test_edge_cases(
    texts: list[str],
    index: int,
    prev_chars: int,
    next_chars: int,
    expected: tuple[str, bool, bool],
) -> None:
    window = build_context_window(texts, index, prev_chars, next_chars)
    assert (window.text, window.has_prev, window.has_next) == expected
    assert context_windows(texts, prev_chars, next_chars)[index] == window
    check_window(texts, index, prev_chars, next_chars)


def test_the_api_documents_example() -> None:
    texts = [
        "First paragraph about the beginning.",
        "Second paragraph with action.",
        "Third paragraph concluding.",
    ]
    window = build_context_window(texts, 1, 500, 300)
    assert window == ContextWindow("\n\n".join(texts), has_prev=True, has_next=True)


def test_long_neighbours_are_truncated_toward_the_unit() -> None:
    words = [f"w{i:03d}" for i in range(400)]  # 4 characters each, 5 with the space
    before, after = " ".join(words), " ".join(reversed(words))
    window = build_context_window([before, "MAIN", after], 1, 500, 300)
    assert window.has_prev and window.has_next
    prev, next_ = window.text.split("\n\nMAIN\n\n")
    # Previous context: the end of the unit before; next context: the start of the one after.
    assert prev == "..." + " ".join(words[-100:])  # 100 words = 499 characters
    assert next_ == " ".join(reversed(words[-60:])) + "..."  # 60 words = 299 characters


@pytest.mark.parametrize(
    ("prev_chars", "next_chars"),
    [(-1, 0), (0, -1), (-5, -5), (1.0, 0), (0, "3"), (True, 0), (0, None)],
)
def test_invalid_budgets_raise(prev_chars: object, next_chars: object) -> None:
    with pytest.raises(ValueError):
        build_context_window(["a", "b"], 0, prev_chars, next_chars)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        context_windows(["a", "b"], prev_chars, next_chars)  # type: ignore[arg-type]


@pytest.mark.parametrize(("texts", "index"), [([], 0), (["a"], 1), (["a"], -1), (["a", "b"], 5)])
def test_index_out_of_range_raises(texts: list[str], index: int) -> None:
    with pytest.raises(IndexError):
        build_context_window(texts, index, 10, 10)


def test_no_units_give_no_windows() -> None:
    assert context_windows([], 500, 300) == []


def test_window_is_immutable_and_picklable() -> None:
    window = build_context_window(["a b", "c", "d e"], 1, 10, 10)
    with pytest.raises(AttributeError):
        window.text = "x"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(window)) == window


# --- work stays linear ----------------------------------------------------------------------


class CountingSequence(Sequence[str]):
    """A sequence that counts reads of its items."""

    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            raise AssertionError("context_windows must not copy slices of the units")
        self.reads += 1
        return self.items[i]

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self.items)):
            yield self[i]


def _unit(i: int, layout: str) -> str:
    if layout == "half-empty":
        return "" if i % 2 else "ab"
    if layout == "long-empty-runs":  # 998 empty units between two non-empty ones
        return "ab" if i % 1000 >= 998 else ""
    return "ab"


@pytest.mark.parametrize("layout", ["no-empties", "half-empty", "long-empty-runs"])
def test_context_windows_reads_each_unit_a_bounded_number_of_times(layout: str) -> None:
    # "ab" units cost 4 characters with their joiner, so a 40-character budget reaches at most
    # 11 units per side (10 included, 1 truncated or refused). A window that rescanned the
    # document, or skipped the same run of empty units again for every index, reads O(n^2).
    n = 20_000
    items = [_unit(i, layout) for i in range(n)]
    texts = CountingSequence(items)
    windows = context_windows(texts, 40, 40)
    assert len(windows) == n
    assert texts.reads <= n * (2 + 11 + 11)
    for i in (0, 1, 997, 998, 999, n // 2, n - 1):
        assert windows[i] == build_context_window(items, i, 40, 40)


# --- properties -----------------------------------------------------------------------------

_WORDS = st.sampled_from(["a", "bb", "word", "éclair", "日本語", "🙂", "x" * 12, ".", "-"])
_SPACES = st.sampled_from([" ", "  ", "\n", "\n\n", "\t", "\u3000", "\r\n"])
# Units as a chunker returns them: non-empty, no leading or trailing whitespace.
_TRIMMED = st.lists(_WORDS, min_size=1, max_size=8).flatmap(
    lambda ws: st.lists(_SPACES, min_size=len(ws) - 1, max_size=len(ws) - 1).map(
        lambda ss: "".join(w + s for w, s in zip(ws, [*ss, ""], strict=True))
    )
)
# Units of any shape, including empty and whitespace-only ones.
_ANY = st.one_of(_TRIMMED, st.text(max_size=12), st.sampled_from(["", " ", "\n\n", " a ", "..."]))
BUDGETS = st.integers(0, 60)


@st.composite
def _case(draw: st.DrawFn, units: st.SearchStrategy[str]) -> tuple[list[str], int]:
    texts = draw(st.lists(units, min_size=1, max_size=10))
    if draw(st.booleans()):  # repeated text
        texts = texts * draw(st.integers(2, 3))
    return texts, draw(st.integers(0, len(texts) - 1))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case(_TRIMMED), prev_chars=BUDGETS, next_chars=BUDGETS)
def test_matches_the_oracle_for_chunk_like_units(
    case: tuple[list[str], int], prev_chars: int, next_chars: int
) -> None:
    texts, index = case
    window = build_context_window(texts, index, prev_chars, next_chars)
    assert window == reference_window(texts, index, prev_chars, next_chars)
    check_window(texts, index, prev_chars, next_chars)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case(_ANY), prev_chars=BUDGETS, next_chars=BUDGETS)
def test_guarantees_hold_for_any_units(
    case: tuple[list[str], int], prev_chars: int, next_chars: int
) -> None:
    texts, index = case
    check_window(texts, index, prev_chars, next_chars)
    windows = context_windows(texts, prev_chars, next_chars)
    assert windows == [
        build_context_window(texts, i, prev_chars, next_chars) for i in range(len(texts))
    ]
    assert context_windows(tuple(texts), prev_chars, next_chars) == windows  # deterministic


@settings(max_examples=300, deadline=None)
@given(case=_case(_TRIMMED), budget=BUDGETS, more=st.integers(1, 30))
def test_a_larger_budget_never_gives_less_context(
    case: tuple[list[str], int], budget: int, more: int
) -> None:
    texts, index = case

    def core(part: str, prev: bool) -> str:
        return part.removeprefix(ELLIPSIS) if prev else part.removesuffix(ELLIPSIS)

    for prev in (True, False):
        part = prev_part if prev else next_part
        small = core(part(texts, index, budget), prev)
        large = core(part(texts, index, budget + more), prev)
        assert len(small) <= len(large)
        assert large.endswith(small) if prev else large.startswith(small)


# --- fitting a token limit ------------------------------------------------------------------

_MINILM = load_token_counter("all-minilm-l6-v2")
_COUNTERS = {"chars4": chars4, "all-minilm-l6-v2": _MINILM}
_PROSE = [
    "The compactor merges small files every night.",
    "Disk usage on the nodes climbed past eighty percent after the backfill started.",
    "Alerts fire at ninety.",
    "On-call engineers should first check which tables grew, then pause the largest "
    "backfill, and only then delete spill directories older than a day.",
    "Done.",
]


def _share_window(
    texts: Sequence[str], index: int, prev_chars: int, next_chars: int, share: int
) -> ContextWindow:
    total = prev_chars + next_chars
    return build_context_window(
        texts, index, prev_chars * share // total, next_chars * share // total
    )


def check_fitted(
    texts: Sequence[str],
    prev_chars: int,
    next_chars: int,
    count: Callable[[str], int],
    max_tokens: int,
) -> list[tuple[ContextWindow, int]]:
    """Every window: counted exactly, within the limit unless its unit alone is over it (then
    no context), a window of the contract at the fitted budgets (so its "..." and flags are
    right), the full window when that fits, and the most context by the share: one more of
    it would not fit."""
    fitted = fitted_context_windows(texts, prev_chars, next_chars, count, max_tokens)
    full = context_windows(texts, prev_chars, next_chars)
    assert len(fitted) == len(texts)
    for index, (window, tokens) in enumerate(fitted):
        assert tokens == count(window.text)
        budgets = fitted_budgets(texts, index, prev_chars, next_chars, count, max_tokens)
        assert window == build_context_window(texts, index, *budgets)
        if count(full[index].text) <= max_tokens:
            assert window == full[index]
            continue
        if count(texts[index]) > max_tokens:
            assert window == ContextWindow(texts[index], has_prev=False, has_next=False)
            continue
        assert tokens <= max_tokens
        total = prev_chars + next_chars
        share = next(
            s
            for s in range(total, -1, -1)
            if budgets == (prev_chars * s // total, next_chars * s // total)
        )
        assert share < total
        assert count(_share_window(texts, index, prev_chars, next_chars, share + 1).text) > (
            max_tokens
        )
        # At least the context of every smaller share that fits all the way down.
        safe = 0
        while (
            safe < total
            and count(_share_window(texts, index, prev_chars, next_chars, safe + 1).text)
            <= max_tokens
        ):
            safe += 1
        assert share >= safe
    return fitted


@pytest.mark.parametrize("counter", sorted(_COUNTERS))
@pytest.mark.parametrize("max_tokens", [8, 20, 35, 60, 120, 1000])
@pytest.mark.parametrize(("prev_chars", "next_chars"), [(500, 300), (120, 0), (0, 90), (37, 53)])
def test_windows_are_narrowed_to_the_token_limit(counter, max_tokens, prev_chars, next_chars):
    count = _COUNTERS[counter]
    fitted = check_fitted(_PROSE, prev_chars, next_chars, count, max_tokens)
    if max_tokens == 1000:  # everything fits: nothing is trimmed
        assert [w for w, _ in fitted] == context_windows(_PROSE, prev_chars, next_chars)


@pytest.mark.parametrize("counter", sorted(_COUNTERS))
def test_the_unit_is_never_trimmed_and_flags_follow_the_context(counter):
    count = _COUNTERS[counter]
    limit = count(_PROSE[2]) + 6  # room for a few words of context, not for whole neighbours
    fitted = fitted_context_windows(_PROSE, 500, 300, count, limit)
    full = context_windows(_PROSE, 500, 300)
    narrowed = [w for (w, _), f in zip(fitted, full, strict=True) if w != f]
    assert any(w.has_prev or w.has_next for w in narrowed), "some context is kept, narrowed"
    for (window, tokens), unit in zip(fitted, _PROSE, strict=True):
        assert tokens <= max(limit, count(unit))  # a unit over the limit gets no context
        parts = window.text.split("\n\n")
        assert unit in parts
        before, after = parts[: parts.index(unit)], parts[parts.index(unit) + 1 :]
        assert window.has_prev == bool(before) and window.has_next == bool(after)
        for part in before:  # a neighbour cut to fit is marked where it was cut
            assert part in _PROSE or (part.startswith("...") and _PROSE_JOINED.find(part[3:]) >= 0)
        for part in after:
            assert part in _PROSE or (part.endswith("...") and _PROSE_JOINED.find(part[:-3]) >= 0)


_PROSE_JOINED = "\n\n".join(_PROSE)


def test_chars4_trimming_is_exact():
    # Units of 8 characters: "aaaa bbb". The middle one with both neighbours whole is
    # 8 + 2 + 8 + 2 + 8 = 28 characters, 7 tokens; a limit of 6 keeps "...bbb" before it
    # (19 characters, 5 tokens) and drops the rest, 5 being 4 plus what "ccc..." would add.
    texts = ["aaaa bbb", "cccc ddd", "eeee fff"]
    (window, tokens) = fitted_context_windows(texts, 8, 8, chars4, 6)[1]
    assert (window, tokens) == (ContextWindow("...bbb\n\ncccc ddd", True, False), 4)
    check_fitted(texts, 8, 8, chars4, 6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case(_TRIMMED), prev_chars=BUDGETS, next_chars=BUDGETS, limit=st.integers(1, 40))
def test_fitted_windows_hold_for_any_chunk_like_units(
    case: tuple[list[str], int], prev_chars: int, next_chars: int, limit: int
) -> None:
    texts, _ = case
    check_fitted(texts, prev_chars, next_chars, chars4, limit)
