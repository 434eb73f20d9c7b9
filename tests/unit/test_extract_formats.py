"""Formats beyond plain text: HTML, JSON, JSONL, CSV, DOCX, format sniffing, and the PDF
engines with their page cap. Every fixture is generated here."""

from __future__ import annotations

import io
import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkmill import document, ids
from chunkmill.config import AUTO_STRATEGIES, Chunking, ChunkingConfig
from chunkmill.extract import FORMATS, ExtractionError, detect_format, extract, pdf
from chunkmill.items import WorkItem
from tests.helpers import SMALL, make_pdf
from tests.hostile_corpus import encrypt

PAGES = ["Alpha page one speaks of apples.", "Bravo page two.\nSecond line.", "Charlie three."]
PDF_TEXT = "Alpha page one speaks of apples.\n\nBravo page two.\nSecond line.\n\nCharlie three."


# --- HTML ---------------------------------------------------------------------------------------

PAGE = b"""<!DOCTYPE html>
<html><head><title>Tab title</title><style>p { color: red }</style>
<script>var secret = "not text";</script></head>
<body>
<!-- a comment -->
<nav><a href="/">Home</a></nav>
<h1>Guide &amp; Reference</h1>
<p>First   paragraph with <b>bold</b>
and a <a href="https://example.com">link</a>.</p>
<h2>Install</h2>
<ul><li>one</li><li>two</li></ul>
<pre>code  line 1
    indented line 2</pre>
<table><tr><th>key</th><th>value</th></tr><tr><td>a</td><td>1</td></tr></table>
<noscript>enable JS</noscript><script>alert(1)</script>
</body></html>"""

PAGE_TEXT = """Home

# Guide & Reference

First paragraph with bold and a link.

## Install

one

two

code  line 1
    indented line 2

key | value

a | 1"""


def test_html_is_visible_text_with_markdown_headings() -> None:
    doc = extract("docs/guide.html", PAGE)
    assert doc.format == "html"
    assert doc.text == PAGE_TEXT
    assert doc.lossy is False


@pytest.mark.parametrize("path", ["page.htm", "page.XHTML", "no-extension", "page.unknownext"])
def test_html_by_extension_or_by_sniffing(path: str) -> None:
    assert detect_format(path, PAGE) == "html"


def test_html_nested_thousands_deep_is_not_a_recursion_error() -> None:
    doc = extract("deep.html", b"<div>" * 20_000 + b"deep text" + b"</div>" * 20_000)
    assert doc.text == "deep text"


def test_html_without_visible_text_is_empty() -> None:
    with pytest.raises(ExtractionError) as info:
        extract("blank.html", b"<html><head><script>x()</script></head><body> </body></html>")
    assert info.value.reason == "empty"


def test_html_is_chunked_by_its_headings_under_auto() -> None:
    data = b"<h1>Alpha</h1><p>" + b"alpha words " * 30 + b"</p><h1>Beta</h1><p>beta text</p>"
    uri = "/c/page.html"
    out = document.process_document(
        WorkItem(ids.doc_id(uri), uri, len(data)), data, Chunking(ChunkingConfig.create())
    )
    assert out.status == document.PROCESSED, out.error
    assert {o["strategy"] for o in out.occurrences} == {"section"}
    assert [o["section_path"] for o in out.occurrences][-1] == ["Beta"]


# --- structured data ----------------------------------------------------------------------------


def test_json_array_of_records() -> None:
    data = b'[{"name": "Ada", "tags": ["x", "y"], "address": {"city": "London"}}, {"n": null}]'
    doc = extract("people.json", data)
    assert doc.format == "json"
    assert doc.text == "name: Ada\ntags[0]: x\ntags[1]: y\naddress.city: London\n\nn: null"


def test_json_object_is_one_record_per_top_level_key() -> None:
    data = b'{"title": "Multi\\nline", "meta": {"v": 2, "ok": true, "empty": []}}'
    assert (
        extract("a.json", data).text
        == "title: Multi line\n\nmeta.v: 2\nmeta.ok: true\nmeta.empty: []"
    )


def test_jsonl_is_one_record_per_line() -> None:
    data = b'{"id": 1, "q": "why?"}\n\n{"id": 2, "q": "how?"}\r\n'
    doc = extract("log.jsonl", data)
    assert (doc.format, doc.text) == ("jsonl", "id: 1\nq: why?\n\nid: 2\nq: how?")


