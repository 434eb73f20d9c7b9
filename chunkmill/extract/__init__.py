"""Text extraction: the bytes of one document in, the text that chunk offsets refer to out.

Pure functions, no Beam and no I/O. ``extract`` is the one entry point; it returns an
``Extracted`` or raises ``ExtractionError`` with a stable ``reason`` code (one of ``REASONS``)
for the ``errors/`` table, and nothing else for bad input: parser exceptions are wrapped.

The text is deterministic for the same bytes (and the same library releases for parsed
formats): newlines are normalised so a document hashes the same whichever platform saved
it. Every text then goes through ``cleanup.clean_up``, with a profile per format
(``_PROFILES``): plain-text formats lose only what cannot be meant (noncharacters, control
characters but tab and newline) and keep every other character as the file holds it; HTML,
DOCX, JSON/JSONL and CSV are rendered (see ``markup`` and ``structured``), PDFs are the text
of their pages (``pdf``).

Which formats need a third-party parser (and so run isolated, see ``chunkmill.isolation``)
is ``uses_parser``.
"""

from __future__ import annotations

import re

from chunkmill.extract.base import (
    REASONS,
    Extracted,
    ExtractionError,
    clean_text,
    one_line,
)
from chunkmill.extract.cleanup import DOCUMENT, VERBATIM, clean_up
from chunkmill.extract.pdf import ENGINES as PDF_ENGINES
from chunkmill.extract.pdf import OCR_MODES, extract_pdf
from chunkmill.extract.text import ANY_BOM, decode, decode_source, utf16_by_nuls

__all__ = [
    "EXTRACTOR_VERSION",
    "FORMATS",
    "OCR_MODES",
    "PDF_ENGINES",
    "REASONS",
    "Extracted",
    "ExtractionError",
    "detect_format",
    "extract",
    "one_line",
    "uses_parser",
]

# Bump when the text for the same bytes would change (normalisation, format table, PDF page
# joining, ...). It goes into the config fingerprint, so a bump re-chunks every document.
# Library versions are deliberately not part of it: that would make the fingerprint depend
# on the machine a run happens on (laptop vs worker image) and re-chunk everything whenever
# the two differ; library versions are recorded in the errors table instead.
# 2: non-UTF-8 text decoded (BOMs, UTF-16, detector), NULs dropped; HTML, JSON, JSONL, CSV,
#    reStructuredText and DOCX as formats of their own; PDF bookmarks as section paths.
# 3: every text cleaned up (transforms.extract.cleanup): noncharacters and control
#    characters dropped, form feeds as blank lines; ligatures, presentation forms, soft
#    hyphens and space variants in HTML, DOCX and PDF; PDF line-end hyphenation joined;
#    --pdf-engine auto reads pages mixing text directions with pypdf.
# 4: private-use code points dropped from typeset text (HTML, DOCX, PDF, SVG); pypdf's glued
#    lines broken where pdfium sees a line end; SVG as the text of its elements; PDF pages
#    without a text layer read by OCR (--ocr).
EXTRACTOR_VERSION = "4"

MARKDOWN, TEXT, CODE, PDF = "markdown", "text", "code", "pdf"
RST, HTML, JSON, JSONL, CSV, DOCX = "rst", "html", "json", "jsonl", "csv", "docx"
SVG = "svg"
FORMATS: tuple[str, ...] = (MARKDOWN, TEXT, RST, CODE, PDF, HTML, JSON, JSONL, CSV, DOCX, SVG)

# The clean-up profile of each format (PDF pages are cleaned in ``pdf``). Typeset documents
# get DOCUMENT: their ligatures and space variants are artefacts of layout. What a person
# typed (text, Markdown, code) or stored (JSON, CSV values) gets VERBATIM: every character
# may be meant, so only noncharacters and controls go.
_PROFILES: dict[str, str] = {
    **dict.fromkeys((MARKDOWN, TEXT, RST, CODE, JSON, JSONL, CSV), VERBATIM),
    **dict.fromkeys((HTML, DOCX, SVG), DOCUMENT),
}

