"""``chunkmill report`` without a pipeline: histogram bins and quantiles, the page of a
hand-written run (several files, tiny batches), and the one-line mistakes."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill import schema
from chunkmill.pipeline import graph, run_report
from chunkmill.pipeline.cli import main
from chunkmill.transforms import parquet_io
from tests.report_page import Page


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5], 0.5, 5),
        ([1, 2, 3, 4], 0.5, 2),  # nearest rank: the lower middle
        ([1, 2, 3, 4, 5], 0.5, 3),
        (list(range(1, 101)), 0.95, 95),
        (list(range(1, 101)), 1.0, 100),
        ([7, 7, 7, 9], 0.95, 9),
    ],
)
def test_quantile_is_nearest_rank(values, q, expected):
    assert run_report.quantile(Counter(values), q) == expected


def test_quantile_of_nothing_raises():
    with pytest.raises(ValueError):
        run_report.quantile({}, 0.5)


@pytest.mark.parametrize(
    ("values", "width", "first", "nbins"),
    [
        ([42], 1, 42, 1),
        ([3, 3, 4], 1, 3, 2),
        ([0, 19], 1, 0, 20),
        ([0, 20], 2, 0, 11),
        ([2, 458], 50, 0, 10),
        ([130, 680], 50, 100, 12),
    ],
)
def test_histogram_uses_round_bin_widths(values, width, first, nbins):
    bins = run_report.histogram(Counter(values))
    assert bins[0].start == first and len(bins) == nbins
    assert {b.end - b.start for b in bins} == {width}


@given(st.dictionaries(st.integers(0, 100_000), st.integers(1, 1000), min_size=1))
def test_histogram_bins_are_contiguous_and_count_every_value(counts):
    bins = run_report.histogram(counts)
    assert 1 <= len(bins) <= run_report.MAX_BINS
    assert all(a.end == b.start for a, b in pairwise(bins))
    assert bins[0].start <= min(counts) and max(counts) < bins[-1].end
    for b in bins:
        assert b.count == sum(n for v, n in counts.items() if b.start <= v < b.end)


# --- A hand-written run ------------------------------------------------------------------------

EVIL = "/corpus/<script>alert('x')</script>.md"


def _occurrence(uri: str, index: int, tokens: int, strategy: str, fmt: str) -> dict[str, Any]:
    row: dict[str, Any] = {f: None for f in schema.OCCURRENCE_FIELDS}
    row.update(
        chunk_id=f"{uri}#{index}",
        chunk_hash=f"h-{uri}-{index}",
        doc_id=f"d-{uri}",
        source_uri=uri,
        chunk_index=index,
        char_start=0,
        char_end=1,
        token_count=tokens,
        strategy=strategy,
        config_fingerprint="f",
        content_sha256="c",
        doc_format=fmt,
    )
    return row


def _write(run: Path, table: str, part: int, rows: list[dict[str, Any]]) -> str:
    (run / table).mkdir(parents=True, exist_ok=True)
    name = f"{table}/part-{part:05d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.TABLES[table]), run / name)
    return name


def _error(uri: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "doc_id": f"d-{uri}",
        "source_uri": uri,
        "stage": "extract",
        "reason": reason,
        "message": message,
        "size_bytes": 1,
        "content_sha256": None,
        "versions": "chunkmill 0",
        "source_version": None,
        "attempt_key": None,
        "attempted": True,
    }


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A finished run ``r1`` written by hand: the new chunks of EVIL split over two manifest
    files, four errors of one reason, removed rows of both reasons."""
    out = tmp_path / "out"
    run = out / "runs" / "r1"
    a = [
        _occurrence("/corpus/a.md", i, t, "section", "markdown") for i, t in enumerate([9, 20, 500])
    ]
    evil = [_occurrence(EVIL, i, 30 + i, "section", "markdown") for i in range(4)]
    b = [
        {**_occurrence("/corpus/b.txt", i, 100 + i, "paragraph", "text"), "is_new": False}
        for i in range(2)
    ]
    new = [{**r, "is_new": True} for r in a + evil]
    written: dict[str, list[str]] = {"manifest": [], "chunks": [], "errors": [], "removed": []}
    written["manifest"].append(_write(run, "manifest", 0, new[:5] + b[:1]))
    written["manifest"].append(_write(run, "manifest", 1, new[5:] + b[1:]))
    chunk_rows = [{**r, "text": "t", "text_with_context": None} for r in a + evil]
    written["chunks"].append(_write(run, "chunks", 0, chunk_rows))
    errors = [
        _error(f"/corpus/bad{i}.pdf", "corrupt", "pypdf: PdfStreamError") for i in (4, 2, 3, 1)
    ]
    errors.append(_error("/corpus/empty.md", "empty", "nothing\nbut <b>bold</b> words"))
    written["errors"].append(_write(run, "errors", 0, errors))
    removed = [
        {**_occurrence(u, 0, 5, "section", "markdown"), "removed_reason": why}
        for u, why in [("/x.md", "document_removed"), ("/y.md", "document_removed")]
    ] + [
        {
            **_occurrence("/corpus/a.md", 7, 5, "section", "markdown"),
            "removed_reason": "document_changed",
        }
    ]
    written["removed"].append(_write(run, "removed", 0, removed))
    counts = {
        "docs_listed": 9,
        "docs_processed": 2,
        "docs_carried_over": 1,
        "docs_failed": 5,
        "failed_by_reason": {"corrupt": 4, "empty": 1},
        "docs_removed": 2,
        "chunks_total": 9,
        "chunks_new_occurrences": 7,
        "chunks_to_embed": 7,
        "chunks_removed": 3,
        "tokens_to_embed": 1234567,
    }
    report = {
        "run_id": "r1",
        "started_at": "2026-11-22T07:30:05Z",
        "chunkmill_version": "0.1.0",
        "schema_version": "1",
        "inputs": ["/corpus/**"],
        "output": str(out),
        "prior": {"mode": "auto", "run_id": "r0", "manifest": "/out/runs/r0/manifest/*.parquet"},
        "chunking": {"strategy": "auto", "tokenizer": "chars4", "fingerprint": "f"},
        "counts": counts,
        # As _SUCCESS records them: every file with its rows and bytes.
        "tables": {
            name: [
                {
                    "path": path,
                    "rows": pq.ParquetFile(run / path).metadata.num_rows,
                    "bytes": (run / path).stat().st_size,
                }
                for path in paths
            ]
            for name, paths in written.items()
        },
    }
    (run / "_SUCCESS").write_text(json.dumps(report))
    (out / "LATEST").write_text("r1\n")
    return out


