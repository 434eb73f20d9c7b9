"""The edges: listing sources, reading the prior manifest, writing the run's tables and
publishing the run. Everything goes through Beam's FileSystems, so local paths and gs://
behave the same.

Layout of one run (DESIGN.md, output contract)::

    OUTPUT/runs/RUN_ID/{chunks,manifest,removed,errors}/part-*.parquet
    OUTPUT/runs/RUN_ID/_SUCCESS     JSON run report, written after every table is complete
    OUTPUT/LATEST                   RUN_ID of the last successful run, replaced last
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import prior, schema, storage
from transforms.types import PriorError

SUCCESS = "_SUCCESS"
LATEST = "LATEST"
RUNS = "runs"


def run_dir(output: str, run_id: str) -> str:
    return FileSystems.join(output, RUNS, run_id)


def table_dir(output: str, run_id: str, table: str) -> str:
    return FileSystems.join(run_dir(output, run_id), table)


class ListFiles(beam.PTransform):
    """Glob patterns → ``PCollection[SourceFile]``, one per object a pattern matches.

    Objects under ``exclude_prefix`` (the output location, when a pattern covers it) are not
    listed, nor are directory markers. Listing is sharded by prefix
    (``transforms.storage.plan``) and the shards redistributed, so a large bucket is listed
    by many workers. ``billing_project`` is the project billed for requester-pays buckets.

    Not de-duplicated and not redistributed: an object two patterns match comes twice, and
    the consumer groups by document next. ``ChunkCorpus``'s join by doc_id keeps one listing
    of each object and spreads the documents across workers, so the expensive per-document
    work fans out, without two more shuffles of every listed object here.
    """

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        exclude_prefix: str | None = None,
        billing_project: str | None = None,
    ) -> None:
        super().__init__()
        if not patterns:
            raise ValueError("ListFiles needs at least one pattern")
        self._patterns = list(patterns)
        self._exclude = exclude_prefix.rstrip("/") + "/" if exclude_prefix else None
        self._billing_project = billing_project

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        exclude = self._exclude
        return (
            pbegin
            | "Patterns" >> beam.Create(self._patterns)
            | "Shard" >> beam.FlatMap(storage.plan, billing_project=self._billing_project)
            | "SpreadShards" >> beam.Reshuffle()
            | "ListShard" >> beam.FlatMap(storage.list_shard)
            | "Keep" >> beam.Filter(lambda f: not (exclude and f.uri.startswith(exclude)))
        )


class ReadManifest(beam.PTransform):
    """The parts of the prior run's manifest (``PriorPart``: one row group of one file),
    redistributed so workers read them in parallel; an empty PCollection when ``pattern`` is
    None. The rows themselves are read by ``ChunkCorpus`` (``transforms.prior``)."""

    def __init__(self, pattern: str | None) -> None:
        super().__init__()
        self._pattern = pattern

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if self._pattern is None:
            return pbegin | "NoPriorManifest" >> beam.Create([])
        return (
            pbegin
            | "Pattern" >> beam.Create([self._pattern])
            | "ListParts" >> beam.FlatMap(prior.list_parts)
            | "SpreadParts" >> beam.Reshuffle()
        )


def prior_errors(path: str) -> Iterator[tuple[str, PriorError]]:
    """``(doc_id, PriorError)`` for every row of one errors/ file of a prior run. Columns a
    file written before they existed lacks are null (such a failure is always tried again).
    A file that cannot be read costs the memory of its failures, never the run: its
    documents are tried again."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            parquet = pq.ParquetFile(f)
            present = set(parquet.schema_arrow.names)
            table = parquet.read(
                columns=[c for c in ("doc_id", *PriorError._fields) if c in present]
            )
    except Exception as e:
        logging.getLogger(__name__).warning(
            "prior errors file %s is unreadable (%s: %s); its documents are tried again",
            path,
            type(e).__name__,
            storage.first_line(str(e)),
        )
        return
    columns = {
        name: table[name].to_pylist() if name in present else None for name in PriorError._fields
    }
    for i, doc in enumerate(table["doc_id"].to_pylist()):
        yield doc, PriorError._make(None if col is None else col[i] for col in columns.values())


