"""The text both PDF engines give for real PDFs (made here with fpdf2): ligatures, line-end
hyphenation, form feeds, pdfium's U+FFFE, right-to-left lines; and the offset contract over
the sample corpus once the text is cleaned up."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fontTools.fontBuilder import FontBuilder
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fpdf import FPDF

from chunkmill import document, ids
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.extract import ExtractionError, extract, pdf
from chunkmill.items import WorkItem
from tests.unit.chunker_contract import SAMPLE_CORPUS

ENGINES = ("pypdf", "pdfium")
HELLO, WORLD = "\u0645\u0631\u062d\u0628\u0627", "\u0628\u0627\u0644\u0639\u0627\u0644\u0645"


def box_font(chars: str) -> bytes:
    """A TrueType font that draws each of ``chars`` (and the space) as a box: enough for a
    PDF whose text layer holds any characters (ligatures, Arabic, ...), without depending on
    the fonts a machine has."""
    glyphs = {c: f"u{ord(c):04X}" for c in sorted(set(chars) | {" "})}
    names = [".notdef", *glyphs.values()]
    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap({ord(c): name for c, name in glyphs.items()})
    outlines = {}
    for name in names:
        pen = TTGlyphPen(None)
        if name != glyphs[" "]:
            pen.moveTo((50, 0))
            pen.lineTo((50, 700))
            pen.lineTo((450, 700))
            pen.lineTo((450, 0))
            pen.closePath()
        outlines[name] = pen.glyph()
    builder.setupGlyf(outlines)
    builder.setupHorizontalMetrics(dict.fromkeys(names, (500, 50)))
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": "Box", "styleName": "Regular"})
    builder.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    builder.setupPost()
    out = io.BytesIO()
    builder.save(out)
    return out.getvalue()


def _pdf(tmp_path: Path, pages: list[list[str]], *, outline: str | None = None) -> bytes:
    """One page per list; each string one line, drawn as one text run (control characters
    included), or, for a string starting with ``"@"``, one glyph at a time, left to right,
    as many producers draw text."""
    every = "".join(line for page in pages for line in page) + (outline or "")
    font = tmp_path / "box.ttf"
    font.write_bytes(box_font(every))
    doc = FPDF()
    doc.add_font("box", "", str(font))
    doc.set_font("box", size=12)
    for index, lines in enumerate(pages):
        doc.add_page()
        if outline is not None and index == 0:
            doc.start_section(outline)
        for number, line in enumerate(lines, start=1):
            y = doc.t_margin + 8 * number
            if not line.startswith("@"):
                doc.text(doc.l_margin, y, line)
                continue
            x = doc.l_margin
            for glyph in line[1:]:
                doc.text(x, y, glyph)
                x += doc.get_string_width(glyph)
    return bytes(doc.output())


@pytest.fixture(scope="module")
def typeset(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Ligatures, a word hyphenated at a line end, a form feed, NBSP and a soft hyphen on
    page 1, a word hyphenated across the page break, then page 2."""
    return _pdf(
        tmp_path_factory.mktemp("typeset"),
        [
            [
                "\ufb01nance o\ufb03ce",
                "the infor-",
                "mation age",
                "X-",
                "Ray",
                "part one\x0cpart two",
                "10\xa0km of hy\xadphen\xadated text, cross-",
            ],
            ["page two"],
        ],
        outline="\ufb01nance o\ufb03ce",
    )


EXPECTED = (
    "finance office\nthe information age\nX-\nRay\npart one\n\npart two\n"
    "10 km of hyphenated text, cross-\n\npage two"
)


def test_what_the_engines_yield_raw(typeset: bytes) -> None:
    # The premise: without the clean-up, pypdf keeps the ligatures, pdfium marks a hyphen
    # that ends a line with U+FFFE (and drops the line break), both keep the form feed.
    pypdf_page = pdf._pypdf_pages(typeset, None)[0][0]
    pdfium_page = pdf._pdfium_pages(typeset, None)[0][0]
    assert "\ufb01nance o\ufb03ce" in pypdf_page
    assert "infor-\nmation" in pypdf_page
    assert "infor\ufffemation" in pdfium_page
    assert "\x0c" in pypdf_page and "\x0c" in pdfium_page


