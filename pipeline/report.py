"""The summary printed at the end of a run (and by ``chunkmill report``), from the run report
in ``_SUCCESS``."""

from __future__ import annotations

from typing import Any


def summary(report: dict[str, Any], seconds: float | None) -> str:
    """The run's counts in a few lines; ``seconds`` is the run's duration, if known."""
    c = report["counts"]
    failed = ", ".join(f"{k} {v}" for k, v in sorted(c["failed_by_reason"].items()))
    prior = report["prior"]["run_id"] or report["prior"]["manifest"] or "none"
    lines = [
        f"run {report['run_id']}  (prior: {prior})",
        f"documents  listed {c['docs_listed']}  "
        + (f"read {c['docs_read']}  " if "docs_read" in c else "")  # older reports lack it
        + f"processed {c['docs_processed']}  "
        f"carried over {c['docs_carried_over']}  failed {c['docs_failed']}"
        + (f" ({failed})" if failed else "")
        + (f"  removed {c['docs_removed']}" if c["docs_removed"] else ""),
        *_listing_line(c),
        f"chunks     total {c['chunks_total']}  new to embed {c['chunks_to_embed']}  "
        f"removed {c['chunks_removed']}",
        f"tokens to embed {c['tokens_to_embed']}",
        *([f"time {seconds:.1f} s"] if seconds is not None else []),
        f"output {report['output']}/runs/{report['run_id']}",
    ]
    return "\n".join(lines)


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
