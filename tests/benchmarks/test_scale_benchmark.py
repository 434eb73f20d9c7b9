"""The scale benchmark's machinery: its generated documents are distinct, a run past the RSS
cap is stopped, and a small scale prints both rows. No timing is asserted."""

from __future__ import annotations

import sys

import pytest

from benchmarks import scale


def test_generated_documents_and_their_paragraphs_are_distinct(tmp_path):
    n_bytes = scale.write_corpus(tmp_path, 120, pool_size=10)
    docs = sorted(tmp_path.rglob("*.md"))
    assert len(docs) == 120
    assert n_bytes == sum(d.stat().st_size for d in docs)
    texts = [d.read_text() for d in docs]
    assert len(set(texts)) == 120
    # Documents 3 and 13 come from the same pool document: every paragraph still differs.
    three, thirteen = (
        next(t for d, t in zip(docs, texts, strict=True) if f"-{i:07d}" in d.name) for i in (3, 13)
    )
    shared = set(three.split("\n\n")) & set(thirteen.split("\n\n"))
    assert all(not p[:1].isupper() for p in shared), shared


def test_a_run_past_the_cap_is_stopped_not_waited_for():
    hog = [sys.executable, "-c", "b = bytearray(400 * 2**20); import time; time.sleep(60)"]
    result = scale.measure_capped(hog, rss_cap=100 * 2**20)
    assert isinstance(result, scale.Capped)
    assert result.peak_rss > 100 * 2**20
    assert result.wall_s < 60


@pytest.mark.slow
def test_a_small_scale_prints_the_first_run_and_the_night(tmp_path, capsys):
    assert scale.main(["--docs", "300", "--quick", "--workdir", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 300 ")]
    assert [r.split(" | ")[2] for r in rows] == ["first run", "3 edited (1%)"], rows
