"""Writing a run's tables (``WriteTables``): a file per bundle in a temporary folder of the
run, then every file named ``TABLE/part-SSSSS-of-NNNNN.parquet`` in one step::

    OUTPUT/runs/RUN_ID/{chunks,manifest,removed,errors,added,retired}/part-*.parquet

Rows decided in bulk upstream (the prior manifest's kept and removed rows, the run's own
manifest, chunks/ and added/ rows, and the text of chunks/ for the text store) are written
into the same temporary folder where they are decided (``TableFiles``), and only the files'
names reach the naming step: on the local engine, whatever crosses a stage boundary is held
in memory whole, and Beam estimates the size of an Arrow table by pickling it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from chunkmill import schema, stores
from chunkmill.transforms import textstore
from chunkmill.transforms.parquet_batches import (
    ROW_GROUP_BUFFER_BYTES,
    TEXT_ROW_GROUP_BYTES,
    TableGatherer,
)
from chunkmill.transforms.parquet_io import TableFile
from chunkmill.transforms.runstate import run_dir, table_dir


class WriteTables(beam.PTransform):
    """Writes each table of ``ChunkCorpus``'s output (``pa.Table`` elements, one row group
    each) under the run's prefix; returns one element: the list of every written file's
    name, all tables. ``"table_files"``, when given, are ``(table, path)`` of files already
    written under ``temp`` (``TableFiles``): they are named with the rest.

    A DoFn per table writes a file per bundle in a temporary folder of the run, and one
    step after them names the files ``TABLE/part-SSSSS-of-NNNNN.parquet`` and removes the
    temporary folder: a few transforms where a Beam file sink per table costs a dozen each,
    which shows in the fixed cost of every run. The naming step reads the files' names as
    side inputs, so it starts once every file is written, in a fused stage of its own that
    what follows (publishing the run) joins; a grouping of the names would cost three
    stages more. A table with no rows gets one empty file, so every table of a run can be
    read. Pages carry CRC32 checksums, verified on every read. Files of the text store's
    rows (``textstore.TEXT``) are named ``text/RUN_ID/part-SSSSS-of-NNNNN.parquet``
    (``textstore.run_folder``), none when none.
    """

    def __init__(self, output: str, run_id: str, temp: str | None = None) -> None:
        super().__init__()
        self._output = output
        self._run_id = run_id
        self._temp = temp

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection[list[str]]:
        temp = self._temp or temp_folder(self._output, self._run_id)
        final = {name: table_dir(self._output, self._run_id, name) for name in schema.TABLES}
        final[textstore.TEXT] = textstore.run_folder(self._output, self._run_id)
        written = [
            tables[name] | f"Write{name.title()}Files" >> beam.ParDo(_WriteTableFiles(name, temp))
            for name in schema.TABLES
        ]
        if "table_files" in tables:
            written.append(tables["table_files"])
        return (
            tables["errors"].pipeline
            | "Once" >> beam.Create([None])
            | "NameFiles"
            >> beam.Map(_name_all, *map(beam.pvalue.AsList, written), temp=temp, final=final)
        )


def _name_all(
    _: None, *written: list[tuple[str, str]], temp: str, final: dict[str, str]
) -> list[str]:
    """Every table's files named (``name_table_files``): their final names."""
    return list(name_table_files([f for files in written for f in files], temp=temp, final=final))


def temp_folder(output: str, run_id: str) -> str:
    """A new temporary folder of the run: files written there before the tables are named
    (``WriteTables``), removed with everything left in it when they are."""
    return FileSystems.join(run_dir(output, run_id), f".temp-{uuid.uuid4().hex}")


def temp_table_path(temp: str, name: str) -> str:
    """A new file of table ``name`` under ``temp``: a new name for every bundle attempt, so a
    retried bundle never writes over, nor names, a file of an earlier attempt."""
    return FileSystems.join(temp, f"{name}-{uuid.uuid4().hex}.parquet")


