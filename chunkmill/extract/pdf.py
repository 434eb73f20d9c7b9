"""PDF text, page by page, with pypdf or pypdfium2 (``engine``)."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import unicodedata
from typing import TYPE_CHECKING, Any

from chunkmill.extract import cleanup
from chunkmill.extract.base import Extracted, ExtractionError, clean_text

if TYPE_CHECKING:
    import pypdf

PYPDF, PDFIUM, AUTO = "pypdf", "pdfium", "auto"
ENGINES = (PYPDF, PDFIUM, AUTO)
# --ocr: pages without a text layer read by OCR when an engine is installed (auto), never,
# or every page whatever its text layer holds (always).
OCR_NEVER, OCR_AUTO, OCR_ALWAYS = "never", "auto", "always"
OCR_MODES = (OCR_AUTO, OCR_NEVER, OCR_ALWAYS)
# What read a page's text (``Extracted.extracted_by``): its text layer, or OCR.
BY_TEXT_LAYER, BY_OCR = "text", "ocr"

# pypdf in non-strict mode repairs what it can and logs a WARNING for every repair ("EOF
# marker not found", "incorrect startxref pointer", ...), several per malformed file. Across
# millions of documents that floods worker logs with noise nobody acts on, and the outcome
# that matters (text, or an errors/ row) is recorded anyway. Real failures still surface as
# exceptions, which become ``ExtractionError``.
logging.getLogger("pypdf").setLevel(logging.ERROR)
# pypdfium2 likewise warns about what it works around (circular bookmarks, ...).
logging.getLogger("pypdfium2").setLevel(logging.ERROR)

# The PDF spec requires the header at byte 0, but readers (and pypdf) accept it after up to
# 1024 bytes of leading junk, as some generators and mail gateways leave it there.
_PDF_HEADER = b"%PDF"
_PDF_HEADER_WINDOW = 1024

# PDFium's FPDF_GetLastError() code for a document that needs a password.
_FPDF_ERR_PASSWORD = 4


def extract_pdf(
    data: bytes,
    *,
    engine: str = PYPDF,
    max_pages: int | None = None,
    ocr: str = OCR_NEVER,
    password: str | None = None,
    use_pdfium: bool = True,
) -> Extracted:
    """Each page's text cleaned up (``cleanup.PDF``: ligatures and presentation forms,
    control characters, line-end hyphenation, ...) and trailing whitespace stripped, pages
    joined by ``"\\n\\n"``, ``page_starts`` recorded. A page is cleaned on its own, so a
    word hyphenated across a page break keeps its hyphen (joining it would move text from
    one page to the other).

    ``engine``: ``pypdf``, ``pdfium`` or ``auto``: pdfium, then pypdf when pdfium cannot
    read the file (an encrypted or over-long file is not retried) or when pdfium's text has
    a line mixing right-to-left and left-to-right letters (``_mixes_directions``). Raises
    ``ExtractionError`` with ``corrupt`` (no ``%PDF`` header in the first 1024 bytes, or
    the engine cannot parse it), ``encrypted`` (does not open with the empty password),
    ``too_large`` (more than ``max_pages`` pages) or ``no_text`` (no page holds text:
    scans, images, blank pages).

    ``ocr`` (``OCR_MODES``): ``auto`` reads each page whose text layer holds no text with
    the OCR engine (``chunkmill.extract.ocr``) when one is installed, ``always`` reads every
    page so (``ExtractionError("unsupported")`` when none is installed), ``never`` reads no
    page so. ``extracted_by`` records, page by page, which did. ``password`` opens an
    encrypted PDF (a wrong one is ``encrypted``, and no message names it).
    ``use_pdfium=False``: pypdf alone, whatever ``engine`` and ``ocr`` say (no line breaks
    from pdfium, no OCR, which renders with PDFium): the retry after PDFium crashed.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown PDF engine {engine!r}")
    if ocr not in OCR_MODES:
        raise ValueError(f"unknown OCR mode {ocr!r}")
    if data.find(_PDF_HEADER, 0, _PDF_HEADER_WINDOW + len(_PDF_HEADER)) == -1:
        raise ExtractionError(
            "corrupt", f"not a PDF: no %PDF header in the first {_PDF_HEADER_WINDOW} bytes"
        )
    if not use_pdfium:
        engine, ocr = PYPDF, OCR_NEVER
    if engine == PYPDF:
        pages, bookmarks = _pypdf_pages(data, max_pages, password)
        if use_pdfium:
            pages = _with_pdfium_line_breaks(data, pages, password)
    elif engine == PDFIUM:
        pages, bookmarks = _pdfium_pages(data, max_pages, password)
    else:
        try:
            pages, bookmarks = _pdfium_pages(data, max_pages, password)
        except ExtractionError as e:
            if e.reason != "corrupt":
                raise
            pages, bookmarks = _pypdf_pages(data, max_pages, password)
        else:
            if _mixes_directions(pages):
                # pdfium's text, whatever its word order, beats none.
                with contextlib.suppress(ExtractionError):
                    pypdf_pages, bookmarks = _pypdf_pages(data, max_pages, password)
                    pages = _with_pdfium_line_breaks(data, pypdf_pages, password, pages)
    cleaned = [clean_text(page) for page in pages]
    texts = [cleanup.clean_up(text, profile=cleanup.PDF).rstrip() for text, _ in cleaned]
    extracted_by = [BY_TEXT_LAYER] * len(texts)
    wanted = _pages_to_read(texts, ocr)
    if wanted:
        from chunkmill.extract import ocr as ocr_engine

        for index, text in zip(wanted, ocr_engine.read_pages(data, wanted, password), strict=True):
            text = cleanup.clean_up(clean_text(text)[0], profile=cleanup.PDF).rstrip()
            if text or ocr == OCR_ALWAYS:
                texts[index] = text
                extracted_by[index] = BY_OCR
    if not any(texts):
        raise ExtractionError(
            "no_text", f"no extractable text on any of {len(texts)} page(s) (scanned or blank?)"
        )
    starts = []
    offset = 0
    for page in texts:
        starts.append(offset)
        offset += len(page) + 2  # the "\n\n" joining it to the next page
    return Extracted(
        text="\n\n".join(texts),
        format="pdf",
        page_starts=tuple(starts),
        lossy=any(changed for _, changed in cleaned),
        outline=_outline(bookmarks, texts, starts),
        extracted_by=tuple(extracted_by),
    )


