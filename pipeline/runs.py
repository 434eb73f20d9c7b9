"""``chunkmill runs list`` and ``chunkmill runs gc``: the runs under an output prefix, and
deleting old ones. Everything goes through Beam's FileSystems, so gs:// works like a path.

What "in progress" means. A run folder without ``_SUCCESS`` is either a job still running
or one that died; storage alone cannot tell them apart, and a running job may write nothing
for hours (tables are written at the end, after extraction). So ``gc`` never deletes an
unfinished run unless told ``--grace-hours H``, and then only one whose newest file is
older than H hours: choose H well above your longest run (a dead run costs storage only;
deleting a live one loses that night). A finished run that is newer than LATEST (it is
publishing right now) is never deleted, nor is the run LATEST names (the next run diffs
against it). Nor is the prior of a run in flight: each run's ``_CLAIM``, written when it
was launched, names the run it diffs against, and that run is kept while the claimant is
unfinished and within ``--grace-hours``; so is the run LATEST named at its launch, which a
run without a prior run compares its documents with when it publishes.

A run that ended unpublished says so: a refused run (a guard such as --max-removed-ratio
stopped it) holds ``_REFUSED``, an interrupted one (SIGINT, SIGTERM) ``_INTERRUPTED``.
``runs list`` shows them as such, and ``gc`` deletes them without waiting for
``--grace-hours``. A run's claim names the host and process that launched it (a local run's
runs it; a remote run's builds and submits its job): whatever the grace period, ``gc`` never
deletes a run whose launching process is alive on the host ``gc`` runs on.

The text of the current state is in the text store (``transforms.textstore``,
docs/text-store.md), which ``gc`` compacts: it rewrites LATEST's live text into new files
when much of the store is dead text or its files are many, then deletes every file of the
store that no run's ``_TEXT`` names (``textstore.sweep``), so old runs go without their text.
Only when LATEST has no ``_TEXT`` (a run of an older release, or one whose prior was a
manifest from elsewhere) is a finished run kept whose chunks/ holds the only copy of the
text of a chunk LATEST's manifest lists (``keep_live_text``).

A ``_SUCCESS`` that does not parse as a run report (truncated, damaged) does not make a run
finished: it is listed as ``corrupt _SUCCESS`` and treated as unfinished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from chunkmill.pipeline.options import UsageError
from chunkmill.transforms import lineage, parquet_io, runstate, textstore

# The lease of the runs gc at work on an output (chunkmill.transforms.lease).
GC_LEASE = "_GC"


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    finished: bool
    started_at: str | None  # from _SUCCESS; None while unfinished
    counts: dict[str, Any] | None
    last_write: float  # newest file's modification time, seconds since the epoch
    files: int
    prior: str | None = None  # unfinished: the run it diffs against, from its claim
    # Unfinished: the run LATEST named at its launch, from its claim; without a prior run the
    # run compares its documents with that run's when it publishes (publish.replaced_state).
    after: str | None = None
    corrupt: str | None = None  # what is wrong with its _SUCCESS, if it has a damaged one
    tables: dict[str, list[dict[str, Any]]] | None = None  # finished: its tables' files
    chain: dict[str, Any] | None = None  # finished: its place in its chain (lineage)
    # Unfinished: "refused" or "interrupted" when its folder holds that marker
    # (runstate.REFUSED, runstate.INTERRUPTED): it ended, and will never publish.
    ended: str | None = None
    # Unfinished: its process is alive on this host (from its claim, or its marker's writer
    # still ending): never deleted.
    running: bool = False

    @property
    def state(self) -> str:
        """``published`` (a valid ``_SUCCESS``), ``refused``, ``interrupted``, ``corrupt
        _SUCCESS`` or ``unfinished``."""
        if self.finished:
            return "published"
        return self.ended or ("corrupt _SUCCESS" if self.corrupt else "unfinished")

    @property
    def order(self) -> tuple[str, int, str, str]:
        """The order LATEST follows (transforms.publish.finished_runs): by chain, then clock."""
        return runstate.run_order(self.started_at, self.run_id, self.chain)


def list_runs(output: str) -> list[RunInfo]:
    """Every run folder under ``output``: finished ones by start, then unfinished ones
    (including those with a damaged ``_SUCCESS``) by last write."""
    pattern = FileSystems.join(output, runstate.RUNS, "**")
    files = FileSystems.match([pattern])[0].metadata_list
    root = FileSystems.join(output, runstate.RUNS) + "/"
    by_run: dict[str, list[Any]] = {}
    for meta in files:
        if meta.path.startswith(root):
            run_id = meta.path[len(root) :].split("/", 1)[0]
            by_run.setdefault(run_id, []).append(meta)
    runs = []
    for run_id, metas in by_run.items():
        success = [m for m in metas if m.path == FileSystems.join(root + run_id, runstate.SUCCESS)]
        report: dict[str, Any] = {}
        corrupt = None
        if success:
            try:
                report = runstate.read_success(success[0].path)
            except runstate.CorruptSuccess as e:  # damaged, or being written right now
                corrupt = str(e)
        finished = bool(report)
        claim = None if finished else runstate.read_claim(output, run_id)
        names = frozenset(m.path[len(root + run_id) + 1 :] for m in metas)
        marker = None if finished else runstate.ended_marker(output, run_id, names)
        running = False
        if not finished:
            writer = runstate.read_marker(output, run_id, marker) if marker else {}
            running = runstate.process_alive(
                claim.host if claim else None, claim.pid if claim else None
            ) or runstate.process_alive(writer.get("host"), writer.get("pid"))
        runs.append(
            RunInfo(
                run_id=run_id,
                finished=finished,
                started_at=report.get("started_at"),
                counts=report.get("counts"),
                last_write=max(m.last_updated_in_seconds for m in metas),
                files=len(metas),
                prior=claim.prior_run_under(output) if claim else None,
                after=claim.after if claim else None,
                corrupt=corrupt,
                tables=report.get("tables"),
                chain=lineage.chain_block(report),
                ended=marker.lstrip("_").lower() if marker else None,
                running=running,
            )
        )
    return sorted((r for r in runs if r.finished), key=lambda r: r.order) + sorted(
        (r for r in runs if not r.finished), key=lambda r: r.last_write
    )


@dataclass(frozen=True)
class Decision:
    run: RunInfo
    delete: bool
    reason: str


def plan_gc(
    runs: Sequence[RunInfo],
    latest: str | None,
    *,
    keep: int,
    grace_hours: float | None,
    now: float,
) -> list[Decision]:
    """What ``gc`` does with each run: keeps LATEST, the ``keep`` newest other finished runs,
    finished runs newer than LATEST, the prior of every unfinished run that is not past the
    grace period (it is in flight and will read that prior), and unfinished runs unless
    ``grace_hours`` is given and they wrote nothing for that long. Pure, so the policy is
    tested without storage."""
    finished = sorted((r for r in runs if r.finished), key=lambda r: r.order, reverse=True)
    newest = {r.run_id for r in [r for r in finished if r.run_id != latest][:keep]}
    latest_order = next((r.order for r in finished if r.run_id == latest), None)

    def idle_hours(run: RunInfo) -> float:
        return (now - run.last_write) / 3600

    def dead(run: RunInfo) -> bool:
        if run.running:
            return False
        return run.ended is not None or grace_hours is not None and idle_hours(run) > grace_hours

    in_flight = [r for r in runs if not r.finished and not dead(r)]
    in_flight_prior = {
        r.after: f"LATEST at the launch of the unfinished run {r.run_id}"
        for r in in_flight
        if r.after
    }
    in_flight_prior |= {
        r.prior: f"prior of the unfinished run {r.run_id}" for r in in_flight if r.prior
    }
    decisions = []
    for run in runs:
        if run.run_id == latest:
            decisions.append(Decision(run, False, "LATEST"))
        elif run.run_id in in_flight_prior:
            decisions.append(Decision(run, False, in_flight_prior[run.run_id]))
        elif run.finished and run.run_id in newest:
            decisions.append(Decision(run, False, f"one of the {keep} newest besides LATEST"))
        elif run.finished and (latest_order is None or run.order > latest_order):
            decisions.append(Decision(run, False, "finished after LATEST (publishing)"))
        elif run.finished:
            decisions.append(
                Decision(run, True, f"finished, older than the {keep} kept besides LATEST")
            )
        elif run.running:
            decisions.append(Decision(run, False, "running: its process is alive on this host"))
        elif run.ended is not None:
            decisions.append(Decision(run, True, f"{run.ended}: it will never publish"))
        else:
            idle = idle_hours(run)
            if dead(run):
                decisions.append(
                    Decision(run, True, f"unfinished, nothing written for {idle:.1f} h")
                )
            else:
                hint = "" if grace_hours is not None else "; --grace-hours H deletes dead ones"
                decisions.append(
                    Decision(run, False, f"unfinished, last write {idle:.1f} h ago{hint}")
                )
    return decisions


class LiveStateUnreadable(Exception):
    """LATEST's manifest cannot be read, so which chunk texts are live cannot be told."""


