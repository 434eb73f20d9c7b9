"""Shared test helpers: prior manifests built by the code under test from real content."""

from __future__ import annotations

from typing import Any

from transforms import document, ids
from transforms.config import Chunking, ChunkingConfig
from transforms.types import WorkItem

# Small limits so a few short paragraphs make several chunks.
SMALL = ChunkingConfig.create("paragraph", max_tokens=20, overlap_tokens=0)


def paragraphs(*words: str, n: int = 1) -> bytes:
    """A Markdown-ish document: one paragraph per word, each about 40 characters."""
    return "\n\n".join(f"{w} " * 8 for w in words for _ in range(n)).encode()


def make_pdf(pages: list[str]) -> bytes:
    """A real PDF with one page per string (fpdf2, core font)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def manifest_rows(uri: str, data: bytes, config: ChunkingConfig = SMALL) -> list[dict[str, Any]]:
    """The manifest rows a run would write for ``uri`` with content ``data``."""
    item = WorkItem(ids.doc_id(uri), uri, len(data))
    outcome = document.process_document(item, data, Chunking(config))
    assert outcome.status == document.PROCESSED, outcome.error
    return [{**document.occurrence_fields(r), "is_new": True} for r in outcome.occurrences]