def test_jsonl_bad_line_is_corrupt_and_named() -> None:
    with pytest.raises(ExtractionError) as info:
        extract("log.ndjson", b'{"id": 1}\nnot json\n')
    assert info.value.reason == "corrupt" and "line 2" in info.value.message


@pytest.mark.parametrize("data", [b"[]", b"{}", b" [ ]\n"])
def test_json_without_records_is_empty(data: bytes) -> None:
    with pytest.raises(ExtractionError) as info:
        extract("a.json", data)
    assert info.value.reason == "empty"


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("t.csv", b"name,city\nAda,London\nBob,\n"),
        ("t.csv", b"name;city\r\nAda;London\r\nBob;\r\n"),
        ("t.tsv", b"name\tcity\nAda\tLondon\nBob\t\n"),
    ],
)
def test_csv_rows_are_records_of_named_fields(path: str, data: bytes) -> None:
    doc = extract(path, data)
    assert (doc.format, doc.text) == ("csv", "name: Ada\ncity: London\n\nname: Bob")


def test_csv_extra_cells_and_quoted_newlines() -> None:
    data = b'a,b\n1,"two\nlines",extra\n'
    assert extract("t.csv", data).text == "a: 1\nb: two lines\ncolumn 3: extra"


# --- DOCX ---------------------------------------------------------------------------------------


def make_docx() -> bytes:
    import docx

    doc = docx.Document()
    doc.add_heading("Top title", level=1)
    doc.add_paragraph("Body text here.")
    doc.add_heading("Sub", level=2)
    table = doc.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "k", (0, 1): "v", (1, 0): "a", (1, 1): "b"}.items():
        table.cell(r, c).text = text
    doc.add_paragraph("After table.")
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def test_docx_paragraphs_headings_and_tables_in_order() -> None:
    doc = extract("memo.docx", make_docx())
    assert doc.format == "docx"
    assert doc.text == "# Top title\n\nBody text here.\n\n## Sub\n\nk | v\na | b\n\nAfter table."


# --- sniffing and the auto table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "data", "expected"),
    [
        ("noext", b"%PDF-1.7\n...", "pdf"),
        ("scan.bin", b"%PDF-1.4\n...", "pdf"),
        ("notes.rst", b"Title\n=====\n", "rst"),
        ("doc.docx", b"anything", "docx"),
        ("data.json", b"{}", "json"),
        ("data.ndjson", b"{}", "jsonl"),
        ("config.jsonc", b"{}", "code"),
    ],
)
def test_format_by_extension_and_content(path: str, data: bytes, expected: str) -> None:
    assert detect_format(path, data) == expected


@pytest.mark.parametrize("path", ["image.md", "image.html", "image.json", "image.csv", "a.rst"])
def test_png_named_as_any_text_format_is_binary(path: str) -> None:
    with pytest.raises(ExtractionError) as info:
        extract(path, b"\x89PNG\r\n\x1a\n" + bytes(100))
    assert info.value.reason == "binary"


def test_auto_has_a_strategy_for_every_format() -> None:
    assert set(AUTO_STRATEGIES) == set(FORMATS)


# --- PDF engines --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pdf_bytes() -> bytes:
    return make_pdf(PAGES)


@pytest.mark.parametrize("engine", ["pypdf", "pdfium", "auto"])
def test_every_engine_gives_page_text_and_page_starts(pdf_bytes: bytes, engine: str) -> None:
    doc = extract("a.pdf", pdf_bytes, pdf_engine=engine)
    assert doc.text == PDF_TEXT
    assert doc.page_starts == (0, 34, 64)


@pytest.mark.parametrize("engine", ["pypdf", "pdfium", "auto"])
def test_page_cap_is_too_large(pdf_bytes: bytes, engine: str) -> None:
    with pytest.raises(ExtractionError) as info:
        extract("a.pdf", pdf_bytes, pdf_engine=engine, max_pdf_pages=2)
    assert info.value.reason == "too_large" and "3 pages" in info.value.message
    assert extract("a.pdf", pdf_bytes, pdf_engine=engine, max_pdf_pages=3).text == PDF_TEXT


