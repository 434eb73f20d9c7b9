"""The hostile corpus (tests/hostile_corpus.py), document by document: each gets its exact
expected outcome. Extraction runs the way the pipeline runs it, isolated, with a time and
memory budget, so a parser that starts hanging on one of them fails that case, not the
suite."""

from __future__ import annotations

import pytest

from chunkmill import document, ids
from chunkmill.config import Chunking, Limits
from chunkmill.extract import ExtractionError
from chunkmill.isolation import Extractor
from chunkmill.items import WorkItem
from tests.helpers import SMALL
from tests.hostile_corpus import LINES, Case, cases

CASES = cases()


@pytest.fixture(scope="module")
def extractor():
    ex = Extractor(Limits(timeout_seconds=60, memory_mb=1024))
    yield ex
    ex.close()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_document_gets_its_exact_outcome(extractor: Extractor, case: Case) -> None:
    if case.reason is not None:
        with pytest.raises(ExtractionError) as info:
            extractor(case.name, case.data)
        assert info.value.reason == case.reason, info.value
        return
    doc = extractor(case.name, case.data)
    if case.text is not None:
        assert doc.text == case.text
    if case.contains is not None:
        assert case.contains in doc.text
    if case.lossy is not None:
        assert doc.lossy is case.lossy
    assert "\x00" not in doc.text
    doc.text.encode("utf-8")  # strict: no lone surrogate


def test_case_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


def test_crlf_and_lf_twins_give_the_same_chunk_hashes() -> None:
    def hashes(name: str, data: bytes) -> list[str]:
        item = WorkItem(ids.doc_id(f"/c/{name}"), f"/c/{name}", len(data))
        out = document.process_document(item, data, Chunking(SMALL))
        assert out.status == document.PROCESSED, out.error
        return [o["chunk_hash"] for o in out.occurrences]

    lf = LINES.encode()
    assert hashes("lf.txt", lf) == hashes("crlf.txt", lf.replace(b"\n", b"\r\n"))
    assert hashes("lf.txt", lf) == hashes("cr.txt", lf.replace(b"\n", b"\r"))
