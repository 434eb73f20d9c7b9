"""OCR of PDF pages without a text layer, encrypted PDFs opened with a password, pypdf's
glued lines, right-to-left text in a real Arabic font, private-use code points and SVG
text; on files the tests make (Pillow images put in a PDF, fpdf2 documents)."""

from __future__ import annotations

import io
from pathlib import Path

import pypdf
import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from chunkmill import document, ids
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.extract import ExtractionError, cleanup, extract
from chunkmill.extract import ocr as ocr_engine
from chunkmill.isolation import Extractor, IsolatedExtractor
from chunkmill.items import PriorError, WorkItem

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
FONT = DEJAVU if DEJAVU.exists() else None
LINES = ("Quarterly revenue grew strongly", "Invoices reached Lisbon")


def scanned_pdf(lines: tuple[str, ...] = LINES, *, pages: int = 1) -> bytes:
    """A PDF of ``pages`` pages, each an image of ``lines`` rendered with Pillow: no text
    layer at all, as a scanner makes it."""
    font = ImageFont.truetype(str(FONT), 40) if FONT else ImageFont.load_default(size=40)
    images = []
    for _ in range(pages):
        image = Image.new("L", (1240, 120 + 90 * len(lines)), 255)
        draw = ImageDraw.Draw(image)
        for number, line in enumerate(lines):
            draw.text((60, 60 + 90 * number), line, font=font, fill=0)
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=150, save_all=True, append_images=images[1:])
    return out.getvalue()


def text_pdf(*pages: str) -> bytes:
    doc = FPDF()
    doc.set_font("helvetica", size=12)
    for text in pages:
        doc.add_page()
        doc.multi_cell(0, 8, text)
    return bytes(doc.output())


def _assert_read(text: str) -> None:
    # The recognition model sometimes drops the space between two words, never a letter
    # of these: every word is in the text.
    found = text.lower()
    missing = [w for line in LINES for w in line.lower().split() if w not in found]
    assert missing == [], text


def test_a_scanned_page_is_read_by_ocr() -> None:
    data = scanned_pdf()
    with pytest.raises(ExtractionError) as e:
        extract("scan.pdf", data, ocr="never")
    assert e.value.reason == "no_text"
    doc = extract("scan.pdf", data, ocr="auto")
    _assert_read(doc.text)
    assert doc.extracted_by == ("ocr",)
    assert doc.extracted_by_of(0, len(doc.text)) == "ocr"


def test_auto_reads_only_pages_without_text_and_always_reads_every_page() -> None:
    scan = pypdf.PdfReader(io.BytesIO(scanned_pdf()))
    typed = pypdf.PdfReader(io.BytesIO(text_pdf("Typed page about apples.")))
    writer = pypdf.PdfWriter()
    writer.add_page(typed.pages[0])
    writer.add_page(scan.pages[0])
    out = io.BytesIO()
    writer.write(out)
    doc = extract("mixed.pdf", out.getvalue(), ocr="auto", pdf_engine="pdfium")
    assert doc.extracted_by == ("text", "ocr")
    assert doc.text.startswith("Typed page about apples.\n\n")
    _assert_read(doc.text[doc.page_starts[1] :])
    assert doc.extracted_by_of(0, len(doc.text)) == "text+ocr"
    assert extract("mixed.pdf", out.getvalue(), ocr="always").extracted_by == ("ocr", "ocr")


def test_ocr_runs_in_the_parser_child_under_its_budget() -> None:
    data = scanned_pdf()
    with IsolatedExtractor(timeout_seconds=120, memory_mb=1536) as child:
        doc = child("scan.pdf", data, ocr="auto")
        assert child.starts == 1  # the parser child read it, not this process
    _assert_read(doc.text)
    with (
        IsolatedExtractor(timeout_seconds=0.5, memory_mb=1536) as child,
        pytest.raises(ExtractionError) as e,
    ):
        child("scan.pdf", scanned_pdf(pages=20), ocr="auto")
    assert e.value.reason == "timeout"


def test_a_no_text_failure_is_tried_again_once_ocr_is_installed(monkeypatch) -> None:
    config = ChunkingConfig.create()
    installed = document.attempt_key(config)
    from chunkmill import versions

    real = versions.library_versions()
    assert "rapidocr-onnxruntime " in real and "rapidocr-onnxruntime unknown" not in real
    monkeypatch.setattr(
        document,
        "library_versions",
        lambda: real.replace(
            f"rapidocr-onnxruntime {real.split('rapidocr-onnxruntime ')[1].split(';')[0]}",
            "rapidocr-onnxruntime unknown",
        ),
    )
    before = document.attempt_key(config)
    assert before != installed
    from chunkmill import carryover

    failure = PriorError("v1", before, "extract", "no_text", "no text", "sha")
    assert carryover.is_known_failure(failure, "v1", before)
    assert not carryover.is_known_failure(failure, "v1", installed)


