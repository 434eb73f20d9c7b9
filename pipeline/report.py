"""The summary printed at the end of a run (and by ``chunkmill report``), from the run report
in ``_SUCCESS``."""

from __future__ import annotations

from typing import Any


def summary(report: dict[str, Any], seconds: float | None) -> str:
    """The run's counts in a few lines; ``seconds`` is the run's duration, if known."""
    c = report["counts"]
    failed = ", ".join(f"{k} {v}" for k, v in sorted(c["failed_by_reason"].items()))
    known = c.get("docs_failed_not_retried", 0)  # older reports lack it
    if known:
        failed += f"; {known} known, not retried"
    prior = report["prior"]["run_id"] or report["prior"]["manifest"] or "none"
    lines = [
        f"run {report['run_id']}  (prior: {prior})",
        f"documents  listed {c['docs_listed']}  "
        + (f"read {c['docs_read']}  " if "docs_read" in c else "")  # older reports lack it
        + f"processed {c['docs_processed']}  "
        f"carried over {c['docs_carried_over']}  failed {c['docs_failed']}"
        + (f" ({failed})" if failed else "")
        + (f"  removed {c['docs_removed']}" if c["docs_removed"] else ""),
        f"chunks     total {c['chunks_total']}  new to embed {c['chunks_to_embed']}  "
        f"removed {c['chunks_removed']}",
        f"tokens to embed {c['tokens_to_embed']}",
        *([f"time {seconds:.1f} s"] if seconds is not None else []),
        f"output {report['output']}/runs/{report['run_id']}",
    ]
    return "\n".join(lines)
