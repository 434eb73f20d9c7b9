"""Tests of transforms.extract. Every fixture is generated here: text as bytes literals, PDFs
with fpdf2 (and pypdf's writer for encryption)."""

from __future__ import annotations

import io
import logging
import pickle
import unicodedata

import pypdf
import pytest
from fpdf import FPDF
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from chunkmill.extract import (
    EXTRACTOR_VERSION,
    REASONS,
    Extracted,
    ExtractionError,
    detect_format,
    extract,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR\x00\x00\x00\x01" + bytes(range(200))
PAGES = (
    "Alpha page one speaks of apples.",
    "Bravo page two speaks of bridges.\nIt has a second line.",
    "Charlie page three speaks of cherries.",
)


def expect_error(path: str, data: bytes, *reasons: str) -> ExtractionError:
    """extract() raises ExtractionError with one of ``reasons`` and a well-formed message."""
    with pytest.raises(ExtractionError) as info:
        extract(path, data)
    err = info.value
    assert err.reason in reasons, err
    assert err.reason in REASONS
    assert_one_line(err.message)
    return err


def assert_one_line(message: str) -> None:
    assert message
    assert "\n" not in message and "\r" not in message
    assert len(message) <= 300
    assert message.isprintable()


# --- PDF fixtures -----------------------------------------------------------------------------


def make_pdf(pages: tuple[str, ...] = PAGES) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def make_image_only_pdf() -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.image(Image.new("RGB", (16, 16), (200, 30, 30)), x=10, y=10, w=40)
    pdf.rect(10, 80, 50, 20, style="F")
    pdf.add_page()  # and a blank one
    return bytes(pdf.output())


def encrypt(data: bytes, *, user: str, owner: str | None, algorithm: str = "RC4-128") -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user, owner_password=owner, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def pdf_bytes() -> bytes:
    return make_pdf()


@pytest.fixture(scope="module")
def pdf_doc(pdf_bytes: bytes) -> Extracted:
    return extract("gs://bucket/reports/Q3.PDF", pdf_bytes)


# --- formats ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("notes.md", "markdown"),
        ("notes.markdown", "markdown"),
        ("page.MDX", "markdown"),
        ("a.txt", "text"),
        ("a.text", "text"),
        ("index.rst", "rst"),
        ("server.log", "text"),
        ("README", "text"),
        (".gitignore", "text"),
        ("dir.with.dots/LICENSE", "text"),
        ("main.py", "code"),
        ("app.tsx", "code"),
        ("gs://bucket/src/Main.JAVA", "code"),
        ("C:\\src\\lib.rs", "code"),
        ("config.yaml", "code"),
        ("query.sql", "code"),
        ("Makefile", "code"),
        ("s3://b/Dockerfile", "code"),
        ("doc.pdf", "pdf"),
        ("doc.PDF", "pdf"),
        ("data.unknownext", "text"),
        ("archive.2024", "text"),
    ],
)
def test_detect_format_by_extension(path: str, expected: str) -> None:
    data = b"%PDF-1.4 not really" if expected == "pdf" else b"hello\n"
    assert detect_format(path, data) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("notes.md", "markdown"),
        ("a.txt", "text"),
        ("README", "text"),
        ("script.py", "code"),
        ("data.unknownext", "text"),
    ],
)
def test_text_formats_happy_path(path: str, expected: str) -> None:
    raw = "# Title\n\n\tIndented  line with trailing spaces   \nUnicode: café ✓ 𝄞\n"
    doc = extract(path, raw.encode())
    assert doc == Extracted(text=raw, format=expected, page_starts=None)
    assert doc.pages_of(0, len(raw)) is None


def test_utf8_bom_is_stripped_once() -> None:
    assert extract("a.txt", b"\xef\xbb\xbfhello").text == "hello"
    # Only the leading mark is an encoding signature; one inside the text is content.
    assert extract("a.md", b"\xef\xbb\xbf\xef\xbb\xbfhi").text == "\ufeffhi"


@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "a.unknownext"])
def test_crlf_cr_and_lf_twins_extract_identically(path: str) -> None:
    lf = b"line one\nline two\n\nline four\n"
    crlf = lf.replace(b"\n", b"\r\n")
    cr = lf.replace(b"\n", b"\r")
    texts = {extract(path, data).text for data in (lf, crlf, cr)}
    assert texts == {lf.decode()}


def test_newline_normalisation_cases() -> None:
    # "\r\r\n" is a lone CR then a CRLF: two line breaks.
    assert extract("a.txt", b"a\r\r\nb\n\rc\r").text == "a\n\nb\n\nc\n"


