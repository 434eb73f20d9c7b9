"""The summary printed at the end of a run (and by ``chunkmill report``), from the run report
in ``_SUCCESS``."""

from __future__ import annotations

from typing import Any

from chunkmill.redact import redact_uri


def summary(report: dict[str, Any], seconds: float | None) -> str:
    """The run's counts in a few lines; ``seconds`` is the run's duration, if known."""
    c = report["counts"]
    failed = ", ".join(f"{k} {v}" for k, v in sorted(c["failed_by_reason"].items()))
    known = c.get("docs_failed_not_retried", 0)  # older reports lack it
    if known:
        failed += f"; {known} known, not retried"
    prior = report["prior"]["run_id"] or report["prior"]["manifest"] or "none"
    replaces = report["prior"].get("replaces")  # a run that did not diff against LATEST's
    if replaces:
        prior += (
            f"; replaces {replaces['run_id']}, without {replaces['docs_dropped']} of its "
            f"{replaces['docs']} documents"
        )
    lines = [
        f"run {report['run_id']}  (prior: {prior})",
        f"documents  listed {c['docs_listed']}  "
        + (f"read {c['docs_read']}  " if "docs_read" in c else "")  # older reports lack it
        + f"processed {c['docs_processed']}  "
        f"carried over {c['docs_carried_over']}  failed {c['docs_failed']}"
        + (f" ({failed})" if failed else "")
        + (f"  removed {c['docs_removed']}" if c["docs_removed"] else "")
        # Older reports lack it.
        + (f"  emptied {c['docs_emptied']}" if c.get("docs_emptied") else ""),
        *_listing_line(c),
        f"chunks     total {c['chunks_total']}  new to embed {c['chunks_to_embed']}  "
        f"removed {c['chunks_removed']}",
        f"tokens to embed {c['tokens_to_embed']}",
        *_model_window_lines(report),
        *([f"time {seconds:.1f} s"] if seconds is not None else []),
        # An older _SUCCESS may still hold a credential: redacted again here.
        f"output {redact_uri(report['output'])}/runs/{report['run_id']}",
    ]
    return "\n".join(lines)


def _model_window_lines(report: dict[str, Any]) -> list[str]:
    """Where the model's input window is known: how many chunks to embed exceed it, as a
    warning when any do (the model silently reads only their start)."""
    window = report.get("chunking", {}).get("model_window")
    over = report["counts"].get("chunks_over_model_window")
    if window is None or over is None:  # unknown, or a report of an older release
        return []
    if not over:
        return [f"model window {window} tokens: no chunk to embed exceeds it"]
    return [
        f"warning: {over} of {report['counts']['chunks_to_embed']} chunks to embed exceed "
        f"the model's input window of {window} tokens, and the model reads only their first "
        f"{window}; --max-embed-tokens {window} keeps every embedded text within it"
    ]


def _listing_line(c: dict[str, Any]) -> list[str]:
    """Objects the listing left out on purpose, folders it could not list, and documents
    kept because of them; nothing when there were none (or the report predates them)."""
    parts = []
    if c.get("docs_skipped"):
        why = ", ".join(f"{k} {v}" for k, v in sorted(c.get("skipped_by_reason", {}).items()))
        parts.append(f"skipped {c['docs_skipped']} ({why}; not read, not failures)")
    if c.get("listing_errors"):
        why = ", ".join(
            f"{k} {v}" for k, v in sorted(c.get("listing_errors_by_reason", {}).items())
        )
        parts.append(f"listing errors {c['listing_errors']} ({why})")
    if c.get("docs_kept_unlisted"):
        parts.append(f"kept unlisted {c['docs_kept_unlisted']} (under a folder that failed)")
    return ["listing    " + "  ".join(parts)] if parts else []
