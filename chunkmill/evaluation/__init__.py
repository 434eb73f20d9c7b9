"""Chunk quality for retrieval, measured on questions whose evidence is character ranges of
the documents (``chunkmill eval``; docs/evaluation.md).

``score`` takes chunks of any chunker (chunkmill's, a run's, another library's) as
``EvalChunk`` s, indexes all of them together, retrieves the top ``k`` for each question and
scores what was retrieved (:mod:`chunkmill.evaluation.metrics`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chunkmill.evaluation.metrics import QuestionScore, Span, precision_omega, retrieval_score
from chunkmill.evaluation.questions import Question, QuestionError, read_questions
from chunkmill.evaluation.retrievers import Bm25Retriever, ModelRetriever, Retriever
from chunkmill.evaluation.significance import Paired, compare

__all__ = [
    "Bm25Retriever",
    "EvalChunk",
    "ModelRetriever",
    "Paired",
    "Question",
    "QuestionError",
    "QuestionScore",
    "Retriever",
    "Scores",
    "chunks_from_spans",
    "paired",
    "read_questions",
    "score",
    "spans_in",
]

DEFAULT_K = 5


@dataclass(frozen=True)
class EvalChunk:
    """A chunk to score: ``doc[start:end]`` of its document's text; ``text`` is what the
    retriever indexes (the chunk's text, or what the embedder receives with its context)."""

    doc: str
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Scores:
    """Means over the questions (0 to 1), and the chunks scored; ``per_question`` holds
    each question's recall, precision and IoU, in the questions' order (for ``paired``)."""

    recall: float
    precision: float
    iou: float
    precision_omega: float
    k: int
    questions: int
    chunks: int
    mean_chars: float
    per_question: tuple[QuestionScore, ...] = field(default=(), repr=False, compare=False)


def chunks_from_spans(
    texts: Mapping[str, str], spans: Mapping[str, Sequence[Span]]
) -> list[EvalChunk]:
    """``EvalChunk`` s of each document's ``(start, end)`` spans, indexed by their text."""
    return [
        EvalChunk(doc, start, end, texts[doc][start:end])
        for doc, doc_spans in spans.items()
        for start, end in doc_spans
    ]


def spans_in(text: str, chunks: Sequence[str]) -> list[Span]:
    """Where each of ``chunks`` (texts cut from ``text`` in order, possibly overlapping)
    lies in ``text``: its first occurrence after the previous chunk's start. For chunkers
    that return only texts; ``ValueError`` for a chunk that is not in ``text`` there."""
    spans: list[Span] = []
    at = 0
    for chunk in chunks:
        found = text.find(chunk, at)
        if found < 0:
            raise ValueError(f"chunk {len(spans)} is not in the text from offset {at}")
        spans.append((found, found + len(chunk)))
        at = found + 1
    return spans


def score(
    chunks: Sequence[EvalChunk],
    questions: Sequence[Question],
    retriever: Retriever,
    k: int = DEFAULT_K,
) -> Scores:
    """Index ``chunks`` (all documents together), retrieve the top ``k`` for each question and
    average recall, precision and IoU over the questions, with PΩ (no retrieval)."""
    if not questions:
        raise ValueError("no questions to score")
    ranked = retriever.rank([c.text for c in chunks], [q.question for q in questions], k)
    by_doc: dict[str, list[Span]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc, []).append((c.start, c.end))
    recall = precision = iou = omega = 0.0
    each: list[QuestionScore] = []
    for question, top in zip(questions, ranked, strict=True):
        retrieved = [chunks[i] for i in top]
        same = [(c.start, c.end) for c in retrieved if c.doc == question.doc]
        one = retrieval_score(question.evidence, same, [c.end - c.start for c in retrieved])
        each.append(one)
        recall += one.recall
        precision += one.precision
        iou += one.iou
        omega += precision_omega(question.evidence, by_doc.get(question.doc, []))
    n = len(questions)
    mean_chars = sum(c.end - c.start for c in chunks) / len(chunks) if chunks else 0.0
    return Scores(
        recall / n, precision / n, iou / n, omega / n, k, n, len(chunks), mean_chars, tuple(each)
    )


def paired(a: Scores, b: Scores, metric: str = "recall") -> Paired:
    """``a`` against ``b`` (scored on the same questions) on ``metric`` (``recall``,
    ``precision`` or ``iou``), question by question: the paired bootstrap and sign test of
    :mod:`chunkmill.evaluation.significance`."""
    if metric not in ("recall", "precision", "iou"):
        raise ValueError(f"metric must be recall, precision or iou, not {metric!r}")
    if len(a.per_question) != a.questions or len(b.per_question) != b.questions:
        raise ValueError("paired needs the scores of each question (Scores from score)")
    return compare(
        [getattr(q, metric) for q in a.per_question], [getattr(q, metric) for q in b.per_question]
    )