@pytest.mark.parametrize("engine", [*ENGINES, "auto"])
def test_both_engines_give_the_same_clean_text(typeset: bytes, engine: str) -> None:
    doc = extract("typeset.pdf", typeset, pdf_engine=engine)
    assert doc.text == EXPECTED
    assert doc.page_starts == (0, EXPECTED.index("page two"))
    assert doc.pages_of(EXPECTED.index("page two"), len(EXPECTED)) == (2, 2)
    assert doc.pages_of(0, EXPECTED.index("cross-") + 6) == (1, 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_outline_title_with_a_ligature_is_found_on_its_page(typeset: bytes, engine: str) -> None:
    doc = extract("typeset.pdf", typeset, pdf_engine=engine)
    assert doc.outline == ((0, ("finance office",)),)
    assert doc.section_at(0) == ("finance office",)


@pytest.fixture(scope="module")
def right_to_left(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """Two PDFs that draw right-to-left text the way a renderer lays it out, in visual
    order (each right-to-left word reversed, words right to left): a line that mixes it with
    Latin words in one text run; and right-to-left lines alone, drawn glyph by glyph."""
    tmp = tmp_path_factory.mktemp("rtl")
    mixed = _pdf(tmp, [[f"see {WORLD[::-1]} {HELLO[::-1]} now"]])
    (tmp / "pure").mkdir()
    pure = _pdf(tmp / "pure", [[f"@{WORLD[::-1]} {HELLO[::-1]}", f"@{HELLO[::-1]}"]])
    return mixed, pure


def _order(text: str) -> list[str]:
    return sorted((HELLO, WORLD), key=lambda word: text.index(word))


def test_auto_reads_a_line_mixing_directions_with_pypdf(right_to_left: tuple[bytes, bytes]) -> None:
    mixed, _ = right_to_left
    # pdfium puts the right-to-left words in their order on the page (visual order).
    assert _order(extract("m.pdf", mixed, pdf_engine="pdfium").text) == [WORLD, HELLO]
    pypdf_text = extract("m.pdf", mixed, pdf_engine="pypdf").text
    assert _order(pypdf_text) == [HELLO, WORLD]
    assert extract("m.pdf", mixed, pdf_engine="auto").text == pypdf_text


def test_auto_keeps_pdfium_for_right_to_left_lines_alone(
    right_to_left: tuple[bytes, bytes],
) -> None:
    _, pure = right_to_left
    pdfium_text = extract("p.pdf", pure, pdf_engine="pdfium").text
    assert pdfium_text == f"{HELLO} {WORLD}\n{HELLO}"
    # pypdf reverses glyphs drawn one by one: no engine switch for such lines.
    assert extract("p.pdf", pure, pdf_engine="pypdf").text != pdfium_text
    assert extract("p.pdf", pure, pdf_engine="auto").text == pdfium_text


@pytest.mark.parametrize(
    ("pages", "mixed"),
    [
        (["plain latin\nonly"], False),
        ([f"{HELLO} {WORLD}\n{HELLO} 2024"], False),
        ([f"{HELLO} 2024\nlatin"], False),
        (["latin", f"see {HELLO} now"], True),
        (["\u05e9\u05dc\u05d5\u05dd world"], True),
        ([f"{HELLO}\r\nlatin"], False),
    ],
)
def test_mixes_directions(pages: list[str], mixed: bool) -> None:
    assert pdf._mixes_directions(pages) is mixed


def _sample_files() -> list[Path]:
    return sorted(p for p in SAMPLE_CORPUS.rglob("*") if p.is_file())


@pytest.mark.parametrize("engine", [*ENGINES, "auto"])
def test_offset_contract_holds_over_the_sample_corpus(engine: str) -> None:
    chunking = Chunking(ChunkingConfig.create(pdf_engine=engine))
    for path in _sample_files():
        uri = path.as_posix()
        data = path.read_bytes()
        outcome = document.process_document(
            WorkItem(ids.doc_id(uri), uri, len(data)), data, chunking
        )
        try:
            doc = extract(uri, data, pdf_engine=engine)
        except ExtractionError as e:  # the corpus's broken PDF
            assert outcome.error is not None and outcome.error["reason"] == e.reason, uri
            continue
        assert not any(
            (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F or c in "\ufffe\uffff"
            for c in doc.text
        ), uri
        assert outcome.status == document.PROCESSED, (uri, outcome.error)
        spans = []
        for row in outcome.occurrences:
            assert row["text"] == doc.text[row["char_start"] : row["char_end"]], uri
            if doc.page_starts is not None:
                assert (row["page_start"], row["page_end"]) == doc.pages_of(
                    row["char_start"], row["char_end"]
                )
            spans.append((row["char_start"], row["char_end"]))
        # Every non-whitespace character of the cleaned text is in some chunk.
        covered = 0
        for start, end in spans:
            assert not doc.text[covered:start].strip(), (uri, covered, start)
            covered = max(covered, end)
        assert not doc.text[covered:].strip(), uri