@given(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00")))
def test_text_is_the_decoded_bytes_with_only_bom_newlines_and_controls_changed(raw: str) -> None:
    # Valid UTF-8 without NUL: the decoding is exact (NULs and invalid bytes: see below).
    # Line-break controls become line breaks; other controls (but tab) and noncharacters go.
    data = raw.encode("utf-8")
    body = raw.removeprefix("\ufeff").replace("\r\n", "\n")
    body = body.translate({0x0D: "\n", 0x0B: "\n", 0x85: "\n", 0x0C: "\n\n"})
    expected = "".join(
        c
        for c in body
        if c in "\t\n"
        or not (unicodedata.category(c) == "Cc" or unicodedata.category(c) == "Cn" and _nonchar(c))
    )
    try:
        doc = extract("a.txt", data)
    except ExtractionError as e:
        assert_one_line(e.message)
        assert e.reason == "empty"
        assert not expected.strip()
        return
    assert doc.lossy is False
    assert doc.text == expected
    assert "\r" not in doc.text
    crlf = expected.replace("\n", "\r\n").encode("utf-8")
    assert extract("a.txt", crlf).text == expected


def _nonchar(c: str) -> bool:
    return 0xFDD0 <= ord(c) <= 0xFDEF or ord(c) & 0xFFFE == 0xFFFE


# --- text errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "README", "x.unknownext", "a.pdf"])
def test_zero_bytes_is_empty(path: str) -> None:
    expect_error(path, b"", "empty")


@pytest.mark.parametrize(
    "data", [b" ", b"\n\n\n", b" \t\r\n \r ", b"\xef\xbb\xbf", b"\xef\xbb\xbf  \n", b"\xc2\xa0\n"]
)
@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "README"])
def test_whitespace_only_is_empty(path: str, data: bytes) -> None:
    expect_error(path, data, "empty")


@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "notes.rst"])
@pytest.mark.parametrize(
    "data",
    [
        b"caf\xe9 latin-1",  # not UTF-8 at all
        b"ok then \xc3",  # truncated sequence
        b"surrogate \xed\xa0\x80 inside",  # UTF-8-encoded surrogate: invalid UTF-8
    ],
)
def test_invalid_utf8_is_decoded_by_the_detector_and_flagged_lossy(path: str, data: bytes) -> None:
    doc = extract(path, data)
    assert doc.lossy is True
    assert doc.text.isprintable()
    doc.text.encode("utf-8")  # strict: no surrogate reached the text


@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "notes.rst"])
def test_bytes_no_decoder_accepts_are_undecodable(path: str) -> None:
    # Every byte value but NUL, four times over: no encoding makes text of it.
    expect_error(path, bytes(range(1, 256)) * 4, "undecodable")


@pytest.mark.parametrize("path", ["a.txt", "a.md", "a.py", "README", "x.unknownext"])
def test_nul_byte_is_binary(path: str) -> None:
    err = expect_error(path, b"looks like text\x00but is not", "binary")
    assert "offset 15" in err.message


@pytest.mark.parametrize("path", ["image.txt", "image.md", "image.py"])
@pytest.mark.parametrize("junk", [b"", b"valid ascii junk", b"\xff\xfe\xfd", bytes(range(256))])
def test_png_named_as_text_is_binary(path: str, junk: bytes) -> None:
    data = b"\x89PNG\r\n\x1a\n" + junk
    err = expect_error(path, data, "binary")
    assert "PNG" in err.message
    with pytest.raises(ExtractionError):
        detect_format(path, data)


@pytest.mark.parametrize(
    "data",
    [PNG, b"\xff\xd8\xff\xe0JFIF", b"PK\x03\x04zip", b"\x7fELF\x02\x01", b"\xc0\xc1 no nul \xfe"],
)
@pytest.mark.parametrize("path", ["photo.png", "blob.bin", "noextension", "x.weird?sig=SECRET"])
def test_unknown_extension_with_binary_is_rejected(path: str, data: bytes) -> None:
    err = expect_error(path, data, "unsupported", "binary")
    assert "SECRET" not in err.message


def test_unknown_extension_non_utf8_is_unsupported_and_names_the_extension() -> None:
    err = expect_error("table.dat", b"caf\xe9", "unsupported")
    assert "'.dat'" in err.message


# --- PDFs ---------------------------------------------------------------------------------------


