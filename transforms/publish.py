"""Publishing a finished run: the guards that refuse it (``check_*_ratio``,
``replaced_state``), its ``_SUCCESS`` with every table's files, and ``LATEST`` pointed at the
newest finished run (``PublishRun``, once, after every table is written)::

    OUTPUT/runs/RUN_ID/_SUCCESS     JSON run report, written after every table is complete
    OUTPUT/LATEST                   RUN_ID of the last successful run, replaced last

The names of these files and their defensive readers live in ``runstate``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema, stores
from chunkmill.refusal import RunRefused
from chunkmill.transforms import lineage, textstore
from chunkmill.transforms.parquet_io import footer_rows, read_parquet_batches
from chunkmill.transforms.runstate import (
    LATEST,
    RUNS,
    SUCCESS,
    CorruptSuccess,
    read_success,
    run_dir,
    run_order,
    write_text,
)


def check_error_ratio(counts: dict[str, Any], max_ratio: float | None) -> None:
    """Refuses the run (``RunRefused``, one line naming the flag) when more than ``max_ratio``
    of the listed documents failed; ``None`` turns the check off. A bucket full of garbage
    must not look like a good night, nor become the state the next run diffs against."""
    listed, failed = int(counts.get("docs_listed", 0)), int(counts.get("docs_failed", 0))
    if max_ratio is None or listed == 0 or failed / listed <= max_ratio:
        return
    raise RunRefused(
        f"{failed} of {listed} listed documents failed ({failed / listed:.1%}), more than "
        f"--max-error-ratio {max_ratio:g}; the run is not published"
    )


def check_removed_ratio(counts: dict[str, Any], max_ratio: float | None) -> None:
    """Refuses the run (``RunRefused``, one line naming the flag) when it would remove more
    than ``max_ratio`` of the prior manifest's documents (``docs_removed`` and
    ``docs_emptied``, of ``docs_prior``: an emptied document loses its chunks as surely as a
    deleted one, and a mount that serves empty files empties the whole corpus);
    ``None`` turns the check off. (A run without a prior is held to the documents of LATEST's
    run instead: ``check_replaced_ratio``.) A run that
    removes most of the corpus is far more often a broken glob, a missing mount or a lost
    permission than a real deletion, and once published its removals reach every later run."""
    prior_docs = int(counts.get("docs_prior", 0))
    emptied = int(counts.get("docs_emptied", 0))
    removed = int(counts.get("docs_removed", 0)) + emptied
    if max_ratio is None or prior_docs == 0 or removed / prior_docs <= max_ratio:
        return
    of_them = f" ({emptied} of them emptied: listed, but holding no text)" if emptied else ""
    raise RunRefused(
        f"the run removes {removed} of {prior_docs} documents of the prior run{of_them} "
        f"({removed / prior_docs:.1%}), more than --max-removed-ratio {max_ratio:g}; nothing "
        "was published. If this is intended, re-run with --max-removed-ratio 1"
    )


def replaced_state(
    output: str,
    run_id: str,
    report: dict[str, Any],
    written: Sequence[str],
    max_ratio: float | None,
) -> dict[str, Any] | None:
    """What a run that did not diff against ``LATEST``'s run does to the state it replaces:
    ``{"run_id", "docs", "docs_dropped"}``, LATEST's run at launch (``prior.after``), its
    documents and how many of them have no row in this run's manifest (``written``), which a
    consumer of the state would delete. None when there is nothing to compare: the run
    diffed against LATEST's run (``check_removed_ratio`` holds it), no LATEST was named at
    launch, or the check is off (``max_ratio`` None or 1). Reads the doc_id column of both
    manifests, once, in the publishing step: only runs without LATEST as their prior
    (``--prior-manifest none`` or a path) pay it."""
    prior = report.get("prior") or {}
    after = prior.get("after")
    if max_ratio is None or max_ratio >= 1 or after is None or prior.get("run_id") == after:
        return None
    try:
        latest = read_success(FileSystems.join(run_dir(output, after), SUCCESS))
        theirs = _doc_ids(
            [
                FileSystems.join(run_dir(output, after), f["path"])
                for f in latest["tables"]["manifest"]
            ]
        )
    except (OSError, CorruptSuccess, pa.ArrowException) as e:
        raise RunRefused(
            f"the run does not diff against LATEST's run {after}, whose documents it would "
            f"replace, and that run cannot be read to compare ({type(e).__name__}: "
            f"{stores.first_line(str(e))}); nothing was published. Re-run, or re-run with "
            "--max-removed-ratio 1 to publish without comparing"
        ) from None
    prefix = FileSystems.join(run_dir(output, run_id), "manifest") + "/"
    ours = _doc_ids([p for p in written if p.startswith(prefix)])
    dropped = len(theirs) - int(pc.sum(pc.is_in(theirs, value_set=ours)).as_py() or 0)
    return {"run_id": after, "docs": len(theirs), "docs_dropped": dropped}


def _doc_ids(paths: Sequence[str]) -> pa.Array:
    """The distinct doc_ids of manifest files, made distinct a batch at a time: what is held
    is one id per document, not one per chunk."""
    parts: list[pa.Array] = []
    held = distinct = 0
    for batch in read_parquet_batches(paths, ["doc_id"]):
        parts.append(pc.unique(batch["doc_id"]))
        held += len(parts[-1])
        if held > 2 * distinct + 1_000_000:  # merged when the parts hold twice the distinct
            parts = [pc.unique(pa.chunked_array(parts, pa.string()))]
            held = distinct = len(parts[0])
    return pc.unique(pa.chunked_array(parts, pa.string()))


def check_replaced_ratio(
    replaced: dict[str, Any] | None, report: dict[str, Any], max_ratio: float | None
) -> None:
    """Refuses a run that did not diff against LATEST's run (``--prior-manifest none`` or a
    path) when it would drop more than ``max_ratio`` of the documents of LATEST's run
    (``replaced_state``): a run without a prior removes nothing by its own counts, yet once
    LATEST, every document it lacks is gone from the state, and from the index synced to
    it."""
    if replaced is None or max_ratio is None or replaced["docs"] == 0:
        return
    docs, dropped = replaced["docs"], replaced["docs_dropped"]
    if dropped / docs <= max_ratio:
        return
    prior = report.get("prior") or {}
    base = (
        "nothing (--prior-manifest none)"
        if prior.get("mode") == "none"
        else f"--prior-manifest {prior.get('manifest')}"
    )
    raise RunRefused(
        f"the run diffs against {base}, not LATEST's run {replaced['run_id']}, and holds no "
        f"row of {dropped} of its {docs} documents ({dropped / docs:.1%}), more than "
        f"--max-removed-ratio {max_ratio:g}: published, they would be gone from the state and "
        "from every index synced to it; nothing was published. If this is intended, re-run "
        "with --max-removed-ratio 1"
    )


def table_files(base: str, written: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every table's files among ``written`` (paths under the run folder ``base``), sorted,
    each with its row count (from its Parquet footer) and its size in bytes: what
    ``_SUCCESS`` records so that a reader can prove a table whole before trusting it."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in schema.TABLES:
        prefix = FileSystems.join(base, name) + "/"
        paths = sorted(p for p in written if p.startswith(prefix))
        sizes = {}
        if paths:
            for result in FileSystems.match(paths):
                for meta in result.metadata_list:
                    sizes[meta.path] = meta.size_in_bytes
        tables[name] = [
            {"path": p[len(base) + 1 :], "rows": footer_rows(p), "bytes": sizes[p]} for p in paths
        ]
    return tables


@dataclass(frozen=True)
class PublishPolicy:
    """When a finished run is refused instead of published: more than ``max_error_ratio`` of
    its listed documents failed, or it would remove more than ``max_removed_ratio`` of the
    prior's documents, or, when it did not diff against LATEST's run, drop more than that
    share of LATEST's documents (``None``: that check is off)."""

    max_error_ratio: float | None = None
    max_removed_ratio: float | None = None


