"""``cleanup.clean_up``: the per-format clean-up of extracted text."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill.extract.base import ExtractionError
from chunkmill.extract.cleanup import DOCUMENT, PDF, PROFILES, VERBATIM, clean_up
from chunkmill.extract.text import decode_source

# Characters the clean-up acts on, mixed into generated text so that hypothesis meets them
# often: controls, noncharacters, line-break controls, ligatures, presentation forms, space
# variants, soft hyphens, hyphens, combining marks, letters of both cases.
_INTERESTING = st.sampled_from(
    [
        "\x00", "\x01", "\x1b", "\x7f", "\x85", "\x9f", "\x0b", "\x0c", "\r", "\r\n", "\t",
        "\n", "\ufffe", "\uffff", "\ufdd0", "\U0001fffe", "\U0010ffff", "\ufb01", "\ufb03",
        "\ufee3", "\ufefb", "\ufb2a", "\xa0", "\u2009", "\u3000", "\xad", "-", "\u2010",
        "\u0301", "e", "E", "x", " ", "1", "\u00e9", "\u0645",
    ]
)  # fmt: skip
_TEXT = st.lists(st.one_of(_INTERESTING, st.text(max_size=5)), max_size=30).map("".join)
_NONCHARACTERS = {chr(c) for c in range(0xFDD0, 0xFDF0)} | {
    chr(plane << 16 | low) for plane in range(17) for low in (0xFFFE, 0xFFFF)
}


def _is_control(c: str) -> bool:
    return unicodedata.category(c) == "Cc" and c not in "\t\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain text\n", "plain text\n"),
        ("a\x00b\x01c\x1bd\x7fe\x9ff", "abcdef"),
        ("bell\x07 and escape\x1b[0m", "bell and escape[0m"),
        ("page one\x0cpage two", "page one\n\npage two"),
        ("line\x0bbreak\x85next", "line\nbreak\nnext"),
        ("crlf\r\nand cr\rend", "crlf\nand cr\nend"),
        ("tab\tkept", "tab\tkept"),
        ("non\ufffecharacters\uffff\ufdd0\ufdef\U0001fffe\U0010ffff gone", "noncharacters gone"),
        # Meant, and kept as written: ligatures, soft hyphens, NBSP, superscripts, hyphens.
        ("\ufb01nance o\ufb03ce", "\ufb01nance o\ufb03ce"),
        ("infor\xadmation\xa0x\u00b2", "infor\xadmation\xa0x\u00b2"),
        ("infor-\nmation", "infor-\nmation"),
        ("e\u0301", "e\u0301"),  # no normalisation form imposed
        ("\ufeffbom in the middle\u200b\u200d", "\ufeffbom in the middle\u200b\u200d"),
    ],
)
def test_verbatim_drops_only_what_cannot_be_meant(raw: str, expected: str) -> None:
    assert clean_up(raw, profile=VERBATIM) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\ufb01nance o\ufb03ce \ufb00 \ufb02 \ufb04 \ufb05", "finance office ff fl ffl st"),
        # Arabic presentation forms (initial meem, final reh, ..., lam-alef) are letters.
        ("\ufee3\ufeae\ufea3\ufe92\ufe8e \ufefb", "\u0645\u0631\u062d\u0628\u0627 \u0644\u0627"),
        ("\ufb2a\ufb21", unicodedata.normalize("NFC", "\u05e9\u05c1\u05d0")),  # Hebrew forms
        ("infor\xadmation", "information"),
        ("10\xa0km, 5\u202f%, a\u2009b\u2003c", "10 km, 5 %, a b c"),
        ("\u3000ideographic space kept", "\u3000ideographic space kept"),
        ("e\u0301t\u00e9", "\u00e9t\u00e9"),  # NFC
        # Meaning-bearing compatibility characters stay (not NFKC).
        ("x\u00b2 H\u2082O \u00bd \u2460 \u2122 \u2103 \uff21\uff22 \u2026", None),
        ("infor-\nmation", "infor-\nmation"),  # HTML/DOCX lines are not typeset lines
        ("a\x0cb\ufffe", "a\n\nb"),
    ],
)
def test_document_profile(raw: str, expected: str | None) -> None:
    assert clean_up(raw, profile=DOCUMENT) == (raw if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("the infor-\nmation age", "the information age"),
        ("the infor- \n  mation age", "the information age"),
        ("the infor\u2010\nmation age", "the information age"),
        ("\u00e9t\u00e9-\n\u00e9t\u00e9", "\u00e9t\u00e9\u00e9t\u00e9"),  # letters of any script
        ("e\u0301-\nb", "\u00e9b"),  # decomposed and composed letters judged alike
        ("\u0434\u043e-\n\u043c", "\u0434\u043e\u043c"),  # Cyrillic lowercase
        # Real compounds and non-words keep their hyphen and line break.
        ("X-\nRay", "X-\nRay"),
        ("Jean-\nPaul", "Jean-\nPaul"),
        ("2019-\n2020", "2019-\n2020"),
        ("page 3-\n4", "page 3-\n4"),
        ("a list:\n-\nitem", "a list:\n-\nitem"),
        ("x = a -\nb", "x = a -\nb"),
        ("--\nsignature", "--\nsignature"),
        ("end of a paragraph-\n\nnext", "end of a paragraph-\n\nnext"),
        ("\u0645\u0631-\n\u062d", "\u0645\u0631-\n\u062d"),  # no case: not joined
        # pdfium's U+FFFE is a hyphen that ended a line: the same rule applies.
        ("the infor\ufffemation age", "the information age"),
        ("well\ufffeknown", "wellknown"),
        ("the infor\ufffe\r\nmation age", "the information age"),
        ("X\ufffeRay", "X-\nRay"),
        ("1\ufffe2", "1-\n2"),
        ("a-\nb-\nc", "abc"),
        ("\ufb01nance o\ufb03ce\x0cnext page", "finance office\n\nnext page"),
    ],
)
def test_pdf_profile_joins_line_end_hyphenation(raw: str, expected: str) -> None:
    assert clean_up(raw, profile=PDF) == expected


def test_unknown_profile_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="profile"):
        clean_up("x", profile="nfkc")


@pytest.mark.parametrize("profile", PROFILES)
@given(text=_TEXT)
def test_output_holds_no_control_noncharacter_or_cr(profile: str, text: str) -> None:
    out = clean_up(text, profile=profile)
    assert not any(_is_control(c) or c in _NONCHARACTERS for c in out)
    out.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("profile", PROFILES)
@given(text=_TEXT)
def test_clean_up_is_idempotent(profile: str, text: str) -> None:
    once = clean_up(text, profile=profile)
    assert clean_up(once, profile=profile) == once


@pytest.mark.parametrize("profile", PROFILES)
@given(text=_TEXT)
def test_whitespace_stays_whitespace_and_text_keeps_its_words(profile: str, text: str) -> None:
    out = clean_up(text, profile=profile)
    if not text.strip():
        assert not out.strip()
    # Only drops and one-for-several mappings: nothing is invented but line breaks.
    words = [w for w in text.split() if w.isascii() and w.isalnum()]
    if profile == VERBATIM:
        assert all(w in out for w in words)


@given(text=st.text(st.characters(exclude_categories=("Cc", "Cs", "Cn"))))
def test_verbatim_leaves_text_without_controls_or_noncharacters_alone(text: str) -> None:
    assert clean_up(text, profile=VERBATIM) == text


@given(text=_TEXT)
def test_pdf_is_document_plus_de_hyphenation(text: str) -> None:
    # Without a hyphen, line break or U+FFFE the two profiles agree.
    plain = text.replace("-", "").replace("\u2010", "").replace("\ufffe", "")
    assert clean_up(plain, profile=PDF) == clean_up(plain, profile=DOCUMENT)


@given(text=_TEXT)
def test_document_output_has_no_ligature_presentation_form_or_soft_hyphen(text: str) -> None:
    out = clean_up(text, profile=DOCUMENT)
    assert not any(
        0xFB00 <= ord(c) <= 0xFB4F or 0xFE70 <= ord(c) <= 0xFEFE or c in "\xad\xa0" for c in out
    )
    assert unicodedata.is_normalized("NFC", out)


@given(text=_TEXT)
def test_verbatim_given_the_source_bytes_cleans_as_without_them(text: str) -> None:
    """A text read as UTF-8 (``decode_source``) is cleaned from its source bytes' scan
    exactly as from its own: NULs dropped and newlines normalised since change nothing."""
    source = text.encode("utf-8", "surrogatepass")
    try:
        decoded, _, utf8 = decode_source(source, failure_reason="undecodable", detect=False)
    except ExtractionError:
        return  # a lone surrogate: not UTF-8, so never read as such
    if utf8 is None:  # read as UTF-16 by its NULs or after a byte-order mark
        return
    assert utf8 is source
    cleaned = clean_up(decoded, profile=VERBATIM, utf8=utf8)
    assert cleaned == clean_up(decoded, profile=VERBATIM)
    assert cleaned == clean_up(text, profile=VERBATIM)


@pytest.mark.parametrize(
    "data", [b"\xef\xbb\xbfmarked", "utf-16".encode("utf-16-le"), b"caf\xe9 au lait\x81 cr\xe8me"]
)
def test_only_text_read_as_utf8_as_it_stands_has_source_bytes(data: bytes) -> None:
    # After a mark, as UTF-16, or by the detector (cp1252 here) the bytes are not the text's.
    assert decode_source(data, failure_reason="undecodable", detect=True)[2] is None
