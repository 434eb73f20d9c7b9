"""How ``chunkmill query`` prints a hit: where it is (offsets, pages, section), then one line
of its text."""

from __future__ import annotations

from chunkmill.pipeline.query import Hit, excerpt, render


def hit(**changes) -> Hit:
    fields = {
        "rank": 1,
        "score": 0.61234,
        "chunk_id": "c",
        "chunk_hash": "h",
        "doc_id": "d",
        "source_uri": "gs://docs/guide.pdf",
        "chunk_index": 0,
        "char_start": 120,
        "char_end": 480,
        "page_start": None,
        "page_end": None,
        "section_path": None,
        "text": "First line.\n\nSecond   line.",
    }
    return Hit(**(fields | changes))


def test_a_hit_is_where_it_is_then_one_line_of_its_text():
    assert render([hit()]).splitlines() == [
        "1. 0.612  gs://docs/guide.pdf  chars 120-480",
        "   First line. Second line.",
    ]
    pages = hit(page_start=2, page_end=3, section_path=["Guide", "Install"])
    assert render([pages]).splitlines()[0].endswith("chars 120-480  pages 2-3  Guide > Install")
    assert render([hit(page_start=4, page_end=4)]).splitlines()[0].endswith("  page 4")


def test_an_excerpt_is_one_line_cut_to_its_width():
    text = "word " * 100
    line = excerpt(text, 40)
    assert len(line) <= 40 and line.endswith("…") and "\n" not in line
    assert excerpt("short\ntext") == "short text"
