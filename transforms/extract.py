"""Text extraction: the bytes of one document in, the text that chunk offsets refer to out.

Pure functions, no Beam and no I/O. ``extract`` is the one entry point; it returns an
``Extracted`` or raises ``ExtractionError`` with a stable ``reason`` code (one of ``REASONS``)
for the ``errors/`` table, and nothing else for bad input: parser exceptions are wrapped.

The text is deterministic for the same bytes (and the same pypdf release for PDFs): newlines
are normalised so a document hashes the same whichever platform saved it, and nothing else is
removed from text formats, so ``text[char_start:char_end]`` is exactly what the file holds.
"""

from __future__ import annotations

import io
import logging
import posixpath
import re
from bisect import bisect_right
from dataclasses import dataclass

import pypdf
from pypdf.errors import DependencyError, FileNotDecryptedError

# Bump when the text for the same bytes would change (normalisation, format table, PDF page
# joining, ...). It goes into the config fingerprint, so a bump re-chunks every document.
# pypdf's own version is deliberately not part of it: that would make the fingerprint depend
# on the machine a run happens on (laptop vs worker image) and re-chunk everything whenever
# the two differ; library versions are recorded in the errors table instead.
EXTRACTOR_VERSION = "1"

# pypdf in non-strict mode repairs what it can and logs a WARNING for every repair ("EOF
# marker not found", "incorrect startxref pointer", ...), several per malformed file. Across
# millions of documents that floods worker logs with noise nobody acts on, and the outcome
# that matters (text, or an errors/ row) is recorded anyway. Real failures still surface as
# exceptions, which become ``ExtractionError``.
logging.getLogger("pypdf").setLevel(logging.ERROR)

REASONS: frozenset[str] = frozenset(
    {"empty", "binary", "undecodable", "corrupt", "encrypted", "no_text", "unsupported"}
)

MARKDOWN, TEXT, CODE, PDF = "markdown", "text", "code", "pdf"

# Long enough for an exception's gist, short enough for an errors/ cell read by a person.
_MAX_MESSAGE_CHARS = 300

# The PDF spec requires the header at byte 0, but readers (and pypdf) accept it after up to
# 1024 bytes of leading junk, as some generators and mail gateways leave it there.
_PDF_HEADER = b"%PDF"
_PDF_HEADER_WINDOW = 1024


class ExtractionError(Exception):
    """A document that cannot be turned into text.

    ``reason`` is one of ``REASONS``: a stable code for the errors/ table. ``message`` is for
    people: one line, at most 300 characters, whitespace collapsed and control characters
    replaced (guaranteed here, whatever the caller passes). It never names the document's
    path, which may be a signed URL; the errors/ row carries the URI separately.

    Raises ``ValueError`` for a reason outside ``REASONS`` (a programming error).
    """

    def __init__(self, reason: str, message: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown extraction error reason {reason!r}")
        self.reason = reason
        self.message = one_line(message)
        super().__init__(self.message)

    def __reduce__(self):
        # The default pickling re-calls __init__ with self.args (the message only); keep both
        # fields so the error survives a trip through a worker subprocess.
        return (type(self), (self.reason, self.message))

    def __repr__(self) -> str:
        return f"ExtractionError({self.reason!r}, {self.message!r})"


@dataclass(frozen=True, slots=True)
class Extracted:
    """One document's text.

    ``text`` is the text chunk offsets refer to. ``format`` is ``"markdown"``, ``"text"``,
    ``"code"`` or ``"pdf"``. For PDFs, ``page_starts[i]`` is the offset in ``text`` where page
    ``i`` (0-based) starts: 0 for the first page, increasing (not strictly, an empty page may
    start where the next does); ``None`` for every other format.
    """

    text: str
    format: str
    page_starts: tuple[int, ...] | None = None

    def pages_of(self, start: int, end: int) -> tuple[int, int] | None:
        """1-based ``(first_page, last_page)`` covering ``text[start:end]``; ``None`` for a
        document without pages.

        ``end`` is exclusive, so a span ending exactly where a page starts does not reach that
        page. An empty span (``start == end``) maps to the page holding ``start``. Raises
        ``ValueError`` unless ``0 <= start <= end <= len(text)``.
        """
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"span [{start}, {end}) outside text of length {len(self.text)}")
        if self.page_starts is None:
            return None
        # bisect_right - 1 is the 0-based index of the last page starting at or before the
        # offset; with an empty page, that is the later of the pages starting there, i.e. the
        # page whose text holds the character.
        first = bisect_right(self.page_starts, start)
        last = bisect_right(self.page_starts, max(start, end - 1))
        return (first, last)


