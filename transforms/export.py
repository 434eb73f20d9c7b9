"""The whole current state with its text: every occurrence of a run's manifest joined with
the text of its hash, from the chunks/ tables of the runs that first chunked each hash.

The join is by hash bucket, in Arrow: the manifest's rows and the texts are cut by
``prior.hash_bucket`` and grouped, so neither side is held whole anywhere. The rows come out
as ``schema.CHUNKS`` (the occurrence columns, ``text`` and ``text_with_context``), written a
file per bundle into a temporary folder; one step after them moves the files into place.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from chunkmill import schema
from chunkmill.transforms import parquet_io, prior

_ROWS, _TEXTS = 0, 1
_TEXT_COLUMNS = pa.schema(
    [
        pa.field("chunk_hash", pa.string()),
        pa.field("text", pa.large_string()),
        pa.field("text_with_context", pa.large_string()),
    ]
)
_OCCURRENCE = pa.schema([schema.CHUNKS.field(n) for n in schema.OCCURRENCE_FIELDS])


def _manifest_by_bucket(path: str) -> Iterator[tuple[str, tuple[int, bytes]]]:
    for batch in parquet_io.read_parquet_batches([path], schema.OCCURRENCE_FIELDS):
        rows = prior.as_table(batch, _OCCURRENCE)
        for bucket, payload in prior.by_bucket(rows):
            yield bucket, (_ROWS, payload)


def _texts_by_bucket(path: str) -> Iterator[tuple[str, tuple[int, bytes]]]:
    for batch in parquet_io.read_parquet_batches([path], _TEXT_COLUMNS.names):
        texts = batch.cast(_TEXT_COLUMNS)
        for bucket, payload in prior.by_bucket(texts):
            yield bucket, (_TEXTS, payload)


def join_bucket(element: tuple[str, Iterable[tuple[int, bytes]]]) -> Iterator[pa.Table]:
    """A bucket's manifest rows with their hash's text (``schema.CHUNKS``). A hash's text is
    the same in every chunks/ table that holds it: the first found is taken."""
    _, values = element
    rows, texts = [], []
    for tag, payload in values:
        if tag == _ROWS:
            rows.append(prior.from_ipc(payload, _OCCURRENCE))
        else:
            texts.append(prior.from_ipc(payload, _TEXT_COLUMNS))
    if not rows:
        return
    occurrences = pa.Table.from_batches(rows, schema=_OCCURRENCE)
    text = pa.Table.from_batches(texts, schema=_TEXT_COLUMNS)
    first = pc.index_in(occurrences["chunk_hash"], value_set=text["chunk_hash"])
    if pc.any(pc.is_null(first)).as_py():
        missing = pc.sum(pc.is_null(first)).as_py()
        raise ValueError(f"{missing} chunks of the manifest have no text in any chunks/ table")
    joined = {name: occurrences[name] for name in schema.OCCURRENCE_FIELDS}
    joined["text"] = pc.take(text["text"], first)
    joined["text_with_context"] = pc.take(text["text_with_context"], first)
    yield pa.table(joined, schema=schema.CHUNKS)


class _WriteFiles(beam.DoFn):
    """The tables of a bundle into one file under ``temp``; yields its path at the end."""

    def __init__(self, temp: str) -> None:
        self._temp = temp

    def start_bundle(self) -> None:
        self._file: parquet_io.TableFile | None = None

    def process(self, table: pa.Table) -> None:
        if self._file is None:
            path = FileSystems.join(self._temp, f"{uuid.uuid4().hex}.parquet")
            self._file = parquet_io.TableFile(path, schema.CHUNKS)
        self._file.write(table)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._file is not None:
            self._file.close()
            yield GlobalWindows.windowed_value(self._file.path)
        self._file = None


def place_files(paths: list[str], *, temp: str, destination: str, prefix: str) -> Iterator[str]:
    """Moves the committed bundles' files to ``DESTINATION/PREFIX-NNNNN-of-MMMMM.parquet``
    (one empty file when there is no row), removes ``temp``; yields the final paths."""
    paths = sorted(p for p in paths if FileSystems.exists(p))
    if not paths:
        empty = FileSystems.join(destination, f"{prefix}-00000-of-00001.parquet")
        parquet_io.TableFile(empty, schema.CHUNKS).close()
        yield empty
    else:
        n = len(paths)
        targets = [
            FileSystems.join(destination, f"{prefix}-{i:05d}-of-{n:05d}.parquet") for i in range(n)
        ]
        FileSystems.rename(paths, targets)
        yield from targets
    if FileSystems.exists(temp):
        FileSystems.delete([temp])


class ExportState(beam.PTransform):
    """Writes the rows of ``manifest_files`` with their text (from ``chunks_files``) under
    ``destination``; returns the PCollection of the files written."""

    def __init__(
        self,
        manifest_files: Sequence[str],
        chunks_files: Sequence[str],
        destination: str,
        prefix: str,
    ) -> None:
        super().__init__()
        self._manifest = list(manifest_files)
        self._chunks = list(chunks_files)
        self._destination = destination
        self._prefix = prefix

    def expand(self, begin: beam.pvalue.PBegin) -> beam.PCollection:
        temp = FileSystems.join(self._destination, f".temp-{uuid.uuid4().hex}")
        manifest = (
            begin
            | "ManifestFiles" >> beam.Create(self._manifest)
            | "SpreadManifest" >> beam.Reshuffle()
            | "ManifestByBucket" >> beam.FlatMap(_manifest_by_bucket)
        )
        texts = (
            begin
            | "ChunksFiles" >> beam.Create(self._chunks)
            | "SpreadChunks" >> beam.Reshuffle()
            | "TextsByBucket" >> beam.FlatMap(_texts_by_bucket)
        )
        return (
            (manifest, texts)
            | "Flatten" >> beam.Flatten()
            | "ByBucket" >> beam.GroupByKey()
            | "Join" >> beam.FlatMap(join_bucket)
            | "WriteFiles" >> beam.ParDo(_WriteFiles(temp))
            | "Together" >> beam.combiners.ToList()
            | "PlaceFiles"
            >> beam.FlatMap(
                place_files, temp=temp, destination=self._destination, prefix=self._prefix
            )
        )
