"""The state stays right across runs launched the wrong way: a clock ahead, a run without a
prior over a broken glob, a document emptied in place."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from chunkmill.pipeline import options
from chunkmill.pipeline.cli import main
from tests.e2e.conftest import Run

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


def test_a_document_emptied_in_place_loses_its_chunks(chunkmill, corpus, tmp_path, capsys):
    """notes.txt truncated to 0 bytes and faq.md left whitespace only: their chunks leave the
    state as document_emptied, counted, in the summary and the report, and no errors row."""
    from apache_beam.io.filesystems import FileSystems

    from chunkmill import ids
    from chunkmill.pipeline import run_report
    from tests.report_page import Page

    out = tmp_path / "out"
    night1 = chunkmill("--input", str(corpus / "**"), run_id="night1")
    emptied = {corpus / "notes.txt", corpus / "guides" / "faq.md"}
    docs = {ids.doc_id(str(p)) for p in emptied}
    before = {r["chunk_id"] for r in night1.rows("manifest") if r["doc_id"] in docs}
    assert before
    (corpus / "notes.txt").write_bytes(b"")
    (corpus / "guides" / "faq.md").write_text("  \n\n\t\n")

    args = ["run", "--output", str(out), "--input", str(corpus / "**"), "--run-id", "night2"]
    assert main(args) == 0
    summary = capsys.readouterr().out
    assert "emptied 2" in summary, summary
    night2 = Run(out, "night2")
    assert not docs & {r["doc_id"] for r in night2.rows("manifest")}
    removed = [r for r in night2.rows("removed") if r["doc_id"] in docs]
    assert {r["chunk_id"] for r in removed} == before
    assert {r["removed_reason"] for r in removed} == {"document_emptied"}
    assert not docs & {r["doc_id"] for r in night2.rows("errors")}
    assert (night2.counts["docs_emptied"], night2.counts["docs_removed"]) == (2, 0)
    assert night2.counts["chunks_removed"] == len(before)

    _, page_path = run_report.write_report(str(out), "night2")
    with FileSystems.open(page_path) as f:
        page = Page(f.read().decode("utf-8"))
    assert page.by_id("docs_emptied").value() == 2
    assert "document_emptied" in page.by_id("removed").text

    # The next night finds them empty still: nothing more to remove, nothing failed.
    night3 = chunkmill("--input", str(corpus / "**"), run_id="night3")
    assert (night3.counts["docs_empty"], night3.counts["docs_emptied"]) == (2, 0)
    assert night3.rows("removed") == [] and latest(out) == "night3"


def test_emptying_most_of_the_corpus_is_refused(chunkmill, corpus, tmp_path, capsys):
    """A mount that serves empty files: every text document emptied at once is held to
    --max-removed-ratio like their deletion."""
    out = tmp_path / "out"
    chunkmill("--input", str(corpus / "**"), run_id="night1")
    for name in ("notes.txt", "tool.py", "guides/start.md", "guides/faq.md"):
        (corpus / name).write_bytes(b"")
    code = main(["run", "--output", str(out), "--input", str(corpus / "**"), "--run-id", "n2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "removes 4 of 5 documents" in err and "4 of them emptied" in err, err
    assert latest(out) == "night1"
