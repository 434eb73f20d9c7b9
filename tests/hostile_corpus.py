"""A corpus of hostile documents, generated here (no third-party files), each with its exact
expected outcome: the reason code of its errors/ row, or the text it must extract to.

Used by the parametrized unit tests (tests/unit/test_extract_hostile.py) and by one
end-to-end run over all of them together with good documents (tests/e2e/test_hostile.py).
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass

import pypdf

from tests.helpers import make_pdf

PAGES = ["Hostile corpus page one speaks of apples.", "Page two speaks of bridges."]

# Text with characters that differ between code pages and encodings.
PROSE = (
    "The naïve café served crème brûlée and a “special” menu — everything was très bon.\n"
    "Second line: déjà vu, façade, Zürich, ½ price.\n"
)
LINES = "line one\nline two\n\nline four after a blank line\n"


@dataclass(frozen=True)
class Case:
    """One hostile document: ``reason`` is the errors/ reason it must get; else it extracts
    and ``text`` (when given) is exactly its text and ``lossy`` its flag."""

    name: str  # also the file name in the e2e corpus
    data: bytes
    reason: str | None = None
    text: str | None = None
    lossy: bool | None = None
    contains: str | None = None  # a phrase the extracted text holds (PDF text may reflow)


# --- PDFs built byte by byte -----------------------------------------------------------------


def raw_pdf(content: bytes, *, filters: bytes = b"", prev_loop: bool = False) -> bytes:
    """A one-page PDF whose page content stream is ``content`` (already encoded with
    ``filters``). ``prev_loop``: the trailer's /Prev points at its own xref, a cycle."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d %s>>\nstream\n" % (len(content), filters) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    prev = b" /Prev %d" % xref if prev_loop else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\n" % (len(objects) + 1, prev)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def text_content(text: str) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"


def circular_prev_pdf() -> bytes:
    return raw_pdf(text_content("Circular xref survivor."), prev_loop=True)


def flate_bomb_pdf(inflated_mb: int = 100) -> bytes:
    """A content stream Flate-compressed twice: about a kilobyte on disk, ``inflated_mb`` MB
    of content operators once both layers are undone (pypdf stops at 75 MB)."""
    inner = zlib.compressobj(9)
    block = b"0 0 m\n" * (1024 * 1024 // 6)
    parts = [inner.compress(block) for _ in range(inflated_mb)]
    parts.append(inner.flush())
    once = b"".join(parts)
    twice = zlib.compress(once, 9)
    return raw_pdf(twice, filters=b"/Filter [/FlateDecode /FlateDecode] ")


def encrypt(data: bytes, *, user: str, owner: str, algorithm: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user, owner_password=owner, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def image_only_pdf() -> bytes:
    from fpdf import FPDF
    from PIL import Image

    pdf = FPDF()
    pdf.add_page()
    pdf.image(Image.new("RGB", (16, 16), (200, 30, 30)), x=10, y=10, w=40)
    return bytes(pdf.output())


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR\x00\x00\x00\x01" + bytes(range(200))


def cases(*, big_line_mb: int = 50) -> list[Case]:
    """Every hostile document with its expected outcome."""
    good_pdf = make_pdf(PAGES)
    utf16_text = PROSE
    return [
        Case("zero-bytes.txt", b"", reason="empty"),
        Case("zero-bytes.pdf", b"", reason="empty"),
        Case("percent-pdf-only.pdf", b"%PDF", reason="corrupt"),
        Case("truncated-half.pdf", good_pdf[: len(good_pdf) // 2], reason="corrupt"),
        Case("truncated-tail.pdf", good_pdf[:-200], reason="corrupt"),
        Case(
            "html-named.pdf",
            b"<!doctype html><html><body><h1>Not found</h1></body></html>",
            reason="corrupt",
        ),
        Case("circular-prev.pdf", circular_prev_pdf(), contains="Circular xref survivor."),
        Case("flate-bomb.pdf", flate_bomb_pdf(), reason="corrupt"),
        Case("image-only.pdf", image_only_pdf(), reason="no_text"),
        Case(
            "user-password.pdf",
            encrypt(good_pdf, user="secret", owner="owner", algorithm="AES-128"),
            reason="encrypted",
        ),
        Case(
            "aes-empty-password.pdf",
            encrypt(good_pdf, user="", owner="owner", algorithm="AES-256"),
            contains="bridges",
        ),
        Case("utf8-bom.txt", b"\xef\xbb\xbf" + PROSE.encode(), text=PROSE, lossy=False),
        Case(
            "utf16le-bom.txt", b"\xff\xfe" + utf16_text.encode("utf-16-le"), text=PROSE, lossy=False
        ),
        Case(
            "utf16be-bom.txt", b"\xfe\xff" + utf16_text.encode("utf-16-be"), text=PROSE, lossy=False
        ),
        Case("utf16le.txt", utf16_text.encode("utf-16-le"), text=PROSE, lossy=False),
        Case("utf16be.txt", utf16_text.encode("utf-16-be"), text=PROSE, lossy=False),
        Case(
            "utf32-bom.md", b"\xff\xfe\x00\x00" + PROSE.encode("utf-32-le"), text=PROSE, lossy=False
        ),
        Case("cp1252.txt", (PROSE * 3).encode("cp1252"), text=PROSE * 3, lossy=True),
        Case(
            "stray-nuls.txt",
            ("Stray NUL\x00 from a bad editor. " + "Plain text. " * 40 + "end\x00\n").encode(),
            text="Stray NUL from a bad editor. " + "Plain text. " * 40 + "end\n",
            lossy=True,
        ),
        Case("mostly-nuls.txt", b"ab" + bytes(100), reason="binary"),
        Case("png-named.txt", PNG, reason="binary"),
        Case("png-named.md", PNG, reason="binary"),
        Case("undecodable.txt", bytes(range(1, 256)) * 4, reason="undecodable"),
        Case(
            "big-line.txt",
            b"x" * (big_line_mb * 1024 * 1024),
            contains="xxxx",
            lossy=False,
        ),
        Case("twin-lf.txt", LINES.encode(), text=LINES, lossy=False),
        Case("twin-crlf.txt", LINES.replace("\n", "\r\n").encode(), text=LINES, lossy=False),
        Case("deep-nesting.json", b"[" * 100_000 + b"]" * 100_000, reason="corrupt"),
        Case("not-json.json", b"{'single': 'quotes'}", reason="corrupt"),
        Case("zip-junk.docx", b"PK\x03\x04 not really a docx", reason="corrupt"),
        Case("text-named.docx", b"plain text, not a zip", reason="corrupt"),
    ]