def publish(
    written: list[str],
    counts: dict[str, Any],
    output: str,
    run_id: str,
    report: dict[str, Any],
    policy: PublishPolicy = PublishPolicy(),
) -> str:
    """Adds the run's new text to the text store and writes its ``_TEXT``
    (``textstore.write_run_text``), writes ``_SUCCESS`` (the run report, with every table's
    files, rows and bytes), then
    points ``LATEST`` at the newest finished run, which is this one unless a run that started
    later has already finished. Idempotent, so a retried bundle republishes the same thing.
    Publishes nothing (``RunRefused``) when ``policy`` refuses the run, and then deletes the
    text files the run wrote for the store (``textstore.discard_run_text``): no index will
    name them."""
    try:
        check_error_ratio(counts, policy.max_error_ratio)
        check_removed_ratio(counts, policy.max_removed_ratio)
        replaced = replaced_state(output, run_id, report, written, policy.max_removed_ratio)
        check_replaced_ratio(replaced, report, policy.max_removed_ratio)
    except RunRefused:
        textstore.discard_run_text(output, run_id, written)
        raise
    base = run_dir(output, run_id)
    full = {**report, "counts": counts, "tables": table_files(base, written)}
    if replaced is not None:
        full["prior"] = {**full["prior"], "replaces": replaced}
    # The run's text joins the store, and its _TEXT names it, before _SUCCESS publishes it.
    textstore.write_run_text(output, run_id, report, written)
    success = FileSystems.join(base, SUCCESS)
    # Written beside and renamed over (a rename is atomic on a local disk; an object store
    # makes an object visible only once whole), so a half-written _SUCCESS is never read.
    staging = f"{success}.tmp"
    write_text(staging, json.dumps(full, indent=2, sort_keys=True) + "\n")
    FileSystems.rename([staging], [success])
    point_latest_at_newest(output, run_id)
    return run_id


