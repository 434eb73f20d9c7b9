"""``chunkmill eval --compare "langchain ..."``: LangChain's recursive splitter scored beside
chunkmill's configurations, its chunks located exactly, its mistakes one line each."""

from __future__ import annotations

import sys

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from chunkmill.evaluation import splitters
from chunkmill.pipeline.cli import main
from tests.unit.test_eval_command import corpus, eval_args  # noqa: F401  (a fixture)

TEXT = (
    "Paris is the capital of France. It lies on the Seine.\n\n"
    "Berlin is the capital of Germany. It lies on the Spree, and the Havel meets it there.\n"
    "Rome is the capital of Italy.\nIt lies on the Tiber. " * 5
)


@pytest.mark.parametrize(
    "words, size, overlap, length",
    [
        (["chunk-size=60", "chunk-overlap=20"], 60, 20, len),
        (["chunk-size=20", "chunk-overlap=5", "tokenizer=whitespace"], 20, 5, None),
        (
            ["chunk-size=30", "chunk-overlap=10", "tokenizer=cl100k", "separators=chroma"],
            30,
            10,
            None,
        ),
    ],
)
def test_the_chunks_are_langchains_located_exactly(words, size, overlap, length):
    splitter = splitters.parse(words)
    chunks = splitter.chunks({"doc": TEXT})
    reference = RecursiveCharacterTextSplitter(
        chunk_size=size,
        chunk_overlap=overlap,
        length_function=length or splitter._length(),
        separators=list(splitters.SEPARATORS[splitter.separators]),
    ).split_text(TEXT)
    assert [c.text for c in chunks] == reference
    assert all(TEXT[c.start : c.end] == c.text for c in chunks)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    assert len(chunks) > 3


def test_langchain_defaults_are_its_own():
    splitter = splitters.parse([])
    assert (splitter.chunk_size, splitter.chunk_overlap, splitter.tokenizer) == (4000, 200, "chars")
    assert splitters.SEPARATORS[splitter.separators] == ("\n\n", "\n", " ", "")


def test_a_langchain_row_beside_chunkmills(corpus, capsys):  # noqa: F811
    spec = "langchain chunk-size=30 chunk-overlap=0"
    assert main(eval_args(corpus, "--compare", "section", spec, "-k", "1")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("section ") and out[2].startswith(spec + " ")
    # 30 characters a chunk: more chunks than one section a document.
    assert int(out[2][len(spec) :].split()[0]) > int(out[1].split()[1])


@pytest.mark.parametrize(
    "spec, message",
    [
        ("langchain chunk-size=10 chunk-overlap=10", "chunk-overlap must be from 0 to below"),
        ("langchain chunk-size=ten", "chunk-size takes a whole number, not 'ten'"),
        ("langchain size=10", "size is not a langchain flag"),
        ("langchain separators=mine", "separators must be langchain or chroma"),
        ("langchain tokenizer=/nonexistent/tokenizer.json", "tokenizer:"),
    ],
)
def test_a_bad_langchain_spec_is_one_line(corpus, capsys, spec, message):  # noqa: F811
    assert main(eval_args(corpus, "--compare", spec)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"chunkmill: error: --compare {spec!r}: "), err
    assert message in err[0]


def test_without_langchain_installed_the_spec_names_the_extra(corpus, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "langchain_text_splitters", None)
    assert (
        main(eval_args(corpus, "--compare", "auto", "langchain chunk-size=40 chunk-overlap=0")) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "install chunkmill's langchain extra" in err[0], err