# Extension (lower case, with the dot) -> format. PDFs and text formats; anything missing
# here is sniffed (see detect_format).
_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys((".md", ".markdown", ".mdx"), MARKDOWN),
    **dict.fromkeys((".txt", ".text", ".rst", ".log", ".adoc", ".org", ".tex"), TEXT),
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
            # Data, config, query and markup languages that are edited like code.
            ".sql", ".graphql", ".gql", ".proto", ".yaml", ".yml", ".toml", ".ini", ".cfg",
            ".conf", ".json", ".jsonc", ".json5", ".tf", ".hcl", ".css", ".scss", ".sass",
            ".less", ".html", ".htm", ".xml", ".xsl", ".xsd",
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

# Text in an encoding other than UTF-8, recognisable by its byte-order mark. UTF-32 LE first:
# its mark starts with UTF-16 LE's.
_FOREIGN_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)

_UTF8_BOM = "\ufeff"
_NEWLINES = re.compile(r"\r\n?")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_SAFE_EXTENSION = re.compile(r"\.[a-z0-9_+-]{1,12}")


def detect_format(path: str, data: bytes) -> str:
    """The format of a document: ``"markdown"``, ``"text"``, ``"code"`` or ``"pdf"``.

    Decided by the extension of the last component of ``path`` (case-insensitive, ``/`` or
    ``\\`` separated; nothing in ``path`` is opened), with a light check of ``data``:

    * ``.pdf`` is ``"pdf"`` whatever the bytes hold (``extract`` judges them);
    * a known text extension is its format unless the bytes look binary (a known binary
      signature at byte 0, or a NUL byte anywhere): ``ExtractionError("binary")``;
    * anything else (unknown or no extension) is ``"text"`` if the bytes are UTF-8 without a
      NUL byte, ``"code"`` for a few well-known names such as ``Makefile``; binary-looking
      bytes raise ``"binary"``, other non-UTF-8 bytes ``"unsupported"``.

    Empty ``data`` passes (``extract`` reports it as ``"empty"``).
    """
    return _detect(path, data)[0]


def extract(path: str, data: bytes) -> Extracted:
    """Turn one document into text; ``path`` only chooses the format (see ``detect_format``).

    Text formats: UTF-8 with one leading BOM removed, ``"\\r\\n"`` and lone ``"\\r"`` turned
    into ``"\\n"``, nothing else changed. PDFs: each page's text with newlines normalised and
    trailing whitespace stripped, pages joined by ``"\\n\\n"``, ``page_starts`` recorded.

    Raises ``ExtractionError`` (and, for bad input, nothing else) with reason

    * ``"empty"``: no bytes, or text that is whitespace only;
    * ``"binary"`` / ``"unsupported"``: see ``detect_format``;
    * ``"undecodable"``: a text format whose bytes are not UTF-8;
    * ``"corrupt"``: a PDF without a ``%PDF`` header in its first 1024 bytes, or one pypdf
      fails to parse;
    * ``"encrypted"``: a PDF that does not open with the empty password;
    * ``"no_text"``: a PDF whose pages hold no text (scans, images, blank pages).

    ``MemoryError`` and ``KeyboardInterrupt`` propagate.
    """
    if not data:
        raise ExtractionError("empty", "the document has 0 bytes")
    fmt, text = _detect(path, data)
    if fmt == PDF:
        return _extract_pdf(data)
    if text is None:
        text = _decode_utf8(data, failure_reason="undecodable")
    # isspace() stops at the first non-space character; strip() would copy the whole text.
    if not text or text.isspace():
        raise ExtractionError("empty", "the document is whitespace only")
    return Extracted(text=text, format=fmt)


def _detect(path: str, data: bytes) -> tuple[str, str | None]:
    """``detect_format``, also returning the decoded text when sniffing had to decode it."""
    name = re.split(r"[/\\]", path)[-1]
    ext = posixpath.splitext(name)[1].lower()
    fmt = _EXTENSIONS.get(ext)
    if fmt == PDF:
        return fmt, None
    _reject_binary(data)
    if fmt is not None:
        return fmt, None
    # Unknown or no extension: text only if the bytes say so. The message names the
    # extension only when it is plainly one: a path can be a URL with a token in it.
    if not ext:
        what = "no extension"
    elif _SAFE_EXTENSION.fullmatch(ext):
        what = f"unknown extension {ext!r}"
    else:
        what = "an unknown extension"
    text = _decode_utf8(data, failure_reason="unsupported", context=f"{what}; ")
    return (CODE if name.lower() in _CODE_FILENAMES else TEXT), text