def keep_live_text(
    output: str, decisions: Sequence[Decision], latest: str | None
) -> list[Decision]:
    """``decisions`` with every finished run they delete whose chunks/ holds the only copy of
    a live chunk's text kept instead. A run's chunks/ holds the text of the hashes new in
    that run only, so the text of the current state is spread over the runs that first
    chunked each hash; a hash LATEST's manifest lists is live, and its text must outlive
    ``gc`` (re-embedding with another model needs it). A run whose chunks/ cannot be read is
    kept too: nothing is deleted that is not shown to be dead. Raises
    ``LiveStateUnreadable`` when LATEST's manifest cannot be read."""
    runs = {d.run.run_id: d.run for d in decisions}
    if latest is None or latest not in runs:
        return list(decisions)
    try:
        live = _hashes(output, runs[latest], "manifest")
    except parquet_io.UnreadableTable as e:
        raise LiveStateUnreadable(f"LATEST's manifest cannot be read: {e}") from None
    for d in decisions:  # texts that a kept run holds anyway
        if not d.delete and d.run.finished and len(live):
            with contextlib.suppress(parquet_io.UnreadableTable):
                live = live.filter(pc.invert(pc.is_in(live, _hashes(output, d.run, "chunks"))))
    kept: dict[str, Decision] = {}
    candidates = [d for d in decisions if d.delete and d.run.finished]
    for d in sorted(candidates, key=lambda d: d.run.order, reverse=True):
        if not len(live):
            break
        try:
            held = pc.is_in(live, _hashes(output, d.run, "chunks"))
        except parquet_io.UnreadableTable as e:
            kept[d.run.run_id] = Decision(d.run, False, f"its chunks/ cannot be read: {e}")
            continue
        count = pc.sum(held).as_py() or 0
        if count:
            reason = f"holds the only text of {count} of LATEST's chunks"
            kept[d.run.run_id] = Decision(d.run, False, reason)
            live = live.filter(pc.invert(held))
    return [kept.get(d.run.run_id, d) for d in decisions]


