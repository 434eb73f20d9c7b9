"""What every chunking strategy's tests share: the span contract, the text generators of the
property tests, an independent paragraph oracle and the sample corpus as raw text."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Collection
from itertools import pairwise
from pathlib import Path

from hypothesis import strategies as st

from chunkmill.chunking import Chunker, Span

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "pipeline" / "sample_corpus"


def check_span_contract(
    text: str,
    spans: list[Span],
    fits: Callable[[str], bool],
    max_overlap: int,
    *,
    overlap_at_word_start: bool = False,
) -> None:
    """The offset contract of every strategy: no chunk for whitespace-only text, else chunks
    that are non-empty slices of ``text`` within budget (``fits``), trimmed, in document order
    with strictly increasing starts and ends, overlapping the previous chunk by at most
    ``max_overlap`` characters (0: disjoint), and covering every non-whitespace character.
    With ``overlap_at_word_start``, a chunk that overlaps the previous one starts a word."""
    if not text.strip():
        assert spans == []
        return
    assert spans
    for span in spans:
        assert isinstance(span, Span)
        assert 0 <= span.start < span.end <= len(text)
        chunk = text[span.start : span.end]
        assert fits(chunk), (span, len(chunk))
        assert not chunk[0].isspace() and not chunk[-1].isspace(), (span, chunk)
    for prev, cur in pairwise(spans):
        # Strictly increasing starts and ends: document order, progress, no containment.
        assert prev.start < cur.start and prev.end < cur.end, (prev, cur)
        assert prev.end - cur.start <= max_overlap, (prev, cur)
        if overlap_at_word_start and cur.start < prev.end:
            assert text[cur.start - 1].isspace(), (prev, cur)
    # Every non-whitespace character is inside some span.
    covered_to = 0
    for span in spans:
        assert text[covered_to : span.start].strip() == "", (covered_to, span)
        covered_to = max(covered_to, span.end)
    assert text[covered_to:].strip() == ""


def within_chars(max_chars: int) -> Callable[[str], bool]:
    return lambda chunk: len(chunk) <= max_chars


def assert_deterministic(chunker: Chunker, fresh: Chunker, text: str, spans: list[Span]) -> None:
    """The same spans again from the same instance, from a fresh one built with the same
    parameters, and from a pickled copy (as Beam ships a chunker to its workers)."""
    assert chunker.split(text) == spans
    assert fresh.split(text) == spans
    assert pickle.loads(pickle.dumps(chunker)).split(text) == spans


def texts(fragments: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Documents for property tests: runs of the given fragments mixed with arbitrary short
    strings, the same run repeated (where offset bugs hide), and arbitrary text."""
    mixed = st.lists(st.one_of(fragments, st.text(min_size=1, max_size=6)), max_size=80).map(
        "".join
    )
    return st.one_of(
        mixed,
        st.tuples(mixed, st.integers(2, 6)).map(lambda t: t[0] * t[1]),  # repeated text
        st.text(max_size=200),
    )


def reference_paragraphs(text: str) -> list[tuple[int, int]]:
    """Trimmed paragraph spans, line by line: a paragraph is a maximal run of lines (split on
    "\\n") that are not whitespace-only."""
    paragraphs: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            start = offset + len(line) - len(line.lstrip())
            end = offset + len(line.rstrip())
            current = (start, end) if current is None else (current[0], end)
        elif current is not None:
            paragraphs.append(current)
            current = None
        offset += len(line) + 1
    if current is not None:
        paragraphs.append(current)
    return paragraphs


def sample_documents(suffixes: Collection[str]) -> dict[str, str]:
    """The bundled sample corpus's files with these suffixes, by relative path, decoded from
    their raw bytes: read_text() would translate "\\r\\n" and hide separator handling."""
    documents = {}
    for path in sorted(SAMPLE_CORPUS.rglob("*")):
        if path.is_file() and path.suffix.lower() in suffixes:
            name = path.relative_to(SAMPLE_CORPUS).as_posix()
            documents[name] = path.read_bytes().decode("utf-8", errors="replace")
    assert documents, f"no {sorted(suffixes)} files in {SAMPLE_CORPUS}"
    return documents