# One startswith() call each: this runs for every document, most of them small.
_ANY_BINARY_SIGNATURE = tuple(signature for signature, _ in _BINARY_SIGNATURES)
_ANY_FOREIGN_BOM = tuple(bom for bom, _ in _FOREIGN_BOMS)


def _reject_binary(data: bytes) -> None:
    if data.startswith(_ANY_BINARY_SIGNATURE):
        kind = next(k for signature, k in _BINARY_SIGNATURES if data.startswith(signature))
        raise ExtractionError("binary", f"binary content: {kind} signature at byte 0")
    if data.startswith(_ANY_FOREIGN_BOM):
        return  # NULs are expected there; _decode_utf8 names the encoding.
    nul = data.find(b"\x00")
    if nul != -1:
        raise ExtractionError("binary", f"binary content: NUL byte at offset {nul}")


def _decode_utf8(data: bytes, *, failure_reason: str, context: str = "") -> str:
    """UTF-8 text with one leading BOM removed and newlines normalised."""
    if data.startswith(_ANY_FOREIGN_BOM):
        encoding = next(e for bom, e in _FOREIGN_BOMS if data.startswith(bom))
        raise ExtractionError(
            failure_reason, f"{context}{encoding} byte-order mark: only UTF-8 text is supported"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ExtractionError(
            failure_reason, f"{context}not UTF-8: {e.reason} at byte {e.start}"
        ) from None
    if text.startswith(_UTF8_BOM):
        text = text[1:]
    return _normalise_newlines(text)


def _normalise_newlines(text: str) -> str:
    # "\r\n" first (one regex alternative), so a CRLF becomes one "\n", not two.
    return _NEWLINES.sub("\n", text) if "\r" in text else text


def _extract_pdf(data: bytes) -> Extracted:
    if data.find(_PDF_HEADER, 0, _PDF_HEADER_WINDOW + len(_PDF_HEADER)) == -1:
        raise ExtractionError(
            "corrupt", f"not a PDF: no %PDF header in the first {_PDF_HEADER_WINDOW} bytes"
        )
    try:
        pages = _pdf_page_texts(data)
    except ExtractionError:
        raise
    except (DependencyError, FileNotDecryptedError) as e:
        # DependencyError: the encryption algorithm needs a crypto library that is missing.
        raise ExtractionError("encrypted", _pypdf_message(e)) from e
    except MemoryError:
        raise
    except Exception as e:
        if _raised_in_pypdf_encryption(e):
            # An encryption pypdf cannot open (public-key /Adobe.PubSec, unknown /V, a broken
            # encryption dictionary): the file is fine, we just cannot read it.
            raise ExtractionError("encrypted", _pypdf_message(e)) from e
        # pypdf raises its own errors but also ValueError, KeyError, TypeError, IndexError,
        # RecursionError, zlib.error ... from deep inside malformed files; any of them means
        # this file cannot be read, and must cost this document only.
        raise ExtractionError("corrupt", _pypdf_message(e)) from e
    if not any(pages):
        raise ExtractionError(
            "no_text", f"no extractable text on any of {len(pages)} page(s) (scanned or blank?)"
        )
    starts = []
    offset = 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 2  # the "\n\n" joining it to the next page
    return Extracted(text="\n\n".join(pages), format=PDF, page_starts=tuple(starts))


def _pdf_page_texts(data: bytes) -> list[str]:
    """Each page's text: newlines normalised, trailing whitespace stripped."""
    reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted and reader.decrypt("") == pypdf.PasswordType.NOT_DECRYPTED:
        raise ExtractionError("encrypted", "PDF is encrypted and needs a password to open")
    return [_clean_page(page.extract_text() or "") for page in reader.pages]


def _clean_page(text: str) -> str:
    if _SURROGATES.search(text):
        # pypdf can emit surrogate code points from broken ToUnicode maps; they cannot be
        # encoded as UTF-8 (so not written to Parquet). Join valid pairs, replace strays.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _normalise_newlines(text).rstrip()


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


def _pypdf_message(e: BaseException) -> str:
    return f"pypdf: {type(e).__name__}: {e}"


def one_line(message: str) -> str:
    """``message`` on one printable line of at most ``_MAX_MESSAGE_CHARS`` characters."""
    line = " ".join(str(message).split())
    # Control characters other than whitespace (ESC, DEL, C1) could rewrite a terminal or
    # a log line; exception text from a parser can quote bytes of a hostile file.
    line = "".join(c if c.isprintable() else "?" for c in line)
    if len(line) > _MAX_MESSAGE_CHARS:
        line = line[: _MAX_MESSAGE_CHARS - 3] + "..."
    return line
