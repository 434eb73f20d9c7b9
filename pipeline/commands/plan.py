"""``chunkmill plan``: what ``run`` would do with the same flags (``chunkmill.pipeline.plan``
compares, ``chunkmill.pipeline.estimate`` prices), before it runs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from chunkmill.pipeline.commands import run
from chunkmill.pipeline.options import Parser, RunSettings, UsageError


def build_parser() -> Parser:
    plan = Parser(
        prog="chunkmill plan", description="Takes the flags of `run`.", allow_abbrev=False
    )
    # The same flags as `run` (so `run` can become `plan` on any command line), kept in step.
    for action in run.build_parser()._actions:
        if "-h" not in action.option_strings:
            plan._add_action(action)
    return plan


def parse(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse ``chunkmill plan`` arguments: the flags of ``run``, validated the same way,
    touching no storage."""
    build_parser().parse_known_args(list(argv))  # for `plan --help`
    return run.parse(argv, now=now)


def main(argv: Sequence[str]) -> int:
    settings = parse(argv)
    from chunkmill.pipeline import plan as run_plan
    from chunkmill.pipeline import preflight
    from chunkmill.transforms import parquet_io, runstate

    settings = preflight.check_run(settings)
    try:
        planned = run_plan.make_plan(settings)
    except (
        parquet_io.UnreadableTable
    ) as e:  # the prior manifest's footers were proven, not its pages
        raise UsageError(
            f"the prior manifest cannot be read ({e}); restore the file, or "
            f"{runstate.RECOVER_PRIOR}"
        ) from None
    print(run_plan.render(planned, settings))
    return 0