def _pages_to_read(texts: list[str], ocr: str) -> list[int]:
    """The 0-based pages OCR reads: none (``never``, or ``auto`` without an OCR engine),
    those without text (``auto``), all (``always``, which needs an engine)."""
    if ocr == OCR_NEVER or not texts:
        return []
    wanted = [i for i, text in enumerate(texts) if ocr == OCR_ALWAYS or not text]
    if not wanted:
        return []
    from chunkmill.extract import ocr as ocr_engine

    if not ocr_engine.available():
        if ocr == OCR_ALWAYS:
            raise ExtractionError("unsupported", ocr_engine.MISSING)
        return []
    return wanted


def _with_pdfium_line_breaks(
    data: bytes, pages: list[str], password: str | None, lines: list[str] | None = None
) -> list[str]:
    """pypdf's ``pages`` with a line break put back wherever pypdf glued two lines together.

    pypdf starts a new line only when the text moves down by 80% of the font size or more,
    so tightly set lines come out glued ("Line 1Line 2"); pdfium breaks lines by the
    positions of the glyphs. For each pair of pdfium lines whose last and first words stand
    glued in pypdf's text, a newline goes between them (see ``_restore_breaks``). ``lines``:
    pdfium's text of the pages, when read already. A file pdfium cannot read keeps pypdf's
    text as it is."""
    if lines is None:
        try:
            lines, _ = _pdfium_pages(data, None, password)
        except ExtractionError:
            return pages
    if len(lines) != len(pages):
        return pages
    return [_restore_breaks(page, reference) for page, reference in zip(pages, lines, strict=True)]


