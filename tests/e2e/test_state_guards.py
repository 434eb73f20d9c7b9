"""The state stays right across runs launched the wrong way: a clock ahead, a run without a
prior over a broken glob, a document emptied in place."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from chunkmill.pipeline import options
from chunkmill.pipeline.cli import main

pytestmark = pytest.mark.slow


def latest(output: Path) -> str:
    return (output / "LATEST").read_text().strip()


def test_nights_after_a_clock_ahead_become_latest(chunkmill, corpus, tmp_path, monkeypatch):
    """night1's machine ran two hours ahead; night2 and night3, launched after it by a right
    clock (so with earlier started_at), each become LATEST and exit 0."""
    out = tmp_path / "out"
    now = dt.datetime.now(dt.timezone.utc)
    monkeypatch.setattr(options, "launch_clock", lambda: now + dt.timedelta(hours=2))
    night1 = chunkmill("--input", str(corpus / "**"), run_id="night1")
    monkeypatch.undo()
    (corpus / "notes.txt").write_text("notes rewritten after the first night")
    night2 = chunkmill("--input", str(corpus / "**"), run_id="night2")
    assert night2.report["started_at"] < night1.report["started_at"]
    assert latest(out) == "night2"
    assert night2.report["prior"]["run_id"] == "night1"
    night3 = chunkmill("--input", str(corpus / "**"), run_id="night3")
    assert latest(out) == "night3" and night3.report["prior"]["run_id"] == "night2"
    assert night3.counts["docs_carried_over"] == night3.counts["docs_listed"] - 1  # broken.pdf


def test_a_run_without_a_prior_over_a_broken_glob_is_refused(chunkmill, corpus, tmp_path, capsys):
    """--prior-manifest none over a glob that matches one document of the five LATEST holds:
    refused in one line, LATEST unchanged; told --max-removed-ratio 1, it publishes."""
    out = tmp_path / "out"
    chunkmill("--input", str(corpus / "**"), run_id="night1")
    broken = ["--input", str(corpus / "guides" / "start.md"), "--prior-manifest", "none"]
    code = main(["run", "--output", str(out), "--run-id", "broken", *broken])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "LATEST's run night1" in err and "4 of its 5 documents" in err, err
    assert "--max-removed-ratio 1" in err
    assert latest(out) == "night1"
    assert not (out / "runs" / "broken" / "_SUCCESS").exists()

    told = chunkmill(*broken, "--max-removed-ratio", "1", run_id="told")
    assert latest(out) == "told"
    assert told.report["prior"]["after"] == "night1"


def test_a_run_without_a_prior_over_the_whole_corpus_publishes(chunkmill, corpus, tmp_path):
    out = tmp_path / "out"
    chunkmill("--input", str(corpus / "**"), run_id="night1")
    fresh = chunkmill("--input", str(corpus / "**"), "--prior-manifest", "none", run_id="fresh")
    assert latest(out) == "fresh"
    assert fresh.report["prior"]["replaces"] == {"run_id": "night1", "docs": 5, "docs_dropped": 0}