# Two runs may finish at the same time (a slow night overlapping the next, a backfill beside
# the schedule). chunkmill does not lock the output prefix: a lock on object storage needs a
# conditional write FileSystems cannot express, and a dead run would hold it. Instead
# publishing is safe under races: LATEST is not "the run that published last" but "the
# newest finished run" (the last of runs/*/_SUCCESS in runstate.run_order), and every
# publisher re-checks after its own write. Whoever writes LATEST last then lists after that
# write, so it sees every _SUCCESS written before it and repairs LATEST if a newer run
# exists; a run that finishes later publishes later. So a stale run can never leave LATEST
# naming an older run than one already finished (tests/unit/test_publish.py).
# A round repeats only when a newer run published meanwhile; the bound stops a publisher
# from chasing an endless stream of them (the last of those fixes LATEST itself).
_PUBLISH_ROUNDS = 10


def finished_runs(output: str) -> list[tuple[str, str]]:
    """``(started_at, run_id)`` of every run under ``output`` whose ``_SUCCESS`` is valid
    (``runstate.read_success``), oldest first (``runstate.run_order``: by their chain, so a
    run comes after every run it descends from, whatever the clocks said): the candidates
    for ``LATEST``."""
    pattern = FileSystems.join(output, RUNS, "*", SUCCESS)
    runs = []
    for meta in FileSystems.match([pattern])[0].metadata_list:
        run_id = meta.path.rstrip("/").split("/")[-2]
        try:
            report = read_success(meta.path)
        except CorruptSuccess:
            # Damaged, or another publisher is writing it (a local file appears before its
            # content). Skipping is safe: that publisher lists again after its own write.
            continue
        started_at = str(report["started_at"])
        runs.append((run_order(started_at, run_id, lineage.chain_block(report)), started_at))
    return [(started_at, order[-1]) for order, started_at in sorted(runs)]


def point_latest_at_newest(output: str, run_id: str) -> str:
    """Makes ``LATEST`` name the newest finished run (which may not be ``run_id``); returns
    the run it names."""
    latest = FileSystems.join(output, LATEST)
    for _ in range(_PUBLISH_ROUNDS):
        newest = finished_runs(output)[-1][1]
        # Written beside and renamed over, so a reader never sees a half-written LATEST.
        staging = f"{latest}.{run_id}.tmp"
        write_text(staging, newest + "\n")
        FileSystems.rename([staging], [latest])
        if finished_runs(output)[-1][1] == newest:
            break
    if newest != run_id:
        logging.getLogger(__name__).warning(
            "run %s finished after the newer run %s; LATEST keeps naming %s", run_id, newest, newest
        )
    return newest


class PublishRun(beam.PTransform):
    """Publishes the run once every table is written: ``"written"`` is one element, the
    list of every written file (``sinks.WriteTables``), and the counts (one dict) wait as a
    side input. Publishing joins the step that named the files, in one fused stage."""

    def __init__(
        self,
        output: str,
        run_id: str,
        report: dict[str, Any],
        policy: PublishPolicy = PublishPolicy(),
    ) -> None:
        super().__init__()
        self._output, self._run_id, self._report = output, run_id, report
        self._policy = policy

    def expand(self, inputs: dict[str, beam.PCollection]) -> beam.PCollection:
        return inputs["written"] | "WriteSuccessAndLatest" >> beam.Map(
            publish,
            counts=beam.pvalue.AsSingleton(inputs["counts"]),
            output=self._output,
            run_id=self._run_id,
            report=self._report,
            policy=self._policy,
        )
