"""Chunk quality for retrieval on character ranges: recall, precision, IoU at k and PΩ.

The definitions are Chroma's (its chunking evaluation), on ranges ``(start, end)`` of a
document's text, end exclusive:

- recall: evidence characters covered by the retrieved chunks of the question's document,
  over the evidence characters;
- precision: evidence characters covered, over the summed lengths of all retrieved chunks;
- IoU: evidence characters covered, over the summed lengths of the retrieved chunks plus the
  evidence they leave uncovered;
- PΩ: the IoU of exactly the chunks that meet the evidence, without retrieval: the best the
  chunk boundaries allow.

Ranges that only touch (one ends where the other starts) meet. The retrieval denominators
sum chunk lengths, so text shared by overlapping chunks counts once per chunk; PΩ's
denominator is the union of the chunks that meet the evidence and the evidence left over.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Span = tuple[int, int]


def union(spans: Iterable[Span]) -> list[Span]:
    """``spans`` merged into disjoint ranges, in order; touching ranges merge."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(spans: Iterable[Span]) -> int:
    """The summed lengths of ``spans`` (overlaps counted once per span)."""
    return sum(end - start for start, end in spans)


def meets(a: Span, b: Span) -> bool:
    """Whether two ranges overlap or touch."""
    return max(a[0], b[0]) <= min(a[1], b[1])


def covered(evidence: Sequence[Span], chunks: Iterable[Span]) -> list[Span]:
    """The parts of ``evidence`` inside ``chunks``, as disjoint ranges."""
    parts = [(max(e[0], c[0]), min(e[1], c[1])) for c in chunks for e in evidence if meets(e, c)]
    return [s for s in union(parts) if s[1] > s[0]]


def uncovered_length(evidence: Sequence[Span], covered_spans: Sequence[Span]) -> int:
    """The evidence characters outside ``covered_spans``, each evidence range on its own."""
    return sum(e[1] - e[0] - length(covered([e], covered_spans)) for e in evidence)


@dataclass(frozen=True)
class QuestionScore:
    recall: float
    precision: float
    iou: float


def retrieval_score(
    evidence: Sequence[Span], same_document: Sequence[Span], retrieved_lengths: Sequence[int]
) -> QuestionScore:
    """One question's scores: ``same_document`` are the retrieved chunks of the evidence's
    document, ``retrieved_lengths`` the lengths of every retrieved chunk (any document)."""
    hit = covered(evidence, same_document)
    found = length(hit)
    retrieved = sum(retrieved_lengths)
    missed = uncovered_length(evidence, hit)
    total = length(evidence)
    return QuestionScore(
        recall=found / total if total else 0.0,
        precision=found / retrieved if retrieved else 0.0,
        iou=found / (retrieved + missed) if retrieved + missed else 0.0,
    )


def precision_omega(evidence: Sequence[Span], chunks: Iterable[Span]) -> float:
    """PΩ of one question: the IoU of the chunks of its document that meet its evidence."""
    meeting = [c for c in chunks if any(meets(c, e) for e in evidence)]
    hit = covered(evidence, meeting)
    if not hit:
        return 0.0
    leftover = [r for e in evidence for r in _minus(e, hit)]
    return length(hit) / length(union([*meeting, *leftover]))


def _minus(span: Span, cut: Sequence[Span]) -> list[Span]:
    """``span`` without the disjoint, sorted ranges ``cut``."""
    pieces, start = [], span[0]
    for a, b in cut:
        if b <= start or a >= span[1]:
            continue
        if a > start:
            pieces.append((start, a))
        start = max(start, b)
    if start < span[1]:
        pieces.append((start, span[1]))
    return pieces
