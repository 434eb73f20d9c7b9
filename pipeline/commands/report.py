"""``chunkmill report``: a finished run summarised as an HTML page beside it
(``chunkmill.pipeline.run_report`` reads it, ``chunkmill.pipeline.report_html`` draws it)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from chunkmill.pipeline.options import DEFAULT_OUTPUT, Parser, absolute, add_log_level, location


@dataclass(frozen=True)
class ReportSettings:
    output: str
    run_id: str | None  # None: the run LATEST names (``preflight.finished_run``)


def build_parser() -> Parser:
    report = Parser(
        prog="chunkmill report",
        description="Writes OUTPUT/runs/RUN/report.html, a self-contained page (no network "
        "needed to view it), and prints the same summary.",
        allow_abbrev=False,
    )
    report.add_argument(
        "run", nargs="?", metavar="RUN", help="run id (default: the run named in OUTPUT/LATEST)"
    )
    report.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    add_log_level(report)
    return report


def parse(argv: Sequence[str]) -> ReportSettings:
    """Parse ``chunkmill report`` arguments (without the ``report`` word); which run that is
    is found by ``main`` (``preflight.finished_run``)."""
    args = build_parser().parse_args(list(argv))
    return ReportSettings(output=absolute(args.output).rstrip("/") or "/", run_id=args.run)


def main(argv: Sequence[str]) -> int:
    settings = parse(argv)
    from chunkmill.pipeline import preflight, run_report

    run_id = preflight.finished_run(settings.output, settings.run_id)
    try:
        stats, page = run_report.write_report(settings.output, run_id)
    except Exception:
        # The run published _SUCCESS, so its tables should read; if they do not, say which run.
        logging.exception("report failed")
        print(f"chunkmill: cannot report run {run_id} in {settings.output}", file=sys.stderr)
        return 1
    print(run_report.terminal_summary(stats, page))
    return 0
