"""Which run comes after which: runs are ordered by their chain, not by wall clocks.

A run's predecessor is the run it diffed against (``_SUCCESS["prior"]["run_id"]``) or,
when it diffed against nothing (``--prior-manifest none``), the run ``LATEST`` named when it
was launched (``_SUCCESS["prior"]["after"]``). Following predecessors from a run walks back
through every state it was built on; a run is newer than every run on that walk, whatever
the clocks of the machines that launched them said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from apache_beam.io.filesystems import FileSystems

from chunkmill.transforms import runstate

# A walk longer than this is a loop in damaged reports, or a chain nobody keeps: it ends.
MAX_WALK = 100_000


def predecessor(report: dict[str, Any]) -> str | None:
    """The run that run report ``report`` (a parsed ``_SUCCESS``) came after, or None for the
    first run of a chain."""
    prior = report.get("prior")
    if not isinstance(prior, dict):
        return None
    for key in ("run_id", "after"):
        value = prior.get(key)
        if isinstance(value, str) and runstate.is_run_id(value):
            return value
    return None


def read_report(output: str, run_id: str) -> dict[str, Any] | None:
    """The parsed ``_SUCCESS`` of ``run_id``, or None when it is missing or damaged."""
    path = FileSystems.join(runstate.run_dir(output, run_id), runstate.SUCCESS)
    try:
        return runstate.read_success(path)
    except Exception:
        return None


Reports = Callable[[str], "dict[str, Any] | None"]


def walk(output: str, run_id: str, reports: Reports | None = None) -> Iterator[str]:
    """``run_id``, then its predecessor, and so on back, while each run's report can be read
    (a run deleted by ``runs gc`` or by hand ends the walk)."""
    read = reports or (lambda run: read_report(output, run))
    seen: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in seen and len(seen) < MAX_WALK:
        yield current
        seen.add(current)
        report = read(current)
        current = None if report is None else predecessor(report)


def descends_from(output: str, run_id: str, ancestor: str, reports: Reports | None = None) -> bool:
    """Whether ``ancestor`` is ``run_id`` or lies on its walk back (so ``run_id`` holds a
    state built on ``ancestor``'s)."""
    return any(run == ancestor for run in walk(output, run_id, reports))


# ---------------------------------------------------------------------------------------------
# A run's place in its chain, recorded in its report so that the order survives ``runs gc``
# deleting the runs between two kept ones.

CHAIN = "chain"


def chain_block(report: dict[str, Any]) -> dict[str, Any] | None:
    """The ``chain`` block of run report ``report`` when it is well formed, else None (a run
    of an older release, or damage): ``{"latest_start": the latest started_at on the run's
    walk back (its own included), "length": how many runs that walk holds before it}``."""
    block = report.get(CHAIN)
    if not isinstance(block, dict):
        return None
    latest, length = block.get("latest_start"), block.get("length")
    if not isinstance(latest, str) or type(length) is not int or length < 0:
        return None
    return {"latest_start": latest, "length": length}


def chain_after(
    output: str, after: str | None, started_at: str, reports: Reports | None = None
) -> dict[str, Any]:
    """The ``chain`` block of a run started at ``started_at`` after run ``after`` (None: the
    first of its chain). Read at launch, while ``after``'s report is sure to be there; a run
    before it whose report lacks the block (an older release) is walked through."""
    latest, length = runstate.start_order(started_at), 0
    if after is not None:
        read = reports or (lambda run: read_report(output, run))
        before = _chain_of(after, read)
        if before is not None:
            latest = max(latest, before["latest_start"])
            length = before["length"] + 1
    return {"latest_start": latest, "length": length}


def _chain_of(run_id: str, read: Reports) -> dict[str, Any] | None:
    """The chain block of finished run ``run_id``: recorded, or folded forward from the
    nearest run back whose report records one (or from the first run of the walk)."""
    reports: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in seen and len(seen) < MAX_WALK:
        seen.add(current)
        report = read(current)
        if report is None:
            break
        reports.append(report)
        if chain_block(report) is not None:
            break
        current = predecessor(report)
    if not reports:
        return None
    block = chain_block(reports[-1])
    if block is None:
        block = {"latest_start": runstate.start_order(reports[-1].get("started_at")), "length": 0}
    for report in reversed(reports[:-1]):
        own = runstate.start_order(report.get("started_at"))
        block = {"latest_start": max(block["latest_start"], own), "length": block["length"] + 1}
    return block