def _hashes(output: str, run: RunInfo, table: str) -> pa.Array:
    """The distinct chunk hashes of one table of a finished run."""
    base = runstate.run_dir(output, run.run_id)
    paths = [FileSystems.join(base, f["path"]) for f in (run.tables or {}).get(table, [])]
    parts = [b["chunk_hash"] for b in parquet_io.read_parquet_batches(paths, ["chunk_hash"])]
    chunks = [c for part in parts for c in part.chunks]
    return pc.unique(pa.chunked_array(chunks, pa.string()))


@dataclass(frozen=True)
class StateFiles:
    """Where the state a finished run published lies: its manifest's files, and the files
    that hold the text of its hashes: those its ``_TEXT`` names (``from_store``; they also
    hold dead text, which no manifest row asks for), else the chunks/ files of the runs up
    to it, newest first (a current chunk's text is in the run that first chunked its
    hash)."""

    run_id: str
    manifest: list[str]
    chunks: list[str]
    from_store: bool = False


def state_files(output: str, run_id: str | None) -> StateFiles:
    """The ``StateFiles`` of ``run_id`` (default: LATEST's); ``UsageError`` in one line when
    there is no such finished run or its ``_TEXT`` is damaged."""
    if run_id is None:
        try:
            run_id = runstate.read_latest(output)
        except runstate.BadLatest as e:
            raise UsageError(str(e)) from None
        if run_id is None:
            raise UsageError(f"no finished run in {output}: run chunkmill run first")
    runs = {r.run_id: r for r in list_runs(output) if r.finished}
    if run_id not in runs:
        raise UsageError(f"--run {run_id}: no finished run of that id in {output}")
    run = runs[run_id]

    def files(r: RunInfo, table: str) -> list[str]:
        base = runstate.run_dir(output, r.run_id)
        return [FileSystems.join(base, f["path"]) for f in (r.tables or {}).get(table, [])]

    try:
        index = textstore.read_index(output, run_id)
    except textstore.CorruptIndex as e:
        raise UsageError(f"run {run_id}'s {textstore.INDEX} is damaged ({e})") from None
    if index is not None:
        return StateFiles(run_id, files(run, "manifest"), index.paths(output), from_store=True)
    older = sorted((r for r in runs.values() if r.order <= run.order), key=lambda r: r.order)
    chunks = [path for r in reversed(older) for path in files(r, "chunks")]
    return StateFiles(run_id, files(run, "manifest"), chunks)


def delete_run(output: str, run_id: str) -> None:
    path = runstate.run_dir(output, run_id)
    # Object stores delete a whole prefix when the path ends in "/"; the local file system
    # deletes a directory tree when given the directory itself (with "/" it globs "*",
    # which matches only the files directly inside).
    FileSystems.delete([path + "/" if "://" in path else path])


def format_list(
    runs: Sequence[RunInfo], latest: str | None, *, now: float, bad_latest: str | None = None
) -> str:
    """The table ``runs list`` prints; ``bad_latest`` (why LATEST names no run) is its last
    line when given."""
    header = ("RUN", "STATE", "STARTED_AT", "LISTED", "PROCESSED", "TO_EMBED", "REMOVED", "FAILED")
    rows: list[tuple[str, ...]] = [header]
    for r in runs:
        c = r.counts or {}
        keys = ("docs_listed", "docs_processed", "chunks_to_embed", "chunks_removed", "docs_failed")
        idle = f"{(now - r.last_write) / 3600:.1f} h idle"
        state = r.state if r.finished else f"{r.state} ({'running' if r.running else idle})"
        started = r.started_at or "-"
        rows.append((r.run_id, state, started, *(str(c.get(k, "-")) for k in keys)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row, run in zip(rows, [None, *runs], strict=True):
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        if run is not None and run.run_id == latest:
            line += "  <- LATEST"
        lines.append(line)
    if latest is not None and latest not in {r.run_id for r in runs}:
        lines.append(f"LATEST names {latest!r}, which is not under runs/")
    if bad_latest is not None:
        lines.append(bad_latest)
    return "\n".join(lines)
