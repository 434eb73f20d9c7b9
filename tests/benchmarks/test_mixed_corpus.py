"""The mixed-format benchmark corpus: deterministic, nested, every format readable by
chunkmill's extractor, edits touch only what they say."""

from __future__ import annotations

import os

from benchmarks import mixed_corpus
from chunkmill.extract import extract


def _files(root) -> dict[str, bytes]:
    out = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def test_documents_depend_only_on_seed_and_index():
    first = [mixed_corpus.document(i, 7) for i in range(12)]
    again = [mixed_corpus.document(i, 7) for i in range(12)]
    assert first == again
    assert [d.data for d in first] != [mixed_corpus.document(i, 8).data for i in range(12)]


def test_every_format_appears_and_extracts_with_its_own_format():
    docs = list(mixed_corpus.iter_documents(60, 3))
    assert {d.format for d in docs} == set(mixed_corpus.FORMATS)
    assert len({d.name for d in docs}) == len(docs)
    for d in docs:
        extracted = extract(d.name, d.data)
        assert extracted.format == d.format, d.name
        assert len(extracted.text) > 100


def test_a_larger_corpus_extends_a_smaller_one_by_hard_links(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    mixed_corpus.write_corpus(str(small), 8, 5)
    mixed_corpus.extend_corpus(str(small), str(large), 8, 20, 5)
    direct = tmp_path / "direct"
    mixed_corpus.write_corpus(str(direct), 20, 5)
    assert _files(large) == _files(direct)
    assert len(_files(small)) == 8


def test_edits_rewrite_only_the_chosen_documents_and_not_through_links(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    mixed_corpus.write_corpus(str(small), 10, 5)
    mixed_corpus.extend_corpus(str(small), str(large), 10, 30, 5)
    before_small, before = _files(small), _files(large)
    edited = mixed_corpus.edit_documents(str(large), 30, 0.1, 5)
    after = _files(large)
    assert len(edited) == 3
    assert {k for k in before if before[k] != after[k]} == set(edited)
    assert set(after) == set(before)
    assert _files(small) == before_small  # the hard-linked smaller corpus is untouched
