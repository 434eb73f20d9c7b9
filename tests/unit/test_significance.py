"""chunkmill.evaluation.significance: the paired bootstrap and the sign test on per-question
scores made by hand, and ``paired`` on the scores ``score`` gives."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from chunkmill.evaluation import Bm25Retriever, EvalChunk, Question, paired, score
from chunkmill.evaluation.significance import compare, sign_test


def test_sign_test_is_the_exact_binomial_by_hand():
    # 9 against 1: P(X <= 1) = (1 + 10) / 2**10 on each side
    assert sign_test(9, 1) == pytest.approx(2 * 11 / 1024)
    assert sign_test(1, 9) == sign_test(9, 1)
    assert sign_test(5, 5) == 1.0
    assert sign_test(0, 0) == 1.0
    assert sign_test(12, 0) == pytest.approx(2 / 2**12)


def test_a_constant_gain_on_every_question_is_significant():
    b = [0.5, 0.2, 0.9, 0.0] * 50
    a = [x + 0.1 for x in b]
    p = compare(a, b)
    assert p.mean_difference == pytest.approx(0.1)
    assert p.low == pytest.approx(0.1) and p.high == pytest.approx(0.1)
    assert p.significant and p.p_bootstrap == 0.0
    assert (p.wins, p.losses, p.ties) == (200, 0, 0)
    assert p.p_sign < 1e-50


def test_wins_and_losses_that_cancel_are_not_significant():
    a = [1.0, 0.0] * 100
    b = [0.0, 1.0] * 100
    p = compare(a, b)
    assert p.mean_difference == 0.0
    assert p.low < 0 < p.high and not p.significant
    assert p.p_bootstrap > 0.9
    assert (p.wins, p.losses, p.ties, p.p_sign) == (100, 100, 0, 1.0)


def test_one_question_of_two_hundred_is_within_the_noise():
    # Identical but for three questions won outright and one lost: +.01 on the mean.
    b = [1.0] * 200
    a = list(b)
    for i in (0, 1, 2):
        b[i] = 0.0
    a[3] = 0.0
    p = compare(a, b)
    assert p.mean_difference == pytest.approx(2 / 200)
    assert p.low <= 0 <= p.high and not p.significant
    assert (p.wins, p.losses, p.ties) == (3, 1, 196)
    assert p.p_sign == pytest.approx(2 * 5 / 16)


def test_the_interval_is_about_the_normal_one_for_many_questions():
    rng = random.Random(7)
    b = [rng.random() for _ in range(400)]
    a = [x + rng.gauss(0.02, 0.2) for x in b]
    p = compare(a, b)
    d = [x - y for x, y in zip(a, b, strict=True)]
    half = 1.96 * statistics.stdev(d) / math.sqrt(len(d))
    assert p.low == pytest.approx(p.mean_difference - half, abs=0.15 * half)
    assert p.high == pytest.approx(p.mean_difference + half, abs=0.15 * half)


def test_the_same_scores_and_seed_give_the_same_interval():
    rng = random.Random(3)
    a = [rng.random() for _ in range(50)]
    b = [rng.random() for _ in range(50)]
    assert compare(a, b) == compare(a, b)
    assert compare(a, b, seed=1) != compare(a, b, seed=2)


def test_differences_within_the_tie_are_ties():
    p = compare([0.995, 1.0, 0.5], [1.0, 0.0, 0.5], tie=0.01)
    assert (p.wins, p.losses, p.ties) == (1, 0, 2)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [([1.0], [1.0, 0.0], "1 scores against 2"), ([], [], "no questions")],
)
def test_unpaired_or_empty_scores_are_refused(a, b, message):
    with pytest.raises(ValueError, match=message):
        compare(a, b)


def test_paired_compares_the_per_question_scores_of_score():
    text = "apples grow on trees. " * 3 + "the seine flows through paris. " * 3
    cut = text.index("the seine")
    questions = [
        Question("where do apples grow", "d", ((0, 20),), (None,)),
        Question("which river flows through paris", "d", ((cut, cut + 29),), (None,)),
    ]
    whole = [EvalChunk("d", 0, len(text), text)]
    halves = [EvalChunk("d", 0, cut, text[:cut]), EvalChunk("d", cut, len(text), text[cut:])]
    big = score(whole, questions, Bm25Retriever(), k=1)
    small = score(halves, questions, Bm25Retriever(), k=1)
    assert [q.recall for q in small.per_question] == [1.0, 1.0]
    by_hand = compare([q.iou for q in small.per_question], [q.iou for q in big.per_question])
    assert paired(small, big, "iou") == by_hand
    assert paired(small, big, "iou").wins == 2
    assert paired(small, big).ties == 2
    with pytest.raises(ValueError, match="metric"):
        paired(small, big, "f1")