# Formats whose bytes go through a third-party parser (or a parser whose memory is a large
# multiple of the input): run isolated, with a time and memory budget.
_PARSED = frozenset({PDF, HTML, JSON, JSONL, CSV, DOCX, SVG})
# Formats recognised by extension alone, whatever the bytes (their extractor judges them).
_CONTAINERS = frozenset({PDF, DOCX})

# Extension (lower case, with the dot) -> format; anything missing here is sniffed (see
# detect_format).
_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys((".md", ".markdown", ".mdx"), MARKDOWN),
    **dict.fromkeys((".txt", ".text", ".log", ".adoc", ".org", ".tex"), TEXT),
    **dict.fromkeys((".rst", ".rest"), RST),
    **dict.fromkeys((".html", ".htm", ".xhtml"), HTML),
    ".json": JSON,
    **dict.fromkeys((".jsonl", ".ndjson"), JSONL),
    **dict.fromkeys((".csv", ".tsv"), CSV),
    ".docx": DOCX,
    ".svg": SVG,
    **dict.fromkeys(
        (
            # General-purpose languages.
            ".py", ".pyi", ".pyx", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx",
            ".jsx", ".java", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp",
            ".hxx", ".cs", ".fs", ".rb", ".php", ".swift", ".kt", ".kts", ".scala", ".groovy",
            ".dart", ".lua", ".r", ".jl", ".m", ".mm", ".pl", ".pm", ".hs", ".ml", ".mli",
            ".ex", ".exs", ".erl", ".clj", ".cljs", ".elm", ".nim", ".zig", ".vue", ".svelte",
            # Shells and build files.
            ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".mk", ".cmake",
            ".gradle",
            # Data, config, query and markup languages that are edited like code (JSON with
            # comments is config, not data).
            ".sql", ".graphql", ".gql", ".proto", ".yaml", ".yml", ".toml", ".ini", ".cfg",
            ".conf", ".jsonc", ".json5", ".tf", ".hcl", ".css", ".scss", ".sass",
            ".less", ".xml", ".xsl", ".xsd",
        ),
        CODE,
    ),
    ".pdf": PDF,
}  # fmt: skip

# Extensionless files that are code by name (compared in lower case).
_CODE_FILENAMES = frozenset({"makefile", "dockerfile", "containerfile", "jenkinsfile"})

# Signatures of common binary formats, checked at byte 0 of a file that should be text: they
# name the format in the message and catch binaries that happen to hold no NUL byte. Only
# signatures no real text file starts with.
_BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"%PDF-", "PDF"),
    (b"PK\x03\x04", "ZIP"),
    (b"PK\x05\x06", "ZIP"),
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "OLE (legacy Office)"),
    (b"\x7fELF", "ELF"),
    (b"\xca\xfe\xba\xbe", "Java class or Mach-O"),
    (b"\xcf\xfa\xed\xfe", "Mach-O"),
)

# Text may hold a few stray NULs (a bad editor, a truncated copy; they are dropped and the
# document flagged lossy); more than one byte in a hundred means binary.
_MAX_STRAY_NUL_SHARE = 0.01

# An extensionless or unknown-extension file is HTML when it starts so (after whitespace).
_HTML_START = re.compile(rb"\s*(<!doctype\s+html|<html[\s>])", re.IGNORECASE)
_SAFE_EXTENSION = re.compile(r"\.[a-z0-9_+-]{1,12}")


def detect_format(path: str, data: bytes) -> str:
    """The format of a document, one of ``FORMATS``.

    Decided by the extension of the last component of ``path`` (case-insensitive, ``/`` or
    ``\\`` separated; nothing in ``path`` is opened) and the bytes together:

    * ``.pdf`` / ``.docx`` are ``"pdf"`` / ``"docx"`` whatever the bytes hold (``extract``
      judges them);
    * any other known extension is its format unless the bytes look binary (a known binary
      signature at byte 0, or NULs in more than 1% of the bytes without the pattern of
      UTF-16): ``ExtractionError("binary")``; so a PNG named ``.md`` is binary;
    * anything else (unknown or no extension) is ``"pdf"`` when it starts with ``%PDF-``,
      ``"html"`` when it starts like HTML, else ``"text"`` (``"code"`` for a few well-known
      names such as ``Makefile``) if the bytes decode without guessing (a byte-order mark,
      UTF-8, or UTF-16 by its NUL pattern); binary-looking bytes raise ``"binary"``, other
      bytes ``"unsupported"``.

    Empty ``data`` passes (``extract`` reports it as ``"empty"``).
    """
    return _detect(path, data)[0]


