"""Whether two configurations differ by more than the choice of questions explains.

Both configurations answer the same questions, so they are compared question by question
(paired): the difference of a score on each question, and

- a **paired bootstrap**: the questions are drawn with replacement ``resamples`` times and
  the mean difference is computed on each draw. Its 2.5th and 97.5th percentiles are the
  95% interval of the mean difference; the two-sided p is twice the share of draws on the
  far side of zero (at most 1). An interval that holds 0 says the set cannot tell the two
  apart.
- a **sign test**: the questions where one scores higher and where the other does, ties
  left out; the two-sided p of so uneven a split if either were as likely (exact binomial).
  It asks how often one wins, not by how much: a question lost by .01 counts as one lost
  by 1.

The bootstrap draws from a generator seeded with ``seed``, so the same scores give the same
interval on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Paired:
    """``a`` against ``b`` over the same questions: differences are ``a - b``."""

    mean_difference: float
    low: float  # the 95% bootstrap interval of the mean difference
    high: float
    p_bootstrap: float
    wins: int  # questions where a scores higher
    losses: int  # where b does
    ties: int
    p_sign: float

    @property
    def significant(self) -> bool:
        """Whether the 95% interval leaves out 0."""
        return self.low > 0 or self.high < 0


def compare(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    tie: float = 1e-9,
) -> Paired:
    """``a`` against ``b``, each a score per question in the same order; differences within
    ``tie`` are ties for the sign test."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} scores against {len(b)}: not the same questions")
    if not a:
        raise ValueError("no questions to compare")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    differences = [x - y for x, y in zip(a, b, strict=True)]
    low, high, p_boot = bootstrap(differences, resamples, seed)
    wins = sum(1 for d in differences if d > tie)
    losses = sum(1 for d in differences if d < -tie)
    return Paired(
        mean_difference=sum(differences) / len(differences),
        low=low,
        high=high,
        p_bootstrap=p_boot,
        wins=wins,
        losses=losses,
        ties=len(differences) - wins - losses,
        p_sign=sign_test(wins, losses),
    )


def bootstrap(
    differences: Sequence[float], resamples: int, seed: int
) -> tuple[float, float, float]:
    """The 95% percentile interval of the mean of ``differences`` over ``resamples`` draws
    with replacement, and the two-sided p that the mean is 0."""
    n = len(differences)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    tail = (1 - CONFIDENCE) / 2
    low = means[int(math.floor(tail * (resamples - 1)))]
    high = means[int(math.ceil((1 - tail) * (resamples - 1)))]
    at_or_below = sum(1 for m in means if m <= 0) / resamples
    at_or_above = sum(1 for m in means if m >= 0) / resamples
    return low, high, min(1.0, 2 * min(at_or_below, at_or_above))


def sign_test(wins: int, losses: int) -> float:
    """The exact two-sided p of ``wins`` against ``losses`` when each side is as likely."""
    n = wins + losses
    if n == 0:
        return 1.0
    fewer = min(wins, losses)
    one_side = sum(math.comb(n, i) for i in range(fewer + 1)) / 2**n
    return min(1.0, 2 * one_side)
