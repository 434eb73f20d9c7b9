"""PDF text, page by page, with pypdf or pypdfium2 (``engine``)."""

from __future__ import annotations

import io
import logging

import pypdf
from pypdf.errors import DependencyError, FileNotDecryptedError

from transforms.extract.base import Extracted, ExtractionError, clean_text

PYPDF, PDFIUM, AUTO = "pypdf", "pdfium", "auto"
ENGINES = (PYPDF, PDFIUM, AUTO)

# pypdf in non-strict mode repairs what it can and logs a WARNING for every repair ("EOF
# marker not found", "incorrect startxref pointer", ...), several per malformed file. Across
# millions of documents that floods worker logs with noise nobody acts on, and the outcome
# that matters (text, or an errors/ row) is recorded anyway. Real failures still surface as
# exceptions, which become ``ExtractionError``.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# The PDF spec requires the header at byte 0, but readers (and pypdf) accept it after up to
# 1024 bytes of leading junk, as some generators and mail gateways leave it there.
_PDF_HEADER = b"%PDF"
_PDF_HEADER_WINDOW = 1024

# PDFium's FPDF_GetLastError() code for a document that needs a password.
_FPDF_ERR_PASSWORD = 4


def extract_pdf(data: bytes, *, engine: str = PYPDF, max_pages: int | None = None) -> Extracted:
    """Each page's text with newlines normalised and trailing whitespace stripped, pages
    joined by ``"\\n\\n"``, ``page_starts`` recorded.

    ``engine``: ``pypdf``, ``pdfium`` or ``auto`` (pdfium, then pypdf when pdfium cannot
    read the file; an encrypted or over-long file is not retried). Raises ``ExtractionError``
    with ``corrupt`` (no ``%PDF`` header in the first 1024 bytes, or the engine cannot parse
    it), ``encrypted`` (does not open with the empty password), ``too_large`` (more than
    ``max_pages`` pages) or ``no_text`` (no page holds text: scans, images, blank pages).
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown PDF engine {engine!r}")
    if data.find(_PDF_HEADER, 0, _PDF_HEADER_WINDOW + len(_PDF_HEADER)) == -1:
        raise ExtractionError(
            "corrupt", f"not a PDF: no %PDF header in the first {_PDF_HEADER_WINDOW} bytes"
        )
    if engine == PYPDF:
        pages = _pypdf_pages(data, max_pages)
    elif engine == PDFIUM:
        pages = _pdfium_pages(data, max_pages)
    else:
        try:
            pages = _pdfium_pages(data, max_pages)
        except ExtractionError as e:
            if e.reason != "corrupt":
                raise
            pages = _pypdf_pages(data, max_pages)
    cleaned = [clean_text(page) for page in pages]
    texts = [text.rstrip() for text, _ in cleaned]
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
    )


def _check_pages(count: int, max_pages: int | None) -> None:
    if max_pages is not None and count > max_pages:
        raise ExtractionError(
            "too_large", f"{count} pages, over the --max-pdf-pages cap of {max_pages}"
        )


def _pypdf_pages(data: bytes, max_pages: int | None) -> list[str]:
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and reader.decrypt("") == pypdf.PasswordType.NOT_DECRYPTED:
            raise ExtractionError("encrypted", "PDF is encrypted and needs a password to open")
        _check_pages(len(reader.pages), max_pages)
        return [page.extract_text() or "" for page in reader.pages]
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


def _pdfium_pages(data: bytes, max_pages: int | None) -> list[str]:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        if getattr(e, "err_code", None) == _FPDF_ERR_PASSWORD:
            raise ExtractionError(
                "encrypted", "PDF is encrypted and needs a password to open"
            ) from None
        raise ExtractionError("corrupt", _message("pdfium", e)) from e
    try:
        _check_pages(len(pdf), max_pages)
        pages = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return pages
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
