"""Writing a run's tables (``WriteTables``): a file per bundle in a temporary folder of the
run, then every file named ``TABLE/part-SSSSS-of-NNNNN.parquet`` in one step::

    OUTPUT/runs/RUN_ID/{chunks,manifest,removed,errors,added,retired}/part-*.parquet
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from chunkmill import schema
from chunkmill.transforms.parquet_io import TableFile
from chunkmill.transforms.runstate import run_dir, table_dir


class WriteTables(beam.PTransform):
    """Writes each table of ``ChunkCorpus``'s output (``pa.Table`` elements, one row group
    each) under the run's prefix; returns the written file names (one PCollection, all
    tables).

    A DoFn per table writes a file per bundle in a temporary folder of the run, and one
    step after them names the files ``TABLE/part-SSSSS-of-NNNNN.parquet`` and removes the
    temporary folder: a few transforms where a Beam file sink per table costs a dozen each,
    which shows in the fixed cost of every run. A table with no rows gets one empty file,
    so every table of a run can be read. Pages carry CRC32 checksums, verified on every read.
    """

    def __init__(self, output: str, run_id: str, temp: str | None = None) -> None:
        super().__init__()
        self._output = output
        self._run_id = run_id
        self._temp = temp

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection:
        temp = self._temp or temp_folder(self._output, self._run_id)
        final = {name: table_dir(self._output, self._run_id, name) for name in schema.TABLES}
        written = [
            tables[name] | f"Write{name.title()}Files" >> beam.ParDo(_WriteTableFiles(name, temp))
            for name in schema.TABLES
        ]
        return (
            tuple(written)
            | "AllFiles" >> beam.Flatten()
            | "Together" >> beam.combiners.ToList()
            | "NameFiles" >> beam.FlatMap(name_table_files, temp=temp, final=final)
        )


def temp_folder(output: str, run_id: str) -> str:
    """A new temporary folder of the run: files written there before the tables are named
    (``WriteTables``), removed with everything left in it when they are."""
    return FileSystems.join(run_dir(output, run_id), f".temp-{uuid.uuid4().hex}")


class _WriteTableFiles(beam.DoFn):
    """Writes the Arrow tables of a bundle of table ``name`` to one file under ``temp``;
    yields ``(name, temporary path)`` when the bundle ends. A retried bundle's file is never
    named: only the committed attempt's output reaches ``name_table_files``."""

    def __init__(self, name: str, temp: str) -> None:
        self._name = name
        self._schema = schema.TABLES[name]
        self._temp = temp

    def start_bundle(self) -> None:
        self._file: TableFile | None = None

    def process(self, table: pa.Table) -> None:
        if self._file is None:
            path = FileSystems.join(self._temp, f"{self._name}-{uuid.uuid4().hex}.parquet")
            self._file = TableFile(path, self._schema)
        self._file.write(table)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._file is not None:
            self._file.close()
            yield GlobalWindows.windowed_value((self._name, self._file.path))
        self._file = None


def name_table_files(
    files: list[tuple[str, str]], *, temp: str, final: dict[str, str]
) -> Iterator[str]:
    """Moves each table's temporary files to ``TABLE/part-SSSSS-of-NNNNN.parquet`` (in
    temporary-name order), writes one empty file for a table that has none, removes the
    temporary folder with whatever else is in it (staged occurrences) and yields every final
    path. Safe to retry: a file already moved is not moved again."""
    by_table: dict[str, list[str]] = {name: [] for name in final}
    for name, path in files:
        by_table[name].append(path)
    for name, paths in by_table.items():
        if not paths:
            empty = FileSystems.join(final[name], "part-00000-of-00001.parquet")
            if not FileSystems.exists(empty):
                TableFile(empty, schema.TABLES[name]).close()
            yield empty
            continue
        paths.sort()
        targets = [
            FileSystems.join(final[name], f"part-{i:05d}-of-{len(paths):05d}.parquet")
            for i in range(len(paths))
        ]
        moving = [(s, t) for s, t in zip(paths, targets, strict=True) if FileSystems.exists(s)]
        if moving and not FileSystems.exists(final[name]):
            FileSystems.mkdirs(final[name])  # a local folder; nothing on object stores
        if moving:
            FileSystems.rename([s for s, _ in moving], [t for _, t in moving])
        yield from targets
    # Object stores have no folders: what is left is deleted by name.
    (left,) = FileSystems.match([FileSystems.join(temp, "*")])
    if left.metadata_list:
        FileSystems.delete([m.path for m in left.metadata_list])
    if FileSystems.exists(temp):
        FileSystems.delete([temp])