def test_pdf_text_and_page_starts(pdf_doc: Extracted) -> None:
    assert pdf_doc.format == "pdf"
    starts = pdf_doc.page_starts
    assert starts is not None and len(starts) == len(PAGES)
    assert starts[0] == 0
    bounds = [*starts, len(pdf_doc.text) + 2]
    for i, page_text in enumerate(PAGES):
        page = pdf_doc.text[bounds[i] : bounds[i + 1] - 2]
        assert page == page.rstrip()
        # pypdf may reflow whitespace; the words of each page are on that page.
        assert page.split() == page_text.split()
        if i > 0:
            assert pdf_doc.text[bounds[i] - 2 : bounds[i]] == "\n\n"


def test_pdf_pages_of(pdf_doc: Extracted) -> None:
    text, starts = pdf_doc.text, pdf_doc.page_starts
    assert starts is not None
    bridges = text.index("bridges")
    assert pdf_doc.pages_of(bridges, bridges + len("bridges")) == (2, 2)
    apples = text.index("apples")
    assert pdf_doc.pages_of(apples, bridges + 1) == (1, 2)
    assert pdf_doc.pages_of(0, len(text)) == (1, 3)
    # end is exclusive: a span ending where page 2 starts stays on page 1.
    assert pdf_doc.pages_of(0, starts[1]) == (1, 1)
    assert pdf_doc.pages_of(starts[1], starts[1] + 1) == (2, 2)
    assert pdf_doc.pages_of(starts[2], starts[2]) == (3, 3)


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 4), (0, 10**9)])
def test_pages_of_rejects_spans_outside_the_text(pdf_doc: Extracted, start: int, end: int) -> None:
    with pytest.raises(ValueError):
        pdf_doc.pages_of(start, end)


def test_pdf_is_deterministic(pdf_bytes: bytes, pdf_doc: Extracted) -> None:
    assert extract("again.pdf", pdf_bytes) == pdf_doc


@pytest.mark.parametrize("junk_len", [1, 500, 1024])
def test_pdf_header_after_leading_junk_is_accepted(pdf_bytes: bytes, junk_len: int) -> None:
    doc = extract("a.pdf", b"x" * junk_len + pdf_bytes)
    assert "bridges" in doc.text


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"%PDF", id="header-only"),
        pytest.param(b"%PDF-1.7\n", id="header-line-only"),
        pytest.param(b"<!doctype html><html><body>Not found</body></html>", id="html"),
        pytest.param(b"x" * 1025 + b"%PDF-1.4\n", id="header-too-late"),
        pytest.param(b"\x89PNG\r\n\x1a\n" + bytes(64), id="png"),
    ],
)
def test_not_a_pdf_is_corrupt(data: bytes) -> None:
    expect_error("a.pdf", data, "corrupt")


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9])
def test_truncated_pdf_is_corrupt(pdf_bytes: bytes, fraction: float) -> None:
    err = expect_error("a.pdf", pdf_bytes[: int(len(pdf_bytes) * fraction)], "corrupt")
    assert err.message.startswith("pypdf: ")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(make_image_only_pdf(), id="image-only"),
        pytest.param(make_pdf(("", "")), id="blank-pages"),
    ],
)
def test_pdf_without_text_is_no_text(data: bytes) -> None:
    expect_error("scan.pdf", data, "no_text")


def test_pdf_with_user_password_is_encrypted(pdf_bytes: bytes) -> None:
    data = encrypt(pdf_bytes, user="secret", owner="owner")
    err = expect_error("locked.pdf", data, "encrypted")
    assert "secret" not in err.message


def test_pdf_with_only_user_password_is_encrypted(pdf_bytes: bytes) -> None:
    expect_error("locked.pdf", encrypt(pdf_bytes, user="secret", owner=None), "encrypted")


def test_pdf_with_empty_user_password_extracts(pdf_bytes: bytes, pdf_doc: Extracted) -> None:
    data = encrypt(pdf_bytes, user="", owner="owner-only")
    assert extract("restricted.pdf", data) == pdf_doc


@pytest.mark.parametrize("algorithm", ["AES-128", "AES-256"])
def test_aes_pdf_with_empty_user_password_extracts(
    pdf_bytes: bytes, pdf_doc: Extracted, algorithm: str
) -> None:
    data = encrypt(pdf_bytes, user="", owner="owner-only", algorithm=algorithm)
    assert extract("restricted.pdf", data) == pdf_doc


def test_pdf_with_unsupported_encryption_handler_is_encrypted(pdf_bytes: bytes) -> None:
    data = encrypt(pdf_bytes, user="", owner="o").replace(b"/Standard", b"/Adobe.PubSec")
    err = expect_error("pubsec.pdf", data, "encrypted")
    assert err.message.startswith("pypdf: NotImplementedError: ")