def uses_parser(path: str, data: bytes) -> bool:
    """Whether ``extract`` would hand these bytes to a third-party parser (PDF, HTML, DOCX,
    JSON, JSONL, CSV), which the pipeline runs isolated. Never raises."""
    fmt = _EXTENSIONS.get(_extension(path))
    if fmt is None:
        return data.startswith(b"%PDF-") or bool(_HTML_START.match(data[:1024]))
    return fmt in _PARSED


def extract(
    path: str,
    data: bytes,
    *,
    pdf_engine: str = "pypdf",
    max_pdf_pages: int | None = None,
    ocr: str = "never",
    pdf_password: str | None = None,
    use_pdfium: bool = True,
) -> Extracted:
    """Turn one document into text; ``path`` only chooses the format (see ``detect_format``).

    Text formats (Markdown, text, reStructuredText, code): decoded (see
    ``text.decode``: byte-order marks, UTF-8, UTF-16 by NUL pattern, then a detector that
    makes the result ``lossy``), ``"\\r\\n"`` and lone ``"\\r"`` turned into ``"\\n"``, NULs
    dropped, then ``cleanup.VERBATIM`` (noncharacters and control characters but tab and
    newline dropped, form feed as a blank line), nothing else changed. HTML and DOCX:
    visible text with headings as Markdown ``#`` lines, ``cleanup.DOCUMENT``. JSON, JSONL,
    CSV: one paragraph of ``key: value`` lines per record, ``cleanup.VERBATIM``. PDFs: each
    page's text (``pdf_engine``: pypdf, pdfium or auto), ``cleanup.PDF``, trailing
    whitespace stripped, pages joined by ``"\\n\\n"``, ``page_starts`` recorded; more
    than ``max_pdf_pages`` pages is ``too_large``; pages without text read by OCR as
    ``ocr`` says (``pdf.OCR_MODES``); ``pdf_password`` opens an encrypted PDF;
    ``use_pdfium=False`` keeps PDFium out entirely (pypdf alone, no OCR: the retry after
    PDFium crashed on a file). SVG: the text
    of its ``<title>``, ``<desc>``, ``<text>`` (with its ``<tspan>``\\ s) elements, one
    per line, ``cleanup.DOCUMENT``.

    Raises ``ExtractionError`` (and, for bad input, nothing else) with reason

    * ``"empty"``: no bytes, or a text that is whitespace only;
    * ``"binary"`` / ``"unsupported"``: see ``detect_format``;
    * ``"undecodable"``: a text format whose bytes no decoder (nor the detector) accepts;
    * ``"corrupt"``: a PDF without a ``%PDF`` header in its first 1024 bytes, or a PDF,
      DOCX, JSON or CSV file its parser cannot read;
    * ``"encrypted"``: a PDF that opens neither with the empty password nor with
      ``pdf_password``;
    * ``"no_text"``: a PDF whose pages hold no text (scans, images, blank pages);
    * ``"too_large"``: a PDF over ``max_pdf_pages`` pages.

    ``MemoryError`` and ``KeyboardInterrupt`` propagate.
    """
    if not data:
        raise ExtractionError("empty", "the document has 0 bytes")
    fmt, text = _detect(path, data)
    if fmt == PDF:
        return extract_pdf(
            data,
            engine=pdf_engine,
            max_pages=max_pdf_pages,
            ocr=ocr,
            password=pdf_password,
            use_pdfium=use_pdfium,
        )
    if fmt == DOCX:
        from chunkmill.extract.markup import docx_to_text

        return _finish(docx_to_text(_zip_or_corrupt(data)), DOCX, False)
    lossy = False
    utf8 = None  # the bytes the text is the UTF-8 of, where they are known
    if text is None:
        text, lossy, utf8 = decode_source(data, failure_reason="undecodable", detect=True)
    if fmt == HTML:
        from chunkmill.extract.markup import html_to_text

        return _finish(html_to_text(text), HTML, lossy)
    if fmt == SVG:
        from chunkmill.extract.markup import svg_to_text

        return _finish(svg_to_text(data), SVG, lossy)
    if fmt in (JSON, JSONL, CSV):
        from chunkmill.extract import structured

        if fmt == JSON:
            rendered = structured.render_json(text)
        elif fmt == JSONL:
            rendered = structured.render_jsonl(text)
        else:
            rendered = structured.render_csv(text, tab_separated=_extension(path) == ".tsv")
        return _finish(rendered, fmt, lossy)
    text = clean_up(text, profile=VERBATIM, utf8=utf8)
    # isspace() stops at the first non-space character; strip() would copy the whole text.
    if not text or text.isspace():
        raise ExtractionError("empty", "the document is whitespace only")
    return Extracted(text=text, format=fmt, lossy=lossy)


