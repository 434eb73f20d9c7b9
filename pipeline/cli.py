"""``chunkmill`` (and ``python -m chunkmill``): ``run`` parses, validates, builds, runs and
summarises; ``report`` summarises a finished run as an HTML page.

Beam, pyarrow and the parsers take a second or more to import, so this module imports them
only inside the commands that need them: ``--help``, ``--version`` and a usage error answer
at once (tests/unit/test_cli_startup.py keeps it so).
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Callable, Sequence

from chunkmill.pipeline.options import (
    SAMPLE_CORPUS,
    UsageError,
    build_parser,
    parse_plan,
    parse_report,
    parse_run,
)
from chunkmill.pipeline.usage import COMMAND_CUTOFF, did_you_mean
from chunkmill.refusal import refusal_line


def run(argv: Sequence[str]) -> int:
    settings = parse_run(argv)
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.pipeline import graph, interrupts, launch, progress, report
    from chunkmill.transforms import runstate, tables

    if not launch.waits_for_job(graph.pipeline_options(settings)):
        # Dataflow, a Flink cluster: submit and return; the job publishes by itself.
        return launch.submit(settings)
    # Before anything is built: no two runs share a folder.
    settings = launch.claim(settings)
    interrupts.on_interrupt(
        lambda signal: runstate.mark_interrupted(settings.output, settings.run_id, signal)
    )
    started = time.monotonic()
    shown = progress.start(settings)  # live progress of a local run (pipeline/progress.py)
    try:
        with beam.Pipeline(options=graph.pipeline_options(settings)) as p:
            graph.build(p, settings)
    except Exception as e:
        shown.stop()  # its last line before the failure's, not after (stop is idempotent)
        refused = refusal_line(e)
        if refused is not None:
            # Stopped on purpose (--max-error-ratio, --max-removed-ratio, a corrupt prior):
            # one line saying what to change, no traceback; exit 2 like any other refusal
            # to go on as asked, so a schedule can tell it from a crash (1). Its folder says
            # so (runs list shows it refused, runs gc deletes it without a grace period).
            try:
                runstate.mark_ended(settings.output, settings.run_id, runstate.REFUSED, refused)
            except Exception as marking:
                logging.debug("cannot mark run %s refused: %s", settings.run_id, marking)
            print(f"chunkmill: run {settings.run_id} failed: {refused}", file=sys.stderr)
            return 2
        # Not a bad document (those are errors/ rows): the run itself broke. Nothing was
        # published, so the next run diffs against what LATEST names now (read now: another
        # run may have published, or gc deleted this run's prior, while this one ran).
        logging.exception("pipeline failed")
        print(
            f"chunkmill: run {settings.run_id} failed before publishing; "
            f"LATEST names {runstate.describe_latest(settings.output)}",
            file=sys.stderr,
        )
        return 1
    finally:
        shown.stop()
    success = FileSystems.join(tables.run_dir(settings.output, settings.run_id), tables.SUCCESS)
    run_report = json.loads(tables.read_text(success))
    print(report.summary(run_report, time.monotonic() - started))
    if settings.inputs == (str(SAMPLE_CORPUS / "**"),):  # the demo: show where to go next
        print(next_steps(settings.output, settings.run_id))
    return 0


def _shell_word(text: str) -> str:
    """``text`` as one shell word, in double quotes when that needs no escaping (easier to
    read than shlex's quoting of the single quotes inside)."""
    return f'"{text}"' if not any(c in text for c in '"$`\\!') else shlex.quote(text)


def next_steps(output: str, run_id: str) -> str:
    """Where a run's tables are and what to type next: printed after a run on the bundled
    sample corpus (``make demo``), a newcomer's first run."""
    chunks = f"{output}/runs/{run_id}/chunks"
    columns = ["source_uri", "token_count", "text"]
    read = f"import pyarrow.parquet as pq; print(pq.read_table({chunks!r}, columns={columns!r}))"
    # DuckDB's Python package (pip install duckdb) has no duckdb command: read it from Python.
    table = f"duckdb.read_parquet('{chunks}/*.parquet')"
    duck = f"import duckdb; {table}.project('source_uri, token_count, text').limit(5).show()"
    out = shlex.quote(output)
    return "\n".join(
        [
            f"tables     {output}/runs/{run_id}/: chunks/ (what to embed), manifest/, "
            "removed/, errors/ (Parquet)",
            f"read them  python -c {_shell_word(read)}",
            f"           python -c {_shell_word(duck)}   # pip install duckdb",
            f"next       chunkmill report --output {out}   # this run as an HTML page",
            f"           chunkmill run --output {out}   # again: nothing changed, nothing to embed",
        ]
    )


def report_run(argv: Sequence[str]) -> int:
    settings = parse_report(argv)
    from chunkmill.pipeline import run_report

    try:
        stats, page = run_report.write_report(settings.output, settings.run_id)
    except Exception:
        # The run published _SUCCESS, so its tables should read; if they do not, say which run.
        logging.exception("report failed")
        print(
            f"chunkmill: cannot report run {settings.run_id} in {settings.output}",
            file=sys.stderr,
        )
        return 1
    print(run_report.terminal_summary(stats, page))
    return 0


def plan(argv: Sequence[str]) -> int:
    settings = parse_plan(argv)
    from chunkmill.pipeline import plan as run_plan
    from chunkmill.transforms import runstate, tables

    try:
        planned = run_plan.make_plan(settings)
    except tables.UnreadableTable as e:  # the prior manifest's footers were proven, not its pages
        raise UsageError(
            f"the prior manifest cannot be read ({e}); restore the file, or "
            f"{runstate.RECOVER_PRIOR}"
        ) from None
    print(run_plan.render(planned, settings))
    return 0


def runs_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import runs

    return runs.command(argv)


def embed_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import embed

    return embed.command(argv)


def export_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import export

    return export.command(argv)


def sync_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import sync

    return sync.command("sync", argv)


def verify_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import sync

    return sync.command("verify", argv)


def query_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import query

    return query.command(argv)


def eval_command(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import eval as evaluation

    return evaluation.command(argv)


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "run": run,
    "plan": plan,
    "report": report_run,
    "runs": runs_command,
    "embed": embed_command,
    "export": export_command,
    "sync": sync_command,
    "verify": verify_command,
    "query": query_command,
    "eval": eval_command,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["--version"]:
            from chunkmill.versions import chunkmill_version

            print(f"chunkmill {chunkmill_version()}")
            return 0
        if not argv or argv[0] in ("-h", "--help"):
            build_parser().parse_args(argv or ["--help"])
        from chunkmill.pipeline import logs

        logs.configure(logs.level_from_argv(argv[1:]))
        from chunkmill import quiet

        quiet.quiet_model_loading()
        command = COMMANDS.get(argv[0])
        if command is None:
            raise UsageError(
                f"unknown command {argv[0]!r}{did_you_mean(argv[0], COMMANDS, COMMAND_CUTOFF)} "
                f"(commands: {', '.join(COMMANDS)})"
            )
        from chunkmill.pipeline import interrupts

        with interrupts.handled(argv[0]):
            return command(argv[1:])
    except UsageError as e:
        print(f"chunkmill: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
