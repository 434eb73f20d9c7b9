"""The run summary's listing line: skipped objects, listing errors and documents kept
because of them, said apart from the listed documents; absent from older reports."""

from __future__ import annotations

from chunkmill.pipeline import report_html
from chunkmill.pipeline.report import summary

COUNTS = {
    "docs_listed": 5,
    "docs_read": 5,
    "docs_processed": 4,
    "docs_carried_over": 0,
    "docs_failed": 1,
    "docs_removed": 0,
    "failed_by_reason": {"corrupt": 1},
    "chunks_total": 9,
    "chunks_to_embed": 9,
    "chunks_removed": 0,
    "tokens_to_embed": 100,
}
REPORT = {"run_id": "r", "output": "/o", "prior": {"run_id": None, "manifest": None}}


def test_the_summary_says_what_the_listing_left_out():
    counts = {
        **COUNTS,
        "docs_skipped": 25,
        "skipped_by_reason": {"unsupported_format": 23, "not_regular_file": 2},
        "listing_errors": 1,
        "listing_errors_by_reason": {"list_failed": 1},
        "docs_kept_unlisted": 3,
    }
    text = summary({**REPORT, "counts": counts}, None)
    (line,) = [x for x in text.splitlines() if x.startswith("listing ")]
    assert "skipped 25 (not_regular_file 2, unsupported_format 23; not read, not failures)" in line
    assert "listing errors 1 (list_failed 1)" in line
    assert "kept unlisted 3" in line
    page = report_html._counts(counts)
    assert "skipped by reason" in page and "unsupported_format 23" in page


def test_an_older_report_has_no_listing_line():
    assert "listing " not in summary({**REPORT, "counts": COUNTS}, None)