@pytest.mark.parametrize("engine", ["pdfium", "auto"])
def test_pdfium_encryption(pdf_bytes: bytes, engine: str) -> None:
    locked = encrypt(pdf_bytes, user="secret", owner="o", algorithm="AES-128")
    with pytest.raises(ExtractionError) as info:
        extract("locked.pdf", locked, pdf_engine=engine)
    assert info.value.reason == "encrypted"
    opened = encrypt(pdf_bytes, user="", owner="o", algorithm="AES-256")
    assert extract("open.pdf", opened, pdf_engine=engine).text == PDF_TEXT


def test_auto_falls_back_to_pypdf_when_pdfium_fails(
    pdf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def pdfium_fails(data: bytes, max_pages: int | None, password: str | None) -> list[str]:
        raise ExtractionError("corrupt", "pdfium: PdfiumError: Failed to load page")

    monkeypatch.setattr(pdf, "_pdfium_pages", pdfium_fails)
    assert extract("a.pdf", pdf_bytes, pdf_engine="auto").text == PDF_TEXT
    with pytest.raises(ExtractionError) as info:
        extract("a.pdf", pdf_bytes, pdf_engine="pdfium")
    assert info.value.message.startswith("pdfium: ")


def test_auto_reports_pypdf_error_when_both_fail(pdf_bytes: bytes) -> None:
    with pytest.raises(ExtractionError) as info:
        extract("a.pdf", pdf_bytes[: len(pdf_bytes) // 2], pdf_engine="auto")
    assert info.value.reason == "corrupt" and info.value.message.startswith("pypdf: ")


def test_pdf_engine_is_part_of_the_fingerprint() -> None:
    default = ChunkingConfig.create()
    assert default.description["pdf_engine"] == "pypdf"
    fingerprints = {ChunkingConfig.create(pdf_engine=e).fingerprint for e in pdf.ENGINES}
    assert len(fingerprints) == 3 and default.fingerprint in fingerprints
    with pytest.raises(ValueError, match="pdf_engine"):
        ChunkingConfig.create(pdf_engine="tesseract")


def test_limits_stay_out_of_the_fingerprint() -> None:
    from chunkmill.config import Limits

    tight = ChunkingConfig.create(limits=Limits(timeout_seconds=1, memory_mb=10))
    assert tight.fingerprint == ChunkingConfig.create().fingerprint


def test_lossy_flag_reaches_the_chunk_rows() -> None:
    uri = "/c/latin.txt"
    text = "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u201cspecial\u201d \u2014 tr\u00e8s bon. " * 4
    for data, lossy in ((text.encode("cp1252"), True), (text.encode(), False)):
        out = document.process_document(
            WorkItem(ids.doc_id(uri), uri, len(data)), data, Chunking(SMALL)
        )
        assert out.status == document.PROCESSED, out.error
        assert {o["decode_lossy"] for o in out.occurrences} == {lossy}


# --- PDF outlines -------------------------------------------------------------------------------


def make_outlined_pdf() -> bytes:
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("Helvetica", size=12)

    def para(text: str) -> None:
        doc.multi_cell(0, 10, text, new_x="LMARGIN", new_y="NEXT")

    doc.add_page()
    para("Preface before any bookmark.")
    doc.start_section("Intro", level=0)
    para("Intro")
    para("Intro text here.")
    doc.start_section("Details", level=1)
    para("Details")
    para("Details text.")
    doc.add_page()
    doc.start_section("Second", level=0)
    para("Second")
    para("Second chapter text.")
    return bytes(doc.output())


@pytest.mark.parametrize("engine", ["pypdf", "pdfium"])
def test_pdf_outline_gives_heading_paths_where_titles_are_printed(engine: str) -> None:
    doc = extract("book.pdf", make_outlined_pdf(), pdf_engine=engine)
    at = {w: doc.section_at(doc.text.index(w)) for w in ("Preface", "Details text", "Second ch")}
    assert at == {"Preface": (), "Details text": ("Intro", "Details"), "Second ch": ("Second",)}
    assert doc.outline is not None
    assert [offset for offset, _ in doc.outline] == [
        doc.text.index("Intro\n"),
        doc.text.index("Details\n"),
        doc.text.index("Second\n"),
    ]


def test_pdf_without_outline_has_no_section_paths(pdf_bytes: bytes) -> None:
    doc = extract("a.pdf", pdf_bytes)
    assert doc.outline is None and doc.section_at(0) is None


def test_outline_skips_bad_pages_and_falls_back_to_the_page_top() -> None:
    texts = ["first page", "second page"]
    bookmarks = [(None, 0, "no dest"), (7, 0, "missing page"), (1, 0, "Not printed"), (0, 3, "")]
    assert pdf._outline(bookmarks, texts, [0, 12]) == ((12, ("Not printed",)),)
    assert pdf._outline([], texts, [0, 12]) is None
    # A level deeper than the path so far nests under what there is.
    assert pdf._outline([(0, 0, "A"), (0, 5, "page")], texts, [0, 12]) == (
        (0, ("A",)),
        (6, ("A", "page")),
    )


def test_pdf_chunks_carry_the_outline_path() -> None:
    uri = "/c/book.pdf"
    data = make_outlined_pdf()
    config = ChunkingConfig.create("paragraph", max_tokens=8, overlap_tokens=0)
    out = document.process_document(
        WorkItem(ids.doc_id(uri), uri, len(data)), data, Chunking(config)
    )
    assert out.status == document.PROCESSED, out.error
    paths = [o["section_path"] for o in out.occurrences]
    assert paths[0] == [] and paths[-1] == ["Second"] and ["Intro", "Details"] in paths


# --- decoding -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text", "lossy"),
    [
        (b"\xff\xfe" + "a\u00e9".encode("utf-16-le") + b"\x00\xd8", "a\u00e9\ufffd", True),
        (b"\x00\x00\xfe\xff" + "x\r\ny".encode("utf-32-be"), "x\ny", False),
        (b"\xef\xbb\xbfok \xff", "ok \ufffd", True),
        ("h\u00e9llo\r\n".encode("utf-16-be"), "h\u00e9llo\n", False),
    ],
)
def test_marks_and_utf16_patterns(data: bytes, text: str, lossy: bool) -> None:
    doc = extract("a.txt", data)
    assert (doc.text, doc.lossy) == (text, lossy)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["any.txt", "any.json", "any.csv", "any.html"]))