def _restore_breaks(text: str, reference: str) -> str:
    """``text`` with ``"\n"`` inserted where the last word of a line of ``reference`` is
    directly followed (no whitespace) by the first word of the next line. Lines are matched
    in order from a cursor, and a word only where it starts a word of ``text``, so nothing
    is inserted where the two texts disagree."""
    words = [line.split() for line in reference.splitlines()]
    words = [line for line in words if line]
    if len(words) < 2:
        return text
    out: list[str] = []
    cursor = done = 0
    for line, following in zip(words, words[1:], strict=False):
        tail, head = line[-1], following[0]
        found = text.find(tail, cursor)
        while found > 0 and not text[found - 1].isspace():
            found = text.find(tail, found + 1)
        if found == -1:
            continue
        end = found + len(tail)
        cursor = end
        if text.startswith(head, end):
            out.append(text[done:end])
            out.append("\n")
            done = end
    out.append(text[done:])
    return "".join(out)


# (0-based page index or None, nesting level from 0, title), in outline order.
Bookmarks = list[tuple[int | None, int, str]]

# A hostile outline can hold millions of entries (or loop); past this many the outline is
# not worth its cost and the document goes without one.
_MAX_BOOKMARKS = 10_000


def _outline(
    bookmarks: Bookmarks, texts: list[str], starts: list[int]
) -> tuple[tuple[int, tuple[str, ...]], ...] | None:
    """Bookmarks as ``(offset, heading path)`` pairs, sorted by offset. A bookmark starts
    where its title is printed on its page, else at the top of the page."""
    entries: list[tuple[int, tuple[str, ...]]] = []
    path: list[str] = []
    for page, level, raw_title in bookmarks:
        # Cleaned as page text is, so a title with a ligature is found on its page.
        title = " ".join(cleanup.clean_up(clean_text(raw_title)[0], profile=cleanup.PDF).split())
        if not title or page is None or not 0 <= page < len(texts):
            continue
        path = [*path[: min(level, len(path))], title]
        found = texts[page].find(title)
        entries.append((starts[page] + max(found, 0), tuple(path)))
    if not entries:
        return None
    entries.sort(key=lambda entry: entry[0])  # stable: equal offsets keep outline order
    return tuple(entries)


# Letters of the right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, NKo, Samaritan,
# Mandaic and their presentation forms; the right-to-left blocks of plane 1): a cheap test
# before the per-character one.
_RTL = re.compile(
    "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\U00010800-\U00010fff\U0001e800-\U0001efff]"
)


def _mixes_directions(pages: list[str]) -> bool:
    """Whether a line of ``pages`` holds both a right-to-left letter (bidi class R or AL)
    and a left-to-right one (class L).

    On such a line pdfium's text is in visual order: it reads each right-to-left word's
    letters in logical order but puts the words in their order on the page, left to right,
    so "see مرحبا بالعالم now" comes out as "see بالعالم مرحبا now", and a right-to-left
    line with a Latin word in it likewise. pypdf reverses the letters of each right-to-left
    run within one text-showing operator and keeps the runs in the order the PDF draws them:
    the reading order where a line's text is drawn a run at a time, as most producers do
    (glyphs drawn one at a time it reads reversed). Lines of right-to-left letters alone
    (with digits or punctuation) pdfium reads right, and they do not count."""
    for page in pages:
        if not _RTL.search(page):
            continue
        for line in page.splitlines():
            if not _RTL.search(line):
                continue
            classes = {unicodedata.bidirectional(c) for c in line}
            if "L" in classes and ("R" in classes or "AL" in classes):
                return True
    return False


def _check_pages(count: int, max_pages: int | None) -> None:
    if max_pages is not None and count > max_pages:
        raise ExtractionError(
            "too_large", f"{count} pages, over the --max-pdf-pages cap of {max_pages}"
        )


