"""Bytes of a text document to ``str``: byte-order marks, strict UTF-8, UTF-16 recognised
by its NUL pattern, then (only where the caller allows it) a detector, charset-normalizer,
whose guess makes the result ``lossy``."""

from __future__ import annotations

import codecs

from chunkmill.extract.base import ExtractionError, clean_text

# Longest first: UTF-32 LE's mark starts with UTF-16 LE's.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
ANY_BOM = tuple(bom for bom, _ in _BOMS)

# UTF-16 without a mark: in mostly-ASCII text every other byte is NUL. The first 4 KiB
# decide; at least 30% NULs on one parity and at most 2% on the other tell UTF-16 from
# binary (NULs everywhere) and from text with a few stray NULs.
_UTF16_SAMPLE = 4096
_UTF16_MIN_SHARE = 0.30
_UTF16_MAX_OTHER = 0.02
# Mess ratios (charset-normalizer's "chaos") this close are a tie between code pages.
_NEAR_TIE = 0.05


def decode(
    data: bytes, *, failure_reason: str, detect: bool, context: str = ""
) -> tuple[str, bool]:
    """``(text, lossy)`` for the bytes of a text document, through ``clean_text``: see
    ``decode_source``."""
    text, lossy, _ = decode_source(
        data, failure_reason=failure_reason, detect=detect, context=context
    )
    return text, lossy


def decode_source(
    data: bytes, *, failure_reason: str, detect: bool, context: str = ""
) -> tuple[str, bool, bytes | None]:
    """``(text, lossy, utf8)`` for the bytes of a text document, through ``clean_text``;
    ``utf8`` is ``data`` where it was read as UTF-8 as it stands (no mark, no detector), so
    that it is the text's own UTF-8 but for NULs dropped and newlines normalised; else None.

    In order: a byte-order mark (UTF-8, UTF-16, UTF-32 LE/BE) is stripped and names the
    encoding (invalid sequences after it are replaced, ``lossy``); UTF-16 LE/BE without a
    mark when the NUL pattern says so; strict UTF-8; if ``detect``, charset-normalizer's best
    guess, always ``lossy``. Raises ``ExtractionError(failure_reason)`` when nothing fits.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            body = data[len(bom) :]
            try:
                text, lossy = body.decode(encoding), False
            except UnicodeDecodeError:
                text, lossy = body.decode(encoding, "replace"), True
            return (*_finish(text, lossy), None)
    # UTF-16 before UTF-8: NULs are valid UTF-8, so UTF-8 would "decode" UTF-16 text.
    utf16 = utf16_by_nuls(data) if b"\x00" in data[:_UTF16_SAMPLE] else None
    if utf16 is not None:
        try:
            return (*_finish(data.decode(utf16), False), None)
        except UnicodeDecodeError:
            pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        utf8_error = f"not UTF-8: {e.reason} at byte {e.start}"
    else:  # strict UTF-8 decodes no surrogate: nothing for clean_text to look for
        return (*_finish(text, False, surrogates=False), data)
    if detect:
        from charset_normalizer import from_bytes

        matches = from_bytes(data)
        best = matches.best()
        if best is not None:
            # Single-byte code pages often tie on short texts (cp1250, cp1252 and cp1257
            # share most letters); Windows-1252 is the most common legacy encoding, and the
            # one WHATWG reads "latin-1" as, so it wins a near tie.
            western = next((m for m in matches if m.encoding == "cp1252"), None)
            if western is not None and western.chaos <= best.chaos + _NEAR_TIE:
                best = western
            return (*_finish(str(best), True), None)
        raise ExtractionError(failure_reason, f"{context}{utf8_error}; no encoding detected")
    raise ExtractionError(failure_reason, f"{context}{utf8_error}")


def utf16_by_nuls(data: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` when the NUL pattern of the first bytes says so."""
    sample = data[: _UTF16_SAMPLE - _UTF16_SAMPLE % 2]
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if odd >= _UTF16_MIN_SHARE * pairs and even <= _UTF16_MAX_OTHER * pairs:
        return "utf-16-le"
    if even >= _UTF16_MIN_SHARE * pairs and odd <= _UTF16_MAX_OTHER * pairs:
        return "utf-16-be"
    return None


def _finish(text: str, lossy: bool, *, surrogates: bool = True) -> tuple[str, bool]:
    text, changed = clean_text(text, surrogates=surrogates)
    return text, lossy or changed
