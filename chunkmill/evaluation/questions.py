"""Questions with their evidence, read from CSV or JSON Lines.

Each row has ``question`` (text), ``corpus_id`` (which document holds the evidence) and
``references``: a list (in CSV, its JSON text) of ``{"start_index", "end_index",
"content"}``, character ranges of the document's text, end exclusive; ``content``, when
given, is the text of the range, which ``check_contents`` compares with the document."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkmill.evaluation.metrics import Span

COLUMNS = ("question", "references", "corpus_id")
# A question's evidence can run to many references; CSV fields longer than Python's default
# limit (128 KiB) are refused by the csv module otherwise.
_FIELD_LIMIT = 1 << 24


class QuestionError(ValueError):
    """A questions file that cannot be used: one line naming the file, row and what is
    wrong."""


@dataclass(frozen=True)
class Question:
    question: str
    corpus_id: str
    evidence: tuple[Span, ...]
    contents: tuple[str | None, ...]  # each reference's text as the file gives it
    line: int = 0  # where the file has it
    doc: str = ""  # the document the chunks are keyed by (default: corpus_id)

    def __post_init__(self) -> None:
        if not self.doc:
            object.__setattr__(self, "doc", self.corpus_id)


def read_questions(path: str | Path) -> list[Question]:
    """The questions of a ``.csv`` file, or of a ``.jsonl`` file (one JSON object a line)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise QuestionError(f"{path}: questions must be a .csv or .jsonl file")
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            rows = _csv_rows(path, f) if suffix == ".csv" else _jsonl_rows(path, f)
            questions = [_question(path, line, row) for line, row in rows]
    except OSError as e:
        raise QuestionError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise QuestionError(f"{path}: not UTF-8 text") from None
    if not questions:
        raise QuestionError(f"{path}: no questions in it")
    return questions


def _csv_rows(path: Path, f: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_LIMIT))
    reader = csv.DictReader(f)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise QuestionError(f"{path}: no column {missing[0]!r} (it needs {', '.join(COLUMNS)})")
    start = 2
    for row in reader:
        yield start, row
        start = reader.line_num + 1


def _jsonl_rows(path: Path, f: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, text in enumerate(f, 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            raise QuestionError(f"{path} line {line}: not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise QuestionError(f"{path} line {line}: not a JSON object")
        yield line, row


def _question(path: Path, line: int, row: dict[str, Any]) -> Question:
    where = f"{path} line {line}"
    question, corpus_id = row.get("question"), row.get("corpus_id")
    if not isinstance(question, str) or not question.strip():
        raise QuestionError(f"{where}: no question")
    if not isinstance(corpus_id, str) or not corpus_id.strip():
        raise QuestionError(f"{where}: no corpus_id")
    references = row.get("references")
    if isinstance(references, str):
        try:
            references = json.loads(references)
        except json.JSONDecodeError as e:
            raise QuestionError(f"{where}: references is not JSON ({e.msg})") from None
    if not isinstance(references, list) or not references:
        raise QuestionError(f"{where}: references must be a non-empty list")
    spans = [_span(where, i, r) for i, r in enumerate(references)]
    contents = tuple(_content(r) for r in references)
    return Question(question, corpus_id.strip(), tuple(spans), contents, line)


def _span(where: str, index: int, reference: Any) -> Span:
    if not isinstance(reference, dict):
        raise QuestionError(f"{where}: reference {index} is not an object")
    start, end = reference.get("start_index"), reference.get("end_index")
    if not isinstance(start, int) or not isinstance(end, int) or _is_bool(start, end):
        raise QuestionError(f"{where}: reference {index} needs integer start_index and end_index")
    if not 0 <= start < end:
        raise QuestionError(f"{where}: reference {index} range {start}..{end} is empty or negative")
    return (start, end)


def _content(reference: dict[str, Any]) -> str | None:
    content = reference.get("content")
    return content if isinstance(content, str) else None


def _is_bool(*values: Any) -> bool:
    return any(isinstance(v, bool) for v in values)


def check_contents(questions: Sequence[Question], texts: dict[str, str]) -> str | None:
    """A line describing the first reference whose range is outside its document or whose
    ``content`` differs from the document's text there (the offsets then refer to another
    text); None when every reference fits."""
    for q in questions:
        text = texts.get(q.doc)
        if text is None:
            continue
        for i, ((start, end), content) in enumerate(zip(q.evidence, q.contents, strict=True)):
            if end > len(text):
                return (
                    f"line {q.line}: reference {i} ends at {end}, past the end of "
                    f"{q.corpus_id!r} ({len(text)} characters)"
                )
            if content is not None and text[start:end] != content:
                return (
                    f"line {q.line}: reference {i}'s content differs from characters "
                    f"{start}..{end} of {q.corpus_id!r}"
                )
    return None
