"""The clean-up every extracted text goes through: ``clean_up(text, profile=...)``.

Three profiles, from the most to the least conservative; each does all the previous one
does:

``VERBATIM`` (plain text, Markdown, reStructuredText, code, JSON, JSON Lines, CSV): the file
    is what its author typed, so only what cannot be meant goes. Unicode noncharacters
    (U+FDD0..U+FDEF and the last two code points of every plane, U+FFFE/U+FFFF among them)
    and control characters other than tab and newline are dropped; the controls that are
    line breaks become line breaks: form feed (a page break) a blank line, vertical tab
    and NEL (U+0085) a newline, ``"\\r\\n"``/``"\\r"`` a newline. Nothing else changes: no
    Unicode normalisation, no de-hyphenation (code and data must keep every character).

``DOCUMENT`` (HTML, DOCX): text rendered from a typeset document, where a few characters
    are artefacts of typesetting rather than content. Also: typographic ligatures and
    presentation forms become the letters they stand for (see ``_COMPATIBILITY``), soft
    hyphens (U+00AD, an invisible hyphenation hint) are dropped, the space separators
    (NBSP, thin space, en space, ...; not the ideographic space U+3000, which CJK layout
    uses as a full-width character) become an ordinary space, so the same words hash the
    same whether a producer used NBSP or not, and the text is put in NFC (a canonical
    equivalence: accents composed whichever way the producer stored them). Private-use code
    points (U+E000..U+F8FF, planes 15 and 16) are dropped: in a typeset document they are
    glyphs of icon or symbol fonts that no other reader shares (a PDF's unmapped glyphs,
    an icon font's arrows), never text a search would match.

``PDF`` (one page of a PDF): ``DOCUMENT``, plus words hyphenated at a line end joined
    again (``_LINE_END_HYPHEN``), and U+FFFE read as pdfium means it: pdfium reports a
    hyphen that ends a line as U+FFFE and drops the line break after it, so U+FFFE is
    treated as ``"-\\n"`` and goes through the same rule; both engines then give the same
    text for the same page.

The function is pure and idempotent (``clean_up(clean_up(t, p), p) == clean_up(t, p)``).
"""

from __future__ import annotations

import re
import unicodedata

VERBATIM, DOCUMENT, PDF = "verbatim", "document", "pdf"
PROFILES = (VERBATIM, DOCUMENT, PDF)

