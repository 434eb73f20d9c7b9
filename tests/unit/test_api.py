"""The Python API (``chunkmill.chunk_text``, ``extract_text``): what the README shows runs,
and the chunks are a run's, from the same code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkmill
from chunkmill import ids
from chunkmill.extract import ExtractionError

ROOT = Path(__file__).resolve().parents[2]


def documented_python_blocks() -> list[str]:
    page = ROOT.joinpath("docs", "python-api.md").read_text()
    section = page.split("## Chunking and extracting a text", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_docs_show_the_api_and_its_first_example_runs(capsys):
    blocks = documented_python_blocks()
    assert len(blocks) == 2
    exec(compile(blocks[0], "python-api.md", "exec"), {})
    printed = capsys.readouterr().out
    assert chunkmill.__version__ in printed
    assert "('Retries', 'Budgets')" in printed


def test_chunks_cover_the_text_with_offsets_hashes_and_counts():
    text = "# A\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(12))
    chunks = chunkmill.chunk_text(text, "paragraph", max_tokens=120, overlap_tokens=0)
    assert len(chunks) > 2
    assert [c.text for c in chunks] == [text[c.start : c.end] for c in chunks]
    assert all(c.chunk_hash == ids.chunk_hash(c.text) for c in chunks)
    assert all(0 < c.token_count <= 120 for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text.rstrip())


def test_a_context_window_is_what_is_hashed_and_counted():
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 30 for i in range(6))
    chunks = chunkmill.chunk_text(
        text, "paragraph", max_tokens=60, overlap_tokens=0, context_prev_chars=40
    )
    later = chunks[1]
    assert later.text_with_context is not None and later.text in later.text_with_context
    assert later.chunk_hash == ids.chunk_hash(later.text_with_context)


def test_bad_strategies_and_parameters_are_value_errors_naming_them():
    with pytest.raises(ValueError, match="nope"):
        chunkmill.chunk_text("x", "nope")
    with pytest.raises(ValueError, match="max_tokenz"):
        chunkmill.chunk_text("x", "paragraph", max_tokenz=3)


def test_whitespace_has_no_chunk_and_bad_bytes_raise_with_a_reason():
    assert chunkmill.chunk_text(" \n\t ") == []
    with pytest.raises(ExtractionError) as raised:
        chunkmill.extract_text(b"\x00\x01\x02" * 100, "blob.txt")
    assert raised.value.reason


# Pieces a caller's string may hold that extraction would change: CRLF and lone CR line ends,
# a byte-order mark, NULs and other control characters, astral characters (two UTF-16 code
# units, four UTF-8 bytes), combining marks, and Markdown and sentence structure.
PIECES = st.sampled_from(
    [
        "word ",
        "Sentence ends. ",
        "\r\n",
        "\r\n\r\n",
        "\r",
        "\n\n",
        "\ufeff",
        "\x00",
        "\x0c",
        "\x1b[0m",
        "\U0001f600",
        "\U00010348",
        "e\u0301",
        "# Title\r\n",
        "## Part\n",
        "- item\n",
        "```\ncode\n```\n",
        " " * 7,
        "\t",
        "x" * 90,
    ]
)
STRATEGIES = ["auto", "paragraph", "paragraph-window", "recursive", "section", "sentence"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(PIECES, max_size=400),
    strategy=st.sampled_from(STRATEGIES),
    name=st.sampled_from(["text.md", "notes.txt", "noname"]),
)
def test_a_string_is_chunked_as_given(pieces: list[str], strategy: str, name: str):
    text = "".join(pieces)
    chunks = chunkmill.chunk_text(text, strategy, name=name)
    assert [text[c.start : c.end] for c in chunks] == [c.text for c in chunks]
    assert all(c.chunk_hash == ids.chunk_hash(c.text_with_context or c.text) for c in chunks)
    if text.strip():
        assert chunks


def test_a_string_keeps_its_crlf_bom_and_nul():
    text = "\ufeffFirst line\r\nsame paragraph\x00\r\n\r\n\U0001f600 second paragraph\r\n"
    (chunk,) = chunkmill.chunk_text(text, "paragraph")
    assert (chunk.start, chunk.end) == (0, len(text) - 2)
    assert chunk.text == text[:-2]


def test_a_lone_surrogate_is_a_value_error_naming_its_offset():
    with pytest.raises(ValueError, match=r"lone surrogate \(U\+D800\) at offset 5"):
        chunkmill.chunk_text("abcd \ud800 efg")


def test_chunk_corpus_is_there_without_importing_beam_until_asked():
    assert chunkmill.ChunkCorpus.__name__ == "ChunkCorpus"
    with pytest.raises(AttributeError):
        _ = chunkmill.NoSuchThing