class TableFiles:
    """Rows of a run's tables written where a DoFn decides them, for ``WriteTables`` to name:
    per table, one file per bundle under ``temp`` (``temp_table_path``), in row groups
    gathered up to ``row_group_bytes`` of Arrow buffers (at most ``TEXT_ROW_GROUP_BYTES``
    for chunks/, which holds the text). ``close()`` gives the ``(table, path)`` of each file,
    what the DoFn yields when its bundle ends. A bundle that fails leaves its files unnamed
    in ``temp``, removed with it (``name_table_files``): only a committed attempt's names
    reach the naming step, as with ``WriteTables``' own files.

    Rows that are those of two tables (``write(..., also=...)``: on a first run every
    manifest row is an added one) are written once: while a bundle's every row of the one
    is a row of the other, the second table's file is the first's, named again
    (``same_file``); once one of them gets rows of its own, the file so far is closed and
    named for both, and each gets its own from there.

    With ``text``, each file of chunks/ is also the text store's file of its rows, table
    ``textstore.TEXT``, which ``WriteTables`` names under the text store's folder of the run
    for its publishing step (``textstore.write_run_text``): the same bytes, not written
    twice; the store reads its columns of it (``textstore.TEXT_SCHEMA``)."""

    def __init__(
        self, temp: str, *, row_group_bytes: int = ROW_GROUP_BUFFER_BYTES, text: bool = False
    ) -> None:
        self._temp = temp
        self._group_bytes = row_group_bytes
        self._text = text
        self._files: dict[str, TableFile] = {}
        self._gathered: dict[str, TableGatherer] = {}
        self._closed: list[tuple[str, str]] = []
        # table → the table whose rows its file holds too, so far; the tables given rows.
        self._shared: dict[str, str] = {}
        self._given: set[str] = set()

    def write(self, name: str, table: pa.Table, *, also: str | None = None) -> None:
        """``table`` (``schema.TABLES[name]``) into the bundle's file of ``name``; with
        ``also``, its rows are that table's too (of the same columns)."""
        if not table.num_rows:
            return
        if also is not None and (self._shared.get(name) == also or not self._given & {name, also}):
            self._shared[name] = also
            self._given |= {name, also}
            self._add(name, table)
            return
        for source, target in list(self._shared.items()):
            if name in (source, target) or also in (source, target):
                self._part_ways(source)
        for each in (name,) if also is None else (name, also):
            self._given.add(each)
            self._add(each, table)

    def close(self) -> list[tuple[str, str]]:
        """Writes what is held, closes every file; returns ``(table, path)`` of each."""
        for source in list(self._shared):
            self._part_ways(source)
        for name in list(self._files) + list(self._gathered):
            self._close(name)
        self._given = set()
        written, self._closed = self._closed, []
        if self._text:
            for name, path in list(written):
                if name == "chunks":
                    text = temp_table_path(self._temp, textstore.TEXT)
                    same_file(path, text)
                    written.append((textstore.TEXT, text))
        return written

    def _add(self, name: str, table: pa.Table) -> None:
        gathered = self._gathered.get(name)
        if gathered is None:
            size = TEXT_ROW_GROUP_BYTES if name == "chunks" else self._group_bytes
            gathered = self._gathered[name] = TableGatherer(min(size, self._group_bytes))
        for ready in gathered.add(table):
            self._file(name).write(ready)

    def _close(self, name: str) -> str | None:
        """Writes what ``name`` holds and closes its file; its path, None when it has none."""
        gathered = self._gathered.pop(name, None)
        if gathered:
            self._file(name).write(gathered.take())
        file = self._files.pop(name, None)
        if file is None:
            return None
        file.close()
        self._closed.append((name, file.path))
        return file.path

    def _part_ways(self, source: str) -> None:
        """The file of ``source`` so far, closed, is also that of the table it shares it
        with; from here each table has its own."""
        target = self._shared.pop(source)
        path = self._close(source)
        if path is not None:
            shared = temp_table_path(self._temp, target)
            same_file(path, shared)
            self._closed.append((target, shared))

    def _file(self, name: str) -> TableFile:
        file = self._files.get(name)
        if file is None:
            file = TableFile(temp_table_path(self._temp, name), schema.TABLES[name])
            self._files[name] = file
        return file


def same_file(source: str, target: str) -> None:
    """``target`` holds the bytes of the written file ``source``: on local disk a second
    name of it (a hard link; a copy where the disk has none), elsewhere a copy the store
    makes (no bytes through this process). Neither file is written again: a table's files
    are written once and only renamed or deleted after."""
    local, local_target = stores.local_path(source), stores.local_path(target)
    if local is not None and local_target is not None:
        try:
            os.link(local, local_target)
        except OSError:
            shutil.copyfile(local, local_target)
        return
    FileSystems.copy([source], [target])


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
            self._file = TableFile(temp_table_path(self._temp, self._name), self._schema)
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
    path. Safe to retry: a file already moved is not moved again. The text of the run's
    chunks/ rows (``textstore.TEXT``, when ``final`` names a folder for it) is named the same
    way in the text store's folder of the run, without an empty file when there is none."""
    by_table: dict[str, list[str]] = {name: [] for name in final}
    for name, path in files:
        by_table[name].append(path)
    for name, paths in by_table.items():
        if not paths and name not in schema.TABLES:
            continue
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
