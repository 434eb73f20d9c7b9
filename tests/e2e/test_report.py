"""``chunkmill report`` on real runs: the page's numbers against the run's own tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main
from tests.e2e.conftest import prose
from tests.report_page import Page

pytestmark = pytest.mark.slow

# A file name a browser would run if the page did not escape it.
HOSTILE = "<script>alert(1)<script>.md"


def report(capsys, *args: str) -> tuple[Page, str]:
    """Runs ``chunkmill report``; returns the page it wrote and what it printed."""
    code = main(["report", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    page_path = captured.out.strip().splitlines()[-1].removeprefix("report     ")
    return Page(Path(page_path).read_text(encoding="utf-8")), captured.out


def test_page_matches_the_run(chunkmill, corpus, tmp_path, capsys):
    (corpus / "guides" / HOSTILE).write_text("# Hostile\n\n" + prose("hostile", 3))
    run = chunkmill("--input", str(corpus / "**"), run_id="r1")
    page, printed = report(capsys, "--output", str(tmp_path / "out"))
    assert Path(printed.splitlines()[-1].split()[-1]) == run.dir / "report.html"
    manifest = run.table("manifest").to_pylist()

    assert page.external_references() == []
    assert page.by_id("run_id").text == "r1"
    assert page.by_id("started_at").text == run.report["started_at"]
    assert page.by_id("chunkmill_version").text == run.report["chunkmill_version"]
    assert page.by_id("prior_run_id").text == "none"
    for key, value in run.counts.items():
        if not key.endswith("_by_reason"):  # breakdowns: shown under their count
            assert page.by_id(key).value() == value, key

    # Errors: the corrupt PDF, with its path as the example.
    assert page.find("tr", data_reason="corrupt").find("td", class_="n").value() == 1
    (example,) = page.find_all("li", class_="error-example")
    assert example.attrs["data-reason"] == "corrupt"
    assert example.find("code").text == str(corpus / "broken.pdf")

    # Documents by format: every format the extractor named, documents counted once.
    docs_by_format: dict[str, set[str]] = {}
    for r in manifest:
        docs_by_format.setdefault(r["doc_format"], set()).add(r["doc_id"])
    shown = {
        tr.attrs["data-format"]: tr.find("td", data_stat="documents").value()
        for tr in page.find("table", id="formats").find_all("tr")
        if "data-format" in tr.attrs
    }
    assert set(shown) == {"markdown", "text", "code", "pdf"}
    assert shown == {fmt: len(docs) for fmt, docs in docs_by_format.items()}

    # One histogram per strategy; each bar counts exactly the manifest rows in its bin.
    tokens_by_strategy: dict[str, list[int]] = {}
    for r in manifest:
        tokens_by_strategy.setdefault(r["strategy"], []).append(r["token_count"])
    charts = page.find_all("svg", class_="histogram")
    assert {svg.attrs["data-strategy"] for svg in charts} == set(tokens_by_strategy)
    for svg in charts:
        tokens = tokens_by_strategy[svg.attrs["data-strategy"]]
        bars = svg.find_all("rect", class_="bar")
        assert sum(int(b.attrs["data-count"]) for b in bars) == len(tokens)
        for b in bars:
            lo, hi = int(b.attrs["data-bin-start"]), int(b.attrs["data-bin-end"])
            assert int(b.attrs["data-count"]) == sum(lo <= t < hi for t in tokens)
        row = page.find("tr", data_strategy=svg.attrs["data-strategy"])
        assert row.find("td", data_stat="min").value() == min(tokens)
        assert row.find("td", data_stat="max").value() == max(tokens)

    # Top documents by new chunks, most first, ties by URI.
    new = Counter(r["source_uri"] for r in manifest if r["is_new"])
    expected = sorted(new.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    top = page.find_all("tr", class_="top-doc")
    assert [(tr.find("code").text, int(tr.attrs["data-new-chunks"])) for tr in top] == expected

    # The hostile name is shown as text, never as markup.
    hostile = str(corpus / "guides" / HOSTILE)
    assert hostile in [tr.find("code").text for tr in top]
    assert "<script" not in page.source.lower()

    assert "failed 1 (corrupt 1)" in printed
    assert f"errors     corrupt 1, e.g. {corpus / 'broken.pdf'}" in printed
    assert "formats    markdown 3" in printed


def test_report_of_an_incremental_run_names_its_prior(chunkmill, corpus, tmp_path, capsys):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")

    # No RUN and the default --output (./out, from the test's working directory): LATEST.
    page, printed = report(capsys)
    assert printed.startswith("run r2  (prior: r1)")
    assert page.by_id("run_id").text == "r2"
    assert page.by_id("prior_run_id").text == "r1"
    assert page.by_id("prior_manifest").text == str(
        tmp_path / "out" / "runs" / "r1" / "manifest" / "*.parquet"
    )
    assert (page.by_id("docs_processed").value(), page.by_id("docs_carried_over").value()) == (1, 4)
    new = sum(r["is_new"] for r in second.table("manifest").to_pylist())
    (top,) = page.find_all("tr", class_="top-doc")
    assert top.find("code").text == str(start) and int(top.attrs["data-new-chunks"]) == new
    changed = page.find("table", id="removed").find("tr", data_reason="document_changed")
    assert changed.find("td", class_="n").value() == second.counts["chunks_removed"]

    # An earlier run can still be reported by its id.
    page, _ = report(capsys, "r1")
    assert page.by_id("run_id").text == "r1" and page.by_id("prior_run_id").text == "none"
    assert (tmp_path / "out" / "runs" / "r1" / "report.html").exists()
