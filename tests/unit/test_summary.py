"""The summary a run prints (``chunkmill.pipeline.report.summary``): what it says about the model's
input window."""

from __future__ import annotations

import pytest

from chunkmill.pipeline.report import summary


def run_report(window: int | None, over: int | None) -> dict:
    counts = {
        "docs_listed": 3,
        "docs_read": 3,
        "docs_processed": 3,
        "docs_carried_over": 0,
        "docs_failed": 0,
        "docs_removed": 0,
        "failed_by_reason": {},
        "chunks_total": 12,
        "chunks_to_embed": 10,
        "chunks_removed": 0,
        "tokens_to_embed": 3000,
    }
    if over is not None:
        counts["chunks_over_model_window"] = over
    return {
        "run_id": "r1",
        "output": "/out",
        "prior": {"run_id": None, "manifest": None},
        "counts": counts,
        "chunking": {"model_window": window},
    }


def test_chunks_over_the_model_window_are_a_warning_naming_the_flag():
    lines = summary(run_report(256, 4), 1.0).splitlines()
    (warning,) = [line for line in lines if "window" in line]
    assert warning.startswith("warning: 4 of 10 chunks to embed exceed")
    assert "256 tokens" in warning and "--max-embed-tokens 256" in warning


def test_a_known_window_that_every_chunk_fits_is_said_so():
    lines = summary(run_report(256, 0), 1.0).splitlines()
    assert "model window 256 tokens: no chunk to embed exceeds it" in lines
    assert not any(line.startswith("warning") for line in lines)


@pytest.mark.parametrize(("window", "over"), [(None, 0), (256, None)])
def test_nothing_is_said_without_a_known_window_or_count(window, over):
    # chars4 and whitespace know no model; a report of an older release has no count.
    assert "window" not in summary(run_report(window, over), 1.0)


def test_an_emptied_document_and_the_state_a_run_without_a_prior_replaces_are_said():
    report = run_report(None, None)
    report["counts"] |= {"docs_processed": 3, "docs_empty": 2, "docs_emptied": 1}
    report["prior"] = {
        "run_id": None,
        "manifest": None,
        "after": "r0",
        "replaces": {"run_id": "r0", "docs": 4, "docs_dropped": 1},
    }
    lines = summary(report, 1.0).splitlines()
    assert lines[0] == "run r1  (prior: none; replaces r0, without 1 of its 4 documents)"
    assert lines[1].endswith("failed 0  emptied 1"), lines[1]
