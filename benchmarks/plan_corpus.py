"""A small mixed corpus on which `chunkmill plan` is checked against what the run embeds:
PDFs of text, papers (text with note markers) and PDFs of drawings (large files, little
text), markup-heavy HTML pages, Markdown guides and plain-text notes, in six folders, of sizes
from one to a few dozen KB.
Deterministic: the same bytes on every machine (fpdf2 with a fixed creation date).

:func:`write_corpus` writes it; :func:`edit_night` changes a few documents the way a night
of edits does (a word replaced, a paragraph appended, a page of a PDF rewritten, one new
document). ``benchmarks/plan_accuracy.py`` and ``tests/e2e/test_plan_accuracy.py`` use it.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

_DATE = datetime(2024, 5, 20, 9, 0, 0, tzinfo=timezone.utc)


def prose(topic: str, paragraphs: int, seed: int = 0) -> str:
    """``paragraphs`` paragraphs of varied words about ``topic`` (latin-1 only: PDF core fonts)."""
    rng = random.Random(f"{topic}:{seed}")
    words = [f"{topic}{i}" for i in range(60)] + [
        "the", "index", "run", "document", "chunk", "night", "edit", "page", "table", "model",
    ]  # fmt: skip
    return "\n\n".join(
        f"{topic} paragraph {p}: " + " ".join(rng.choice(words) for _ in range(rng.randint(40, 90)))
        + "." for p in range(paragraphs)
    )  # fmt: skip


def text_pdf(pages: list[str]) -> bytes:
    """A PDF with one page of text per string."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(_DATE)
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def drawing_pdf(caption: str, pages: int, lines: int, seed: int) -> bytes:
    """A PDF of ``pages`` pages of ``lines`` random lines each under a short caption: most of
    its bytes are drawing, a few hundred are text."""
    from fpdf import FPDF

    rng = random.Random(seed)
    pdf = FPDF()
    pdf.set_creation_date(_DATE)
    pdf.set_font("Helvetica", size=11)
    for page in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 6, f"{caption} figure {page}: " + prose(caption, 1, seed + page))
        for _ in range(lines):
            pdf.line(*(rng.uniform(0, 200) for _ in range(4)))
    return bytes(pdf.output())


def paper_pdf(pages: list[str]) -> bytes:
    """A PDF of text with a superscript note marker after every eighth word, as papers have:
    the PDF engines break such lines differently, so their text differs."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(_DATE)
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        for paragraph in text.split("\n\n"):
            words = paragraph.split()
            for i in range(0, len(words), 8):
                pdf.write(6, " ".join(words[i : i + 8]))
                pdf.char_vpos = "SUP"
                pdf.write(6, str(i // 8 + 1))
                pdf.char_vpos = "LINE"
                pdf.write(6, " ")
            pdf.ln(10)
    return bytes(pdf.output())


def html_page(title: str, paragraphs: int) -> str:
    """A page as sites export them: its markup (styles, a script with its data, inline SVG
    icons, navigation, attribute-laden wrappers) is most of its bytes, its text a few KB."""
    rng = random.Random(title)
    style = "body{font-family:sans-serif}" + "".join(
        f".c{i}{{margin:{i}px;padding:{i % 7}px;color:#{i * 4111 % 0xFFFFFF:06x}}}"
        for i in range(200)
    )
    script = "var data = [" + ",".join(str(rng.randint(0, 99999)) for _ in range(3000)) + "];"
    icon = "".join(
        '<svg viewBox="0 0 24 24"><path d="'
        + " ".join(f"L{rng.uniform(0, 24):.2f} {rng.uniform(0, 24):.2f}" for _ in range(40))
        + '"/></svg>'
        for _ in range(12)
    )
    nav = "".join(f'<li class="c{i}"><a href="/p/{i}">section {i}</a></li>' for i in range(60))
    body = "".join(
        f'<div class="c{i} wrapper" data-id="{title}-{i}" style="display:block">'
        f'<p class="c{i}">{p}</p></div>'
        for i, p in enumerate(prose(title, paragraphs).split("\n\n"))
    )
    return (
        f"<!doctype html><html><head><title>{title}</title><style>{style}</style>"
        f"<script>{script}</script></head><body><header>{icon}</header><nav><ul>{nav}</ul>"
        f"</nav><main><h1>{title}</h1>{body}</main></body></html>"
    )


def write_corpus(root: Path, sets: int = 1) -> None:
    """The corpus under ``root``, ``sets`` times (each set in folders of its own): 6 text
    PDFs, 4 papers, 4 drawing PDFs, 8 HTML pages, 8 Markdown guides and 5 text notes."""
    for n in range(sets):
        tag = "" if n == 0 else f"-{n}"
        for i in range(6):
            pages = [prose(f"report{i}{tag}p{p}", 3 + i % 3) for p in range(1 + i)]
            _write(root / f"reports{tag}" / f"report{i}.pdf", text_pdf(pages))
        for i in range(4):
            pages = [prose(f"paper{i}{tag}p{p}", 4) for p in range(2 + i)]
            _write(root / f"papers{tag}" / f"paper{i}.pdf", paper_pdf(pages))
        for i in range(4):
            scan = drawing_pdf(f"scan{i}{tag}", 1 + i, 1500, 10 * n + i)
            _write(root / f"scans{tag}" / f"scan{i}.pdf", scan)
        for i in range(8):
            page = html_page(f"page{i}{tag}", 1 + i)
            _write(root / f"site{tag}" / f"page{i}.html", page.encode())
        for i in range(8):
            text = f"# Guide {i}\n\n" + prose(f"guide{i}{tag}", 3 + 4 * i)
            _write(root / f"guides{tag}" / f"guide{i}.md", text.encode())
        for i in range(5):
            _write(
                root / f"notes{tag}" / f"note{i}.txt", prose(f"note{i}{tag}", 2 + 3 * i).encode()
            )


def edit_night(root: Path) -> None:
    """A few small edits: a word replaced in two long guides and on one page of the longest
    text PDF, a paragraph appended to a note, a short new guide."""
    for name in ("guide6.md", "guide7.md"):
        path = root / "guides" / name
        path.write_text(path.read_text().replace("paragraph 3:", "paragraph III:", 1))
    note = root / "notes" / "note4.txt"
    note.write_text(note.read_text() + "\n\n" + prose("postscript", 1))
    pages = [prose(f"report5p{p}", 5) for p in range(6)]
    pages[2] = pages[2].replace("paragraph 1:", "paragraph one:", 1)
    _write(root / "reports" / "report5.pdf", text_pdf(pages))
    _write(root / "guides" / "guide8.md", ("# Guide 8\n\n" + prose("guide8", 2)).encode())


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
