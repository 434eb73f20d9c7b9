"""The Python API (``chunkmill.chunk_text``, ``extract_text``): what the README shows runs,
and the chunks are a run's, from the same code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import chunkmill
from chunkmill import ids
from chunkmill.extract import ExtractionError

ROOT = Path(__file__).resolve().parents[2]


def readme_python_blocks() -> list[str]:
    section = ROOT.joinpath("README.md").read_text().split("## Python API", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_shows_the_api_and_its_first_example_runs(capsys):
    blocks = readme_python_blocks()
    assert len(blocks) == 2
    exec(compile(blocks[0], "README.md", "exec"), {})
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


def test_chunk_corpus_is_there_without_importing_beam_until_asked():
    assert chunkmill.ChunkCorpus.__name__ == "ChunkCorpus"
    with pytest.raises(AttributeError):
        _ = chunkmill.NoSuchThing