def _finish(text: str, fmt: str, lossy: bool) -> Extracted:
    text, changed = clean_text(text)
    text = clean_up(text, profile=_PROFILES[fmt])
    if not text or text.isspace():
        raise ExtractionError("empty", f"the {fmt} document holds no text")
    return Extracted(text=text, format=fmt, lossy=lossy or changed)


def _zip_or_corrupt(data: bytes) -> bytes:
    if not data.startswith(b"PK\x03\x04"):
        raise ExtractionError("corrupt", "not a DOCX file: no ZIP signature at byte 0")
    return data


def _name(path: str) -> str:
    """The last name of ``path``, ``/`` or ``\\`` separated."""
    return path[max(path.rfind("/"), path.rfind("\\")) + 1 :]


def _extension(path: str) -> str:
    """The lowercased extension of ``path``'s last name, as ``posixpath.splitext`` reads it:
    leading dots belong to the name (``.bashrc`` has none). Written out with ``rfind`` (not
    a regex split, then ``splitext``): it runs for every document read, twice."""
    name = _name(path)
    dot = name.rfind(".")
    if dot <= 0 or not name[:dot].lstrip("."):
        return ""
    return name[dot:].lower()


def _detect(path: str, data: bytes) -> tuple[str, str | None]:
    """``detect_format``, also returning the decoded text when sniffing had to decode it."""
    name, ext = _name(path), _extension(path)
    fmt = _EXTENSIONS.get(ext)
    if fmt in _CONTAINERS:
        return fmt, None
    if fmt is None and data.startswith(b"%PDF-"):
        return PDF, None
    _reject_binary(data)
    if fmt is not None:
        return fmt, None
    if _HTML_START.match(data[:1024]):
        return HTML, None
    # Unknown or no extension: text only if the bytes say so. The message names the
    # extension only when it is plainly one: a path can be a URL with a token in it.
    if not ext:
        what = "no extension"
    elif _SAFE_EXTENSION.fullmatch(ext):
        what = f"unknown extension {ext!r}"
    else:
        what = "an unknown extension"
    text, _ = decode(data, failure_reason="unsupported", detect=False, context=f"{what}; ")
    return (CODE if name.lower() in _CODE_FILENAMES else TEXT), text


# One startswith() call each: this runs for every document, most of them small.
_ANY_BINARY_SIGNATURE = tuple(signature for signature, _ in _BINARY_SIGNATURES)


def _reject_binary(data: bytes) -> None:
    if data.startswith(_ANY_BINARY_SIGNATURE):
        kind = next(k for signature, k in _BINARY_SIGNATURES if data.startswith(signature))
        raise ExtractionError("binary", f"binary content: {kind} signature at byte 0")
    if data.startswith(ANY_BOM):
        return  # NULs are expected in UTF-16/32; decode judges the rest.
    nul = data.find(b"\x00")
    if nul == -1:
        return
    if data.count(b"\x00") <= _MAX_STRAY_NUL_SHARE * len(data) or utf16_by_nuls(data):
        return
    raise ExtractionError("binary", f"binary content: NUL bytes from offset {nul}")


def format_by_name(path: str) -> str | None:
    """The format ``extract`` gives a document at ``path`` by its extension alone (the bytes
    can still make it ``binary``), or None when only its bytes can tell (no extension, or an
    unknown one). Nothing is opened."""
    return _EXTENSIONS.get(_extension(path))
