"""``chunkmill runs list`` and ``chunkmill runs gc``: the runs under an output prefix, and
deleting old ones (what is kept and why: ``chunkmill.pipeline.runs``)."""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chunkmill.pipeline.options import (
    DEFAULT_OUTPUT,
    Parser,
    UsageError,
    absolute,
    location,
    non_negative_float,
    non_negative_int,
)

if TYPE_CHECKING:
    from chunkmill.pipeline.runs import RunInfo


@dataclass(frozen=True)
class RunsSettings:
    command: str  # "list" | "gc"
    output: str
    keep: int = 0
    grace_hours: float | None = None
    dry_run: bool = False


def build_parser() -> Parser:
    runs = Parser(prog="chunkmill runs", allow_abbrev=False)
    runs_sub = runs.add_subparsers(dest="runs_command", required=True, parser_class=Parser)
    listing = runs_sub.add_parser(
        "list", help="every run: finished or not, started_at, counts, LATEST", allow_abbrev=False
    )
    listing.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    gc = runs_sub.add_parser(
        "gc",
        help="delete old runs: keeps LATEST and the N newest finished runs",
        description="Never deletes LATEST or a run that may be in progress: a run without "
        "_SUCCESS is kept unless --grace-hours is given and it wrote nothing for that long.",
        allow_abbrev=False,
    )
    gc.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    gc.add_argument(
        "--keep", type=non_negative_int, required=True, metavar="N",
        help="finished runs to keep besides LATEST (the N newest)",
    )  # fmt: skip
    gc.add_argument(
        "--grace-hours", type=non_negative_float, metavar="H",
        help="also delete unfinished runs whose newest file is older than H hours, 0 "
        "included (default: never delete an unfinished run; refused and interrupted runs "
        "are deleted anyway, a run whose process is alive on this host never)",
    )  # fmt: skip
    gc.add_argument("--dry-run", action="store_true", help="print what would be deleted")
    return runs


def parse(argv: Sequence[str]) -> RunsSettings:
    """Parse ``chunkmill runs list|gc`` arguments (without the ``runs`` word)."""
    args = build_parser().parse_args(list(argv))
    output = absolute(args.output).rstrip("/") or "/"
    if args.runs_command == "list":
        return RunsSettings(command="list", output=output)
    return RunsSettings(
        command="gc",
        output=output,
        keep=args.keep,
        grace_hours=args.grace_hours,
        dry_run=args.dry_run,
    )


def main(argv: Sequence[str]) -> int:
    settings = parse(argv)
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.pipeline.runs import GC_LEASE, format_list, list_runs
    from chunkmill.transforms import lease, runstate

    now = time.time()
    # LATEST first, then the runs and their claims: a run launched meanwhile names as its
    # prior this LATEST (kept) or a newer one, whose claim the listing then sees.
    try:
        latest, bad_latest = runstate.read_latest(settings.output), None
    except runstate.BadLatest as e:
        latest, bad_latest = None, str(e)
    runs = list_runs(settings.output)
    if settings.command == "list":
        if not runs:
            print(f"no runs in {settings.output}")
            if bad_latest:
                print(bad_latest)
            return 0
        print(format_list(runs, latest, now=now, bad_latest=bad_latest))
        return 0
    if bad_latest:  # which runs gc keeps depends on LATEST: nothing is deleted on a guess
        raise UsageError(bad_latest)
    if settings.dry_run:
        return _gc(settings, latest, runs, now)
    # One gc at a time: another's sweep would delete the files this one's compaction wrote
    # before LATEST's index names them.
    path = FileSystems.join(settings.output, GC_LEASE)
    try:
        held = lease.take(path, command="runs gc")
    except lease.Held as e:
        raise UsageError(
            f"another runs gc is running on {settings.output} ({e.who()}, lease {path}); wait "
            f"for it to end (a lease not renewed for {lease.LEASE_SECONDS // 60} minutes is "
            "taken over), or delete that file if that gc is no longer running"
        ) from None
    with lease.holding(held, name="gc-lease"):
        return _gc(settings, latest, runs, now)


def _gc(settings: RunsSettings, latest: str | None, runs: list[RunInfo], now: float) -> int:
    """``runs gc`` once LATEST is read and, unless a dry run, under the gc lease."""
    from chunkmill.pipeline.runs import LiveStateUnreadable, delete_run, keep_live_text, plan_gc
    from chunkmill.transforms import textstore

    decisions = plan_gc(runs, latest, keep=settings.keep, grace_hours=settings.grace_hours, now=now)
    try:
        index = textstore.read_index(settings.output, latest) if latest else None
    except (textstore.CorruptIndex, OSError) as e:
        print(
            f"chunkmill: runs gc deletes nothing: LATEST's {textstore.INDEX}: {e}", file=sys.stderr
        )
        return 1
    if index is None:  # LATEST's text is spread over the runs' chunks/
        try:
            decisions = keep_live_text(settings.output, decisions, latest)
        except LiveStateUnreadable as e:
            print(f"chunkmill: runs gc deletes nothing: {e}", file=sys.stderr)
            return 1
    elif textstore.needs_compaction(index) and latest is not None:
        why = textstore.needs_compaction(index)
        if settings.dry_run:
            print(f"would compact the text of {latest} ({why})")
        else:
            try:
                done = textstore.compact(settings.output, latest, index)
            except Exception as e:
                print(
                    f"chunkmill: runs gc deletes nothing: compacting the text of {latest} "
                    f"failed: {e}",
                    file=sys.stderr,
                )
                return 1
            print(
                f"compacted the text of {latest} ({why}): {done.live} texts in "
                f"{len(done.files)} files"
            )
    verb = "would delete" if settings.dry_run else "deleted"
    for d in decisions:
        if d.delete and not settings.dry_run:
            try:
                delete_run(settings.output, d.run.run_id)
            except Exception as e:
                print(f"chunkmill: cannot delete run {d.run.run_id}: {e}", file=sys.stderr)
                return 1
        print(f"{verb if d.delete else 'kept'}  {d.run.run_id}  ({d.reason})")
    deleted = sum(d.delete for d in decisions)
    going = [d.run.run_id for d in decisions if d.delete]
    swept = textstore.sweep(settings.output, deleting=going, dry_run=settings.dry_run)
    if swept.deleted:
        print(f"{verb} {len(swept.deleted)} files of the text store that no run names")
    stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{verb} {deleted} of {len(decisions)} runs in {settings.output} at {stamp}")
    return 0