def test_a_run_chunks_a_scan_with_its_pages() -> None:
    data = scanned_pdf(pages=2)
    uri = "scan.pdf"
    outcome = document.process_document(
        WorkItem(ids.doc_id(uri), uri, len(data)), data, Chunking(ChunkingConfig.create())
    )
    assert outcome.status == document.PROCESSED, outcome.error
    rows = outcome.occurrences
    _assert_read(" ".join(r["text"] for r in rows if r["page_start"] == 1))
    assert {r["page_end"] for r in rows} >= {2}


def test_ocr_always_needs_the_engine(monkeypatch) -> None:
    from chunkmill.chunking.base import ParameterError

    monkeypatch.setattr(ocr_engine, "available", lambda: False)
    with pytest.raises(ParameterError, match="ocr"):
        ChunkingConfig.create(ocr="always")
    # auto without the engine: a scan is no_text, as before OCR existed.
    with pytest.raises(ExtractionError) as e:
        extract("scan.pdf", scanned_pdf(), ocr="auto")
    assert e.value.reason == "no_text"


# --- passwords ---------------------------------------------------------------------------


def encrypted_pdf(password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(text_pdf("Secret plans."))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize("engine", ["pypdf", "pdfium", "auto"])
def test_an_encrypted_pdf_opens_with_its_password(engine: str) -> None:
    data = encrypted_pdf("s3cr3t-pw")
    assert extract("x.pdf", data, pdf_engine=engine, pdf_password="s3cr3t-pw").text == (
        "Secret plans."
    )
    for password, says in ((None, "needs a password"), ("wrong", "does not open it")):
        with pytest.raises(ExtractionError) as e:
            extract("x.pdf", data, pdf_engine=engine, pdf_password=password)
        assert e.value.reason == "encrypted"
        assert says in e.value.message and "s3cr3t" not in e.value.message


def test_the_password_comes_from_the_variable_and_never_reaches_a_record(monkeypatch) -> None:
    monkeypatch.setenv("TEST_PDF_PASSWORD", "s3cr3t-pw")
    config = ChunkingConfig.create(pdf_password_env="TEST_PDF_PASSWORD")
    assert config.extract_options()["pdf_password"] == "s3cr3t-pw"
    assert "s3cr3t" not in repr(config) and "s3cr3t" not in str(config.description)
    chunking = Chunking(config)
    data = encrypted_pdf("s3cr3t-pw")
    item = WorkItem(ids.doc_id("x.pdf"), "x.pdf", len(data))
    extractor = Extractor(config.limits, **config.extract_options())
    try:
        outcome = document.process_document(item, data, chunking, extractor)
    finally:
        extractor.close()
    assert outcome.status == document.PROCESSED
    assert outcome.occurrences[0]["text"] == "Secret plans."
    monkeypatch.setenv("TEST_PDF_PASSWORD", "wrong")
    outcome = document.process_document(item, data, chunking)
    assert outcome.error is not None and outcome.error["reason"] == "encrypted"
    assert "--pdf-password-env" in outcome.error["message"]
    assert "s3cr3t" not in str(outcome.error) and "wrong" not in str(outcome.error)
    # The variable's name is in the attempt key: naming one retries a prior failure.
    assert document.attempt_key(config) != document.attempt_key(ChunkingConfig.create())


# --- lines, directions, private use, SVG -----------------------------------------------------


def _raw_pdf(content: bytes) -> bytes:
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = pypdf.PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    stream = DecodedStreamObject()
    stream.set_data(content)
    page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_tightly_set_lines_are_not_glued_together() -> None:
    # 9 points between the baselines of a 12-point font: pypdf alone reads "Line 1Line 2".
    data = _raw_pdf(
        b"BT /F1 12 Tf 72 720 Td (Line 1) Tj 0 -9 Td (Line 2) Tj 0 -9 Td (Line 3 ends) Tj ET"
    )
    assert pypdf.PdfReader(io.BytesIO(data)).pages[0].extract_text().startswith("Line 1Line 2")
    assert extract("t.pdf", data, pdf_engine="pypdf").text == "Line 1\nLine 2\nLine 3 ends"


def test_restoring_breaks_inserts_nothing_where_the_texts_disagree() -> None:
    from chunkmill.extract import pdf

    assert pdf._restore_breaks("one twothree four", "one two\nthree four") == (
        "one two\nthree four"
    )
    assert pdf._restore_breaks("one two three", "one two\nthree") == "one two three"
    assert pdf._restore_breaks("abc def", "xyz\nabc") == "abc def"
    # "side" inside "reside" is not the line's last word.
    assert pdf._restore_breaks("reside sidecar", "reside side\ncar") == "reside side\ncar"


@pytest.mark.skipif(FONT is None, reason="needs DejaVu Sans, which draws Arabic and Hebrew")
def test_auto_reads_arabic_in_a_real_font_in_reading_order(tmp_path: Path) -> None:
    pytest.importorskip("uharfbuzz")  # fpdf2's text shaping: the glyphs as a reader sees them
    hello, world = "\u0645\u0631\u062d\u0628\u0627", "\u0628\u0627\u0644\u0639\u0627\u0644\u0645"
    doc = FPDF()
    doc.add_page()
    doc.add_font("dejavu", "", str(FONT))
    doc.set_font("dejavu", size=14)
    doc.set_text_shaping(True)
    for line in (f"{hello} {world}", "\u05e9\u05dc\u05d5\u05dd", f"see {hello} {world} now"):
        doc.cell(text=line, new_x="LMARGIN", new_y="NEXT")
    data = bytes(doc.output())
    pdfium_text = extract("a.pdf", data, pdf_engine="pdfium").text
    assert f"see {world} {hello} now" in pdfium_text  # pdfium: the words in visual order
    text = extract("a.pdf", data, pdf_engine="auto").text
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert lines[:2] == [f"{hello} {world}", "\u05e9\u05dc\u05d5\u05dd"]
    assert lines[2].replace(" ", "") == f"see{hello}{world}now"


@pytest.mark.parametrize("profile", [cleanup.DOCUMENT, cleanup.PDF])
def test_private_use_code_points_are_dropped_from_typeset_text(profile: str) -> None:
    text = "Next \ue0b0 page \U000f0001\U00100000 end\uf8ff"
    assert cleanup.clean_up(text, profile=profile) == "Next  page  end"
    assert cleanup.clean_up(text, profile=cleanup.VERBATIM) == text


def test_private_use_glyphs_leave_html_and_offsets_hold() -> None:
    html = "<p>Arrow \ue0b0 here</p><p>Second \U000ffffd paragraph</p>".encode()
    doc = extract("p.html", html)
    assert doc.text == "Arrow  here\n\nSecond  paragraph"
    chunks = document.process_document(
        WorkItem(ids.doc_id("p.html"), "p.html", len(html)),
        html,
        Chunking(ChunkingConfig.create("paragraph", max_tokens=200)),
    ).occurrences
    assert all(doc.text[r["char_start"] : r["char_end"]] == r["text"] for r in chunks)


def test_svg_is_read_as_its_text_elements() -> None:
    svg = b"""<?xml version="1.0"?>
<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50">
  <title>Revenue chart</title>
  <desc>Bars per   quarter</desc>
  <style>.label { fill: red }</style>
  <g><text x="1" y="10">Q1 <tspan font-weight="bold">up</tspan></text>
  <text x="1" y="20"><tspan x="1" dy="0">first</tspan><tspan x="1" dy="12">second</tspan></text>
  </g><!-- a comment --><rect width="5" height="5"/>
</svg>"""
    doc = extract("chart.svg", svg)
    assert doc.format == "svg"
    assert doc.text == "Revenue chart\nBars per quarter\nQ1 up\nfirst second"


def test_svg_entities_are_never_expanded_nor_files_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    svg = f"""<?xml version="1.0"?>
<!DOCTYPE svg [
  <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
  <!ENTITY file SYSTEM "file://{secret}">
]>
<svg xmlns="http://www.w3.org/2000/svg"><text>big &c; leak &file; end</text></svg>"""
    doc = extract("bomb.svg", svg.encode())
    assert "TOPSECRET" not in doc.text and "aaaa" not in doc.text
    assert doc.text.startswith("big") and doc.text.endswith("end")
    with pytest.raises(ExtractionError) as e:
        extract("broken.svg", b"<svg><text>unclosed</svg>")
    assert e.value.reason == "corrupt"


def test_svg_goes_to_the_parser_child() -> None:
    from chunkmill.extract import uses_parser

    assert uses_parser("a.svg", b"<svg/>")


def test_without_pdfium_pypdf_reads_alone() -> None:
    # The retry after PDFium crashed on a file: no line ends from PDFium, no OCR render.
    glued = _raw_pdf(b"BT /F1 12 Tf 72 720 Td (Line 1) Tj 0 -9 Td (Line 2) Tj ET")
    assert extract("t.pdf", glued, pdf_engine="auto", use_pdfium=False).text == "Line 1Line 2"
    with pytest.raises(ExtractionError) as e:
        extract("scan.pdf", scanned_pdf(), ocr="always", use_pdfium=False)
    assert e.value.reason == "no_text"