def _pypdf_pages(
    data: bytes, max_pages: int | None, password: str | None = None
) -> tuple[list[str], Bookmarks]:
    # Imported here, like pypdfium2: a process that never opens a PDF (the Beam worker, whose
    # PDFs go to the parser child) does not pay for it at start-up.
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        not_decrypted = pypdf.PasswordType.NOT_DECRYPTED
        if (
            reader.is_encrypted
            and reader.decrypt("") == not_decrypted
            and (password is None or reader.decrypt(password) == not_decrypted)
        ):
            raise ExtractionError("encrypted", _needs_password(password))
        _check_pages(len(reader.pages), max_pages)
        pages = [page.extract_text() or "" for page in reader.pages]
        return pages, _pypdf_bookmarks(reader)
    except ExtractionError:
        raise
    except (DependencyError, FileNotDecryptedError) as e:
        # DependencyError: the encryption algorithm needs a crypto library that is missing.
        raise ExtractionError("encrypted", _message("pypdf", e)) from e
    except MemoryError:
        raise
    except Exception as e:
        if _raised_in_pypdf_encryption(e):
            # An encryption pypdf cannot open (public-key /Adobe.PubSec, unknown /V, a broken
            # encryption dictionary): the file is fine, we just cannot read it.
            raise ExtractionError("encrypted", _message("pypdf", e)) from e
        # pypdf raises its own errors but also ValueError, KeyError, TypeError, IndexError,
        # RecursionError, zlib.error ... from deep inside malformed files; any of them means
        # this file cannot be read, and must cost this document only.
        raise ExtractionError("corrupt", _message("pypdf", e)) from e


def _pypdf_bookmarks(reader: pypdf.PdfReader) -> Bookmarks:
    """The outline, or none at all when it cannot be read: bookmarks are a bonus, and a
    broken outline must not cost a document whose text is fine."""
    out: Bookmarks = []
    try:
        stack: list[tuple[list[Any], int]] = [(list(reader.outline), 0)]
        while stack and len(out) < _MAX_BOOKMARKS:
            items, level = stack.pop()
            for index, item in enumerate(items):
                if isinstance(item, list):  # the children of the item before it
                    stack.append((items[index + 1 :], level))
                    stack.append((item, level + 1))
                    break
                out.append((reader.get_destination_page_number(item), level, str(item.title)))
    except Exception:
        return []
    return out if len(out) < _MAX_BOOKMARKS else []


def _pdfium_bookmarks(pdf: Any) -> Bookmarks:
    """As ``_pypdf_bookmarks``, from PDFium's table of contents."""
    out: Bookmarks = []
    try:
        for bookmark in pdf.get_toc():
            if len(out) >= _MAX_BOOKMARKS:
                return []
            dest = bookmark.get_dest()
            page = dest.get_index() if dest is not None else None
            out.append((page, bookmark.level, bookmark.get_title()))
    except Exception:
        return []
    return out


def open_pdfium(data: bytes, password: str | None = None) -> Any:
    """The ``pypdfium2.PdfDocument`` of ``data`` (opened with the empty password, then with
    ``password``); ``ExtractionError`` ``encrypted`` or ``corrupt``. The caller closes it."""
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        if getattr(e, "err_code", None) != _FPDF_ERR_PASSWORD:
            raise ExtractionError("corrupt", _message("pdfium", e)) from e
    if password is not None:
        try:
            return pdfium.PdfDocument(data, password=password)
        except pdfium.PdfiumError as e:
            if getattr(e, "err_code", None) != _FPDF_ERR_PASSWORD:
                raise ExtractionError("corrupt", _message("pdfium", e)) from None
    raise ExtractionError("encrypted", _needs_password(password))


def _needs_password(password: str | None) -> str:
    # Never the password itself: the message goes to errors/ and logs.
    if password is None:
        return "PDF is encrypted and needs a password to open (see --pdf-password-env)"
    return "PDF is encrypted and the password given by --pdf-password-env does not open it"


def _pdfium_pages(
    data: bytes, max_pages: int | None, password: str | None = None
) -> tuple[list[str], Bookmarks]:
    pdf = open_pdfium(data, password)
    try:
        _check_pages(len(pdf), max_pages)
        pages = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return pages, _pdfium_bookmarks(pdf)
    except ExtractionError:
        raise
    except MemoryError:
        raise
    except Exception as e:
        raise ExtractionError("corrupt", _message("pdfium", e)) from e
    finally:
        pdf.close()


def _raised_in_pypdf_encryption(e: BaseException) -> bool:
    # pypdf signals unsupported encryption with NotImplementedError/ValueError/PdfReadError,
    # the same types it uses for unrelated defects; where it was raised tells them apart.
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return module == "pypdf._encryption" or module.startswith("pypdf._crypt_providers")


def _message(engine: str, e: BaseException) -> str:
    return f"{engine}: {type(e).__name__}: {e}"
