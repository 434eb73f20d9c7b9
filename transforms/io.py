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
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import schema
from transforms.parquet_batches import RowsToArrowTables
from transforms.types import SourceFile, source_version

SUCCESS = "_SUCCESS"
LATEST = "LATEST"
RUNS = "runs"


def run_dir(output: str, run_id: str) -> str:
    return FileSystems.join(output, RUNS, run_id)


def table_dir(output: str, run_id: str, table: str) -> str:
    return FileSystems.join(run_dir(output, run_id), table)


def _listed(m: Any) -> tuple[str, tuple[int, str]]:
    size = int(m.size_in_bytes)
    return m.path, (size, source_version(size, m.last_updated_in_seconds) or "")


class ListFiles(beam.PTransform):
    """Glob patterns → ``PCollection[SourceFile]``, one per object, redistributed.

    An object matched by two patterns is listed once; objects under ``exclude_prefix`` (the
    output location, when a pattern covers it) are not listed. The ``Reshuffle`` breaks fusion
    with the cheap listing so the expensive per-document work fans out across workers.
    """

    def __init__(self, patterns: Sequence[str], *, exclude_prefix: str | None = None) -> None:
        super().__init__()
        if not patterns:
            raise ValueError("ListFiles needs at least one pattern")
        self._patterns = list(patterns)
        self._exclude = exclude_prefix.rstrip("/") + "/" if exclude_prefix else None

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        exclude = self._exclude
        return (
            pbegin
            | "Patterns" >> beam.Create(self._patterns)
            | "Match" >> fileio.MatchAll()
            | "Keep" >> beam.Filter(lambda m: not (exclude and m.path.startswith(exclude)))
            | "KeyByUri" >> beam.Map(_listed)
            # Two patterns matching one object give the same metadata; max only makes the
            # choice independent of order if a store answered differently.
            | "OncePerUri" >> beam.CombinePerKey(max)
            | "ToSourceFile"
            >> beam.MapTuple(lambda uri, meta: SourceFile(uri, meta[0], meta[1] or None))
            | "Redistribute" >> beam.Reshuffle()
        )


class ReadManifest(beam.PTransform):
    """The prior run's manifest rows (dicts); an empty PCollection when ``pattern`` is None."""

    def __init__(self, pattern: str | None) -> None:
        super().__init__()
        self._pattern = pattern

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if self._pattern is None:
            return pbegin | "NoPriorManifest" >> beam.Create([])
        return pbegin | "ReadParquet" >> beam.io.ReadFromParquet(
            self._pattern, columns=list(schema.MANIFEST_FIELDS)
        )


class WriteTables(beam.PTransform):
    """Writes each table of ``ChunkCorpus``'s output under the run's prefix; returns the
    written file names (one PCollection, all tables)."""

    def __init__(self, output: str, run_id: str) -> None:
        super().__init__()
        self._output = output
        self._run_id = run_id

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection:
        written = []
        for name, table_schema in schema.TABLES.items():
            # Rows become Arrow tables in batches (RowsToArrowTables: the same files as
            # WriteToParquet, converted natively instead of field by field in Python).
            written.append(
                tables[name]
                | f"ToArrow{name.title()}" >> beam.ParDo(RowsToArrowTables(table_schema))
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


def publish(
    _: Any,
    counts: dict[str, Any],
    written: list[str],
    output: str,
    run_id: str,
    report: dict[str, Any],
) -> str:
    """Writes ``_SUCCESS`` (the run report), then replaces ``LATEST``. Idempotent, so a
    retried bundle republishes the same thing."""
    base = run_dir(output, run_id)
    tables = {
        name: sorted(
            p[len(base) + 1 :] for p in written if p.startswith(FileSystems.join(base, name) + "/")
        )
        for name in schema.TABLES
    }
    full = {**report, "counts": counts, "tables": tables}
    write_text(FileSystems.join(base, SUCCESS), json.dumps(full, indent=2, sort_keys=True) + "\n")
    # Written beside and renamed over, so a reader never sees a half-written LATEST.
    latest = FileSystems.join(output, LATEST)
    staging = f"{latest}.{run_id}.tmp"
    write_text(staging, run_id + "\n")
    FileSystems.rename([staging], [latest])
    return run_id


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