def test_any_bytes_give_parquet_safe_text_or_a_reason(data: bytes, path: str) -> None:
    try:
        doc = extract(path, data)
    except ExtractionError as e:
        assert e.reason in {"empty", "binary", "undecodable", "corrupt"}
        return
    assert not any(unicodedata.category(c) in ("Cc", "Cs") and c not in "\t\n" for c in doc.text)
    assert "\ufffe" not in doc.text and "\uffff" not in doc.text
    doc.text.encode("utf-8")  # strict: no lone surrogate


def test_html_pre_is_verbatim_even_with_elements_inside() -> None:
    data = (
        b"<p>before</p><pre><code>x  =  1\n<b>y</b>  =  2\n</code>"
        b"<pre>  inner</pre></pre><p>after</p>"
    )
    assert extract("a.html", data).text == "before\n\nx  =  1\ny  =  2\n  inner\n\nafter"


# --- the clean-up profile of each format --------------------------------------------------------

# Ligature, soft hyphen, NBSP, a control, a noncharacter, a form feed, a line-end hyphen.
_DIRTY = "\ufb01nance infor\xadmation 10\xa0km bell\x07 x\ufdd0y a\x0cb infor-\nmation"
_VERBATIM = "\ufb01nance infor\xadmation 10\xa0km bell xy a\n\nb infor-\nmation"


@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "a.rst", "README"])
def test_text_formats_lose_only_what_cannot_be_meant(path: str) -> None:
    assert extract(path, _DIRTY.encode()).text == _VERBATIM


def test_json_and_csv_values_keep_ligatures_and_lose_controls() -> None:
    record = {"name": "\ufb01nance\x07 o\ufb03ce\ufffe", "note": "x\u00b2\xadx"}
    assert extract("a.json", json.dumps([record]).encode()).text == (
        "name: \ufb01nance o\ufb03ce\nnote: x\u00b2\xadx"
    )
    assert extract("a.csv", "name\n\ufb01nance\x07\n".encode()).text == "name: \ufb01nance"


def test_html_and_docx_lose_typesetting_artefacts() -> None:
    import docx

    html = "<pre>\ufb01nance\xa0o\ufb03ce\x0cinfor\xadmation\ufdd0</pre><p>hy-\nphen</p>"
    assert extract("a.html", html.encode()).text == "finance office\n\ninformation\n\nhy- phen"
    doc = docx.Document()
    doc.add_paragraph("\ufb01nance\xa0o\ufb03ce infor\xadmation")
    buffer = io.BytesIO()
    doc.save(buffer)
    assert extract("a.docx", buffer.getvalue()).text == "finance office information"