def test_page_of_a_hand_written_run(out, monkeypatch, capsys):
    # Two rows per batch and compaction at every batch: the counts must add up across
    # batches and files, as they would over a manifest of millions of rows.
    monkeypatch.setattr(parquet_io, "PARQUET_BATCH_ROWS", 2)
    monkeypatch.setattr(run_report, "_COMPACT_ROWS", 1)
    assert main(["report", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    page = Page((out / "runs" / "r1" / "report.html").read_text())

    assert page.external_references() == []
    assert page.by_id("run_id").text == "r1"
    assert page.by_id("prior_run_id").text == "r0"
    assert page.by_id("tokens_to_embed").text == "1,234,567"
    assert page.by_id("docs_failed").value() == 5

    section = page.find("tr", data_strategy="section")
    stats = {td.attrs["data-stat"]: td.value() for td in section.find_all("td", class_="n")}
    assert stats == {
        "chunks": 7,
        "min": 9,
        "median": 31,
        "p95": 500,
        "max": 500,
        "to-embed": 7,
        "tokens-to-embed": 9 + 20 + 500 + 30 + 31 + 32 + 33,
    }
    bars = page.find("svg", data_strategy="section").find_all("rect")
    assert [
        (b.attrs["data-bin-start"], b.attrs["data-count"])
        for b in bars
        if b.attrs["data-count"] != "0"
    ] == [("0", "6"), ("500", "1")]

    formats = {
        tr.attrs["data-format"]: {
            td.attrs["data-stat"]: td.value() for td in tr.find_all("td", class_="n")
        }
        for tr in page.find("table", id="formats").find_all("tr")
        if "data-format" in tr.attrs
    }
    assert formats == {
        "markdown": {"documents": 2, "chunks": 7, "new-chunks": 7},
        "text": {"documents": 1, "chunks": 2, "new-chunks": 0},
    }

    corrupt = page.find_all("li", class_="error-example", data_reason="corrupt")
    assert [li.find("code").text for li in corrupt] == [
        "/corpus/bad1.pdf",
        "/corpus/bad2.pdf",
        "/corpus/bad3.pdf",
    ]
    assert page.find("tr", data_reason="corrupt").find("td", class_="n").value() == 4
    (empty,) = page.find_all("li", class_="error-example", data_reason="empty")
    assert empty.find("span", class_="message").text == "nothing but <b>bold</b> words"

    removed = page.find("table", id="removed")
    assert {
        tr.attrs["data-reason"]: tr.find("td", class_="n").value()
        for tr in removed.find_all("tr")
        if "data-reason" in tr.attrs
    } == {"document_changed": 1, "document_removed": 2}

    top = page.find_all("tr", class_="top-doc")
    assert [(tr.find("code").text, tr.attrs["data-new-chunks"]) for tr in top] == [
        (EVIL, "4"),
        ("/corpus/a.md", "3"),
    ]
    # The hostile name is text on the page, never markup.
    assert "<script" not in page.source.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page.source

    assert "run r1  (prior: r0)" in printed
    assert "errors     corrupt 4, e.g. /corpus/bad1.pdf: pypdf: PdfStreamError" in printed
    assert f"report     {out / 'runs' / 'r1' / 'report.html'}" in printed


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("chunkmill: error: "), err
    return err


def test_no_run_yet_is_one_line(tmp_path, capsys):
    assert main(["report", "--output", str(tmp_path / "nothing")]) == 2
    err = _err(capsys)
    assert "no run in" in err and "chunkmill run" in err


def test_unknown_run_is_named(out, capsys):
    assert main(["report", "r9", "--output", str(out)]) == 2
    err = _err(capsys)
    assert "'r9'" in err and "LATEST names 'r1'" in err


def test_unfinished_run_is_refused(out, capsys):
    (out / "runs" / "r2" / "manifest").mkdir(parents=True)
    (out / "runs" / "r2" / "manifest" / "part-00000.parquet").write_bytes(b"x")
    assert main(["report", "r2", "--output", str(out)]) == 2
    assert "did not finish" in _err(capsys)
    assert not (out / "runs" / "r2" / "report.html").exists()


def test_run_id_is_checked_before_any_path_is_built(out, capsys):
    assert main(["report", "../r1", "--output", str(out)]) == 2
    assert "is not a run id" in _err(capsys)


def test_help_lists_both_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "run" in text and "report" in text and "summarise a finished run" in text


def test_no_credential_reaches_the_summary_the_page_or_success(out, capsys):
    """A _SUCCESS and errors table that quote credentials (written before redaction, or by
    hand): the printed summary and the page show none of them."""
    run = out / "runs" / "r1"
    report = json.loads((run / "_SUCCESS").read_text())
    report["inputs"] = ["https://u:SENTINEL@h/c/*?sig=SENTINEL"]
    report["output"] = f"s3://key:SENTINEL@{out}"
    signed = "https://h/c/x.pdf?X-Amz-Signature=SENTINEL"
    (error,) = _write_errors(run, [_error(signed, "corrupt", f"403 for {signed}")])
    report["tables"]["errors"] = [error]
    (run / "_SUCCESS").write_text(json.dumps(report))
    assert main(["report", "--output", str(out)]) == 0
    assert "SENTINEL" not in capsys.readouterr().out
    page = (run / "report.html").read_text()
    assert "X-Amz-Signature=***" in page and "SENTINEL" not in page


def _write_errors(run: Path, rows: list[dict[str, Any]]) -> list[str]:
    return [_write(run, "errors", 9, rows)]


def test_the_run_report_of_settings_holds_no_credential():
    from chunkmill.pipeline.options import RunSettings
    from chunkmill.pipeline.report import summary
    from tests.helpers import SMALL

    settings = RunSettings(
        inputs=("https://u:SENTINEL@h/c/*", "gs://b/x/**"),
        output="s3://key:SENTINEL@bucket/out",
        run_id="r",
        prior_mode="none",
        prior_manifest=None,
        prior_run_id=None,
        config=SMALL,
    )
    report = graph.report_header(settings)
    assert report["inputs"] == ["https://h/c/*", "gs://b/x/**"]
    assert report["output"] == "s3://bucket/out"
    counts = dict.fromkeys(
        ["docs_listed", "docs_processed", "docs_carried_over", "docs_failed", "docs_removed"], 0
    )
    counts |= {"chunks_total": 0, "chunks_to_embed": 0, "chunks_removed": 0}
    counts |= {"tokens_to_embed": 0, "failed_by_reason": {}}
    assert "SENTINEL" not in summary({**report, "output": settings.output, "counts": counts}, 1.0)