# --- PDF error wrapping and page assembly, with pypdf replaced ----------------------------------


class _FakePage:
    def __init__(self, text: str | None) -> None:
        self._text = text

    def extract_text(self) -> str | None:
        return self._text


def _fake_reader(*page_texts: str | None, error: BaseException | None = None):
    class FakeReader:
        is_encrypted = False

        def __init__(self, stream, strict: bool) -> None:
            assert strict is False
            if error is not None:
                raise error
            self.pages = [_FakePage(t) for t in page_texts]

    return FakeReader


def test_pdf_pages_are_normalised_stripped_and_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pypdf, "PdfReader", _fake_reader("a \r\n b  \r\n", None, "\rc\t"))
    doc = extract("a.pdf", b"%PDF-1.4")
    assert doc.text == "a \n b\n\n\n\n\nc"
    assert doc.page_starts == (0, 7, 9)
    assert doc.pages_of(doc.text.index("c"), len(doc.text)) == (3, 3)
    assert doc.pages_of(0, 1) == (1, 1)


def test_pdf_surrogates_become_valid_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pypdf, "PdfReader", _fake_reader("pair \ud834\udd1e stray \udc00"))
    doc = extract("a.pdf", b"%PDF-1.4")
    assert doc.text == "pair \U0001d11e stray \ufffd"
    doc.text.encode("utf-8")  # strict: no surrogate left


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pypdf.errors.PdfReadError("bad xref\nat 12"), "corrupt"),
        (pypdf.errors.PdfStreamError("Stream has ended unexpectedly"), "corrupt"),
        (KeyError("/Root"), "corrupt"),
        (ValueError("x" * 5000), "corrupt"),
        (RecursionError("maximum recursion depth exceeded"), "corrupt"),
        (pypdf.errors.DependencyError("cryptography>=3.1 is required for AES"), "encrypted"),
        (pypdf.errors.FileNotDecryptedError("File has not been decrypted"), "encrypted"),
    ],
)
def test_pypdf_exceptions_are_wrapped(
    monkeypatch: pytest.MonkeyPatch, error: Exception, reason: str
) -> None:
    monkeypatch.setattr(pypdf, "PdfReader", _fake_reader(error=error))
    err = expect_error("a.pdf", b"%PDF-1.7", reason)
    assert err.message.startswith(f"pypdf: {type(error).__name__}: ")


@pytest.mark.parametrize("error", [MemoryError(), KeyboardInterrupt()])
def test_memory_error_and_interrupt_propagate(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    monkeypatch.setattr(pypdf, "PdfReader", _fake_reader(error=error))
    with pytest.raises(type(error)):
        extract("a.pdf", b"%PDF-1.7")


# --- the error and result types -----------------------------------------------------------------


def test_reasons_are_the_documented_set() -> None:
    expected = {"empty", "binary", "undecodable", "corrupt", "encrypted", "no_text", "unsupported"}
    assert expected | {"timeout", "memory", "too_large"} == REASONS


def test_unknown_reason_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        ExtractionError("mystery", "message")


@pytest.mark.parametrize(
    "message", ["two\nlines\r\nhere", "tab\tand  spaces", "esc \x1b[31mred\x1b[0m", "y" * 1000]
)
def test_error_message_is_one_printable_bounded_line(message: str) -> None:
    err = ExtractionError("corrupt", message)
    assert_one_line(err.message)
    assert str(err) == err.message


def test_error_message_collapses_whitespace() -> None:
    assert ExtractionError("corrupt", " a\n\n b\t c ").message == "a b c"


def test_error_and_result_pickle(pdf_doc: Extracted) -> None:
    err = pickle.loads(pickle.dumps(ExtractionError("binary", "NUL byte at offset 3")))
    assert (err.reason, err.message) == ("binary", "NUL byte at offset 3")
    assert pickle.loads(pickle.dumps(pdf_doc)) == pdf_doc


def test_extracted_is_frozen(pdf_doc: Extracted) -> None:
    with pytest.raises(AttributeError):
        pdf_doc.text = "changed"  # type: ignore[misc]


def test_extractor_version_is_a_nonempty_string() -> None:
    assert isinstance(EXTRACTOR_VERSION, str) and EXTRACTOR_VERSION


def test_pypdf_logger_is_quiet() -> None:
    assert logging.getLogger("pypdf").level == logging.ERROR
    assert not logging.getLogger("pypdf._reader").isEnabledFor(logging.WARNING)
