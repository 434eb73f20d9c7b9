"""The ProcessDocuments benchmark's machinery: every figure is measured over the corpus given,
its staged files are read back and then removed, and a missing corpus is one line. No timing
is asserted."""

from __future__ import annotations

import os

import pytest

from benchmarks import process_docs
from chunkmill.transforms import staging
from tests.helpers import paragraphs


def test_every_figure_is_measured_and_the_staged_files_go(tmp_path, capsys, monkeypatch):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(5):
        (corpus / f"{i}.md").write_bytes(paragraphs(f"w{i}", "x", "y"))
    read: list[str] = []
    real_read = staging.read
    monkeypatch.setattr(staging, "read", lambda p: read.append(p) or real_read(p))
    assert process_docs.main([str(corpus), "--rounds", "2"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == list(process_docs._FIGURES)
    figures = {r.split(" | ")[0].lstrip("| "): float(r.split(" | ")[1].rstrip(" |")) for r in rows}
    assert figures["dofn_wall"] > 0 and all(v >= 0 for v in figures.values())
    assert read and len(set(read)) == len(read)  # a new staged file per round, each read once
    assert not any(os.path.exists(p) for p in read)


def test_a_corpus_that_is_not_a_folder_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        process_docs.main([str(tmp_path / "none")])
    assert exit_.value.code == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1].endswith(f"no folder at {tmp_path}/none")
    )