class ReadPriorErrors(beam.PTransform):
    """The prior run's errors/ rows as ``(doc_id, PriorError)``, one per failed document,
    read from ``paths`` (its errors files; none on a first run, or when every failure is to
    be tried again). Joined with the listing by doc_id like the prior manifest's summaries:
    a failed document not worth trying again is not read (``document.known_failure``)."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__()
        self._paths = sorted(paths)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if not self._paths:
            return pbegin | "NoPriorErrors" >> beam.Create([])
        return (
            pbegin
            | "ErrorFiles" >> beam.Create(self._paths)
            | "SpreadErrorFiles" >> beam.Reshuffle()
            | "ReadErrorFiles" >> beam.FlatMap(prior_errors)
        )


def error_files_of_run(run_folder: str) -> tuple[str, ...]:
    """The errors/ files of a finished run, as its ``_SUCCESS`` lists them (the files that
    make the table, nothing a half-written retry left beside them); none when the folder
    holds no finished run."""
    success = FileSystems.join(run_folder, SUCCESS)
    try:
        if not FileSystems.exists(success):
            return ()
        listed = json.loads(read_text(success)).get("tables", {}).get("errors", [])
    except ValueError:
        return ()
    return tuple(FileSystems.join(run_folder, name) for name in sorted(listed))


class WriteTables(beam.PTransform):
    """Writes each table of ``ChunkCorpus``'s output (``pa.Table`` elements) under the run's
    prefix; returns the written file names (one PCollection, all tables)."""

    def __init__(self, output: str, run_id: str) -> None:
        super().__init__()
        self._output = output
        self._run_id = run_id

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection:
        written = []
        for name, table_schema in schema.TABLES.items():
            # Each element is an Arrow table of ``table_schema``: one row group.
            written.append(
                tables[name]
                | f"Write{name.title()}"
                >> beam.io.WriteToParquetBatched(
                    FileSystems.join(table_dir(self._output, self._run_id, name), "part"),
                    table_schema,
                    file_name_suffix=".parquet",
                )
            )
        return tuple(written) | "AllWritten" >> beam.Flatten()


def write_text(path: str, text: str) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(text.encode("utf-8"))


def read_text(path: str) -> str:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read().decode("utf-8")


class ErrorRatioExceeded(RuntimeError):
    """Too many listed documents failed (``--max-error-ratio``): the run is not published."""


def check_error_ratio(counts: dict[str, Any], max_ratio: float | None) -> None:
    """Raises ``ErrorRatioExceeded`` (one line naming the flag) when more than ``max_ratio``
    of the listed documents failed; ``None`` turns the check off. A bucket full of garbage
    must not look like a good night, nor become the state the next run diffs against."""
    listed, failed = int(counts.get("docs_listed", 0)), int(counts.get("docs_failed", 0))
    if max_ratio is None or listed == 0 or failed / listed <= max_ratio:
        return
    raise ErrorRatioExceeded(
        f"{failed} of {listed} listed documents failed ({failed / listed:.1%}), more than "
        f"--max-error-ratio {max_ratio:g}; the run is not published"
    )


_ERROR_RATIO_LINE = re.compile(r"\d+ of \d+ listed documents failed .*?; the run is not published")


def error_ratio_line(e: BaseException) -> str | None:
    """The one-line message of an ``ErrorRatioExceeded`` that failed the pipeline, or
    ``None``. Runners re-raise a DoFn's exception as its own type or as a RuntimeError with
    its text inside, so the text is what is searched."""
    match = _ERROR_RATIO_LINE.search(str(e))
    return match.group(0) if match else None


def publish(
    _: Any,
    counts: dict[str, Any],
    written: list[str],
    output: str,
    run_id: str,
    report: dict[str, Any],
) -> str:
    """Writes ``_SUCCESS`` (the run report), then points ``LATEST`` at the newest finished
    run, which is this one unless a run that started later has already finished. Idempotent,
    so a retried bundle republishes the same thing. Publishes nothing when the share of failed
    documents is over ``report["limits"]["max_error_ratio"]`` (see ``check_error_ratio``)."""
    check_error_ratio(counts, report.get("limits", {}).get("max_error_ratio"))
    base = run_dir(output, run_id)
    tables = {
        name: sorted(
            p[len(base) + 1 :] for p in written if p.startswith(FileSystems.join(base, name) + "/")
        )
        for name in schema.TABLES
    }
    full = {**report, "counts": counts, "tables": tables}
    write_text(FileSystems.join(base, SUCCESS), json.dumps(full, indent=2, sort_keys=True) + "\n")
    point_latest_at_newest(output, run_id)
    return run_id


# Two runs may finish at the same time (a slow night overlapping the next, a backfill beside
# the schedule). chunkmill does not lock the output prefix: a lock on object storage needs a
# conditional write FileSystems cannot express, and a dead run would hold it. Instead
# publishing is safe under races: LATEST is not "the run that published last" but "the
# newest finished run" (largest (started_at, run_id) among runs/*/_SUCCESS), and every
# publisher re-checks after its own write. Whoever writes LATEST last then lists after that
# write, so it sees every _SUCCESS written before it and repairs LATEST if a newer run
# exists; a run that finishes later publishes later. So a stale run can never leave LATEST
# naming an older run than one already finished (tests/unit/test_publish.py).
# A round repeats only when a newer run published meanwhile; the bound stops a publisher
# from chasing an endless stream of them (the last of those fixes LATEST itself).
_PUBLISH_ROUNDS = 10


def finished_runs(output: str) -> list[tuple[str, str]]:
    """``(started_at, run_id)`` of every run under ``output`` that has ``_SUCCESS``, oldest
    first."""
    pattern = FileSystems.join(output, RUNS, "*", SUCCESS)
    runs = []
    for meta in FileSystems.match([pattern])[0].metadata_list:
        run_id = meta.path.rstrip("/").split("/")[-2]
        try:
            started_at = json.loads(read_text(meta.path)).get("started_at", "")
        except ValueError:
            # Another publisher is writing it (a local file appears before its content).
            # Skipping is safe: that publisher lists again after its own write.
            continue
        runs.append((started_at, run_id))
    return sorted(runs)


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
    """Runs once, after every table is written (the side inputs make it wait)."""

    def __init__(self, output: str, run_id: str, report: dict[str, Any]) -> None:
        super().__init__()
        self._output, self._run_id, self._report = output, run_id, report

    def expand(self, inputs: dict[str, beam.PCollection]) -> beam.PCollection:
        return (
            inputs["counts"].pipeline
            | "Once" >> beam.Create([None])
            | "WriteSuccessAndLatest"
            >> beam.Map(
                publish,
                counts=beam.pvalue.AsSingleton(inputs["counts"]),
                written=beam.pvalue.AsList(inputs["written"]),
                output=self._output,
                run_id=self._run_id,
                report=self._report,
            )
        )


# Rows per batch when chunkmill reads its own tables outside Beam (report, plan): enough to
# amortise Arrow's per-batch cost, small enough that a table of any size streams.
PARQUET_BATCH_ROWS = 64 * 1024


def read_parquet_batches(
    paths: Sequence[str], columns: Sequence[str], *, batch_rows: int | None = None
) -> Iterator[pa.Table]:
    """The given columns of Parquet files, ``batch_rows`` rows at a time (default
    ``PARQUET_BATCH_ROWS``), through FileSystems (local, gs://, s3://), so no table has to fit
    in memory."""
    batch_rows = batch_rows or PARQUET_BATCH_ROWS
    for path in paths:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for batch in pq.ParquetFile(f).iter_batches(
                batch_size=batch_rows, columns=list(columns)
            ):
                yield pa.Table.from_batches([batch])