# Noncharacters: U+FDD0..U+FDEF and U+nFFFE/U+nFFFF in each of the 17 planes. Never text: a
# producer uses them as internal markers (pdfium, see the module docstring).
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(17)
)
# C0 controls but tab and newline, DEL, C1 controls. "\r" is here for text that did not go
# through newline normalisation: it is rewritten, not dropped (_LINE_BREAKS).
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_UNWANTED = re.compile(f"[{_CONTROLS}{_NONCHARACTERS}]")
# A search for thirty-odd scattered astral code points is ten times slower than for one
# range; most texts hold no astral character at all, so that search runs only where needed.
_BMP_UNWANTED = re.compile(f"[{_CONTROLS}\ufdd0-\ufdef\ufffe\uffff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
# Every search above walks the text a character at a time in Python's regex engine; a text's
# UTF-8 bytes are walked by C. Every unwanted character or "\r" is either one of these bytes
# (a C0 control or DEL) or, in UTF-8, starts with one of the lead bytes below: C1 controls
# are U+0080..U+009F (lead byte C2), U+FDD0..U+FDEF and U+FFFE/U+FFFF lie in U+F000..U+FFFF
# (EF), the astral noncharacters in planes 1-16 (F0..F4). A text with none of them needs
# no search at all.
_CONTROL_BYTES = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])
_LEAD_BYTES = (b"\xc2", b"\xef", b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")
# Controls that separate lines or pages: they become line breaks, so no two words are glued
# together by dropping them.
_LINE_BREAKS = {"\r\n": "\n", "\r": "\n", "\x0b": "\n", "\x85": "\n", "\x0c": "\n\n"}
_LINE_BREAK = re.compile("\r\n?|[\x0b\x0c\x85]")
# pdfium's line-end hyphen, with the line break it is seen to drop, should it keep one.
_PDFIUM_HYPHEN = re.compile("\ufffe(?:[ \t]*\n)?")

# Compatibility mapping for the characters that only exist to draw a glyph: Latin and
# Armenian ligatures (U+FB00..U+FB06, U+FB13..U+FB17: "ﬁ" -> "fi"), Hebrew presentation
# forms (U+FB1D..U+FB4F, wide and pointed letters) and Arabic presentation forms
# (U+FB50..U+FDFF and U+FE70..U+FEFE: the initial, medial, final and isolated shapes of a
# letter, "ﻣ" -> "م", and the lam-alef ligatures). A PDF's font maps its glyphs to these when
# it was typeset with them, so the same word comes out with or without them depending on the
# producer and engine; a search for "finance" must find "ﬁnance".
#
# Why not full NFKC: it also rewrites characters that carry meaning, which a chunk for
# retrieval must keep as written: superscripts and subscripts (x² -> x2, H₂O -> H2O),
# fractions (½ -> 1⁄2), full-width and half-width forms that CJK text uses on purpose, unit
# symbols (℃ -> °C), circled and parenthesised numbers (① -> 1), the ellipsis (… -> ...),
# µ -> μ, ™ -> TM, Roman numeral characters. Only the blocks above are pure glyph artefacts.
_COMPATIBILITY_RANGES = (
    (0xFB00, 0xFB06),
    (0xFB13, 0xFB17),
    (0xFB1D, 0xFB4F),
    (0xFB50, 0xFDCF),  # U+FDD0..U+FDEF are noncharacters
    (0xFDF0, 0xFDFF),
    (0xFE70, 0xFEFE),  # U+FEFF is the byte-order mark, not a presentation form
)
_COMPATIBILITY: dict[int, str] = {
    code: mapped
    for low, high in _COMPATIBILITY_RANGES
    for code in range(low, high + 1)
    if (mapped := unicodedata.normalize("NFKC", chr(code))) != chr(code)
}
# Space separators (category Zs) other than the space itself and the ideographic space.
_SPACES: dict[int, str] = dict.fromkeys((0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F), " ")
_DOCUMENT_TABLE: dict[str, str] = {
    chr(code): mapped for code, mapped in {**_COMPATIBILITY, **_SPACES, 0xAD: ""}.items()
}
_DOCUMENT_CHARACTERS = re.compile("[" + "".join(map(re.escape, sorted(_DOCUMENT_TABLE))) + "]")
# Private-use code points: the BMP's area and the supplementary planes 15 and 16.
_PRIVATE_USE = re.compile("[\ue000-\uf8ff\U000f0000-\U0010ffff]")

# A word hyphenated at a line end: a letter, a hyphen (U+002D or U+2010), the line break
# (spaces around it allowed), then a lowercase letter (checked in _join_hyphenated):
# "infor-\nmation" -> "information".
# Not joined: a capital or a digit after the break ("X-\nRay", "2019-\n2020", "Jean-\nPaul"
# keep their hyphen, they are real compounds or ranges), a blank line after the hyphen (a
# paragraph ends with it), a hyphen after a non-letter ("--\n", "x = a -\nb", a list dash).
# A real compound split at its hyphen before a lowercase word ("well-\nknown") is joined too:
# without a dictionary it cannot be told from hyphenation, and hyphenation is far more common
# at line ends of typeset text. Only PDF text is de-hyphenated: HTML and DOCX lines are
# broken by the reader, and code and data must keep every character.
# The hyphen comes first in the pattern, the letter before it is a lookbehind: a pattern
# that starts with a plain character set is searched for much faster.
_LINE_END_HYPHEN = re.compile(r"[-\u2010](?<=[^\W\d_][-\u2010])[ \t]*\n[ \t]*(?=[^\W\d_])")


def clean_up(text: str, *, profile: str, utf8: bytes | None = None) -> str:
    """``text`` cleaned for ``profile`` (``VERBATIM``, ``DOCUMENT`` or ``PDF``, see the
    module docstring). The result holds no noncharacter, no ``"\\r"`` and no control
    character other than tab and newline. Raises ``ValueError`` for an unknown profile.
    ``utf8``: bytes the text was decoded from as UTF-8, at most with NULs dropped and
    newlines normalised since (``text.decode_source``); the byte scan reads them instead of
    encoding the text again. Dropping and normalising remove bytes the scan looks for and
    add none, so bytes that pass the scan mean a text that passes it too."""
    if profile not in PROFILES:
        raise ValueError(f"unknown clean-up profile {profile!r}")
    # A scan of the bytes clears the common text that needs none of the first steps; one
    # search decides for the rest, astral noncharacters looked for only in text that has
    # astral characters (_BMP_UNWANTED).
    if _may_be_unclean(text, utf8) and (
        _BMP_UNWANTED.search(text)
        or (not text.isascii() and _ASTRAL.search(text) and _UNWANTED.search(text))
    ):
        text = _LINE_BREAK.sub(lambda m: _LINE_BREAKS[m.group()], text)
        if profile == PDF and "\ufffe" in text:
            text = _PDFIUM_HYPHEN.sub("-\n", text)
        text = _UNWANTED.sub("", text)
    if profile == VERBATIM:
        return text
    if not text.isascii():  # every character the steps below change is outside ASCII
        # A regular expression, not str.translate: translate calls the table for every
        # character of a non-ASCII text, the expression only for the characters it changes.
        text = _DOCUMENT_CHARACTERS.sub(lambda m: _DOCUMENT_TABLE[m.group()], text)
        text = _PRIVATE_USE.sub("", text)
        # After the mapping (a presentation form can become a letter and a combining mark)
        # and before de-hyphenation, whose rule looks at letters: "e\u0301-" ends in a mark,
        # "\u00e9-" in a letter, and both must be judged alike.
        text = unicodedata.normalize("NFC", text)
    if profile == PDF and "\n" in text:
        text = _LINE_END_HYPHEN.sub(_join_hyphenated, text)
    return text


def _may_be_unclean(text: str, utf8: bytes | None = None) -> bool:
    """False only if ``text`` holds no control character but tab and newline and no
    noncharacter (``_CONTROL_BYTES``, ``_LEAD_BYTES``)."""
    data = text.encode("utf-8", "surrogatepass") if utf8 is None else utf8
    if len(data.translate(None, _CONTROL_BYTES)) != len(data):
        return True
    return not text.isascii() and any(lead in data for lead in _LEAD_BYTES)


def _join_hyphenated(match: re.Match[str]) -> str:
    following = match.string[match.end()]
    return "" if following.islower() else match.group()
