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
