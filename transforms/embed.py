"""Embedding the chunks a run needs: Beam's RunInference over the texts of the hashes that
the store does not hold yet, the vectors written whole into the store (``embedstore``).

``EmbedTexts`` takes ``(chunk_hash, text)`` pairs (each hash once) and writes their vectors:
a file per bundle in a temporary folder, then one step that moves the files of the bundles
that committed into the store and removes the folder. A retried bundle's file is never moved,
and a crash before the move leaves the store as it was, so no hash is stored twice for one
key by a retry or a re-run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, PredictionResult
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from chunkmill import embedding
from chunkmill.transforms import embedstore, tables


class SentenceTransformerHandler(ModelHandler[str, PredictionResult, Any]):
    """RunInference's handler for a sentence-transformers folder: Beam batches the texts
    (up to ``batch_size``), shares one loaded model per worker, and the model runs on a
    GPU where torch sees one."""

    def __init__(self, path: str, batch_size: int = 64, device: str | None = None) -> None:
        super().__init__()
        self._path = path
        self._batch_size = batch_size
        self._device = device

    def load_model(self) -> Any:
        from pathlib import Path

        return embedding.load(Path(self._path), self._device)

    def run_inference(
        self,
        batch: Sequence[str],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[PredictionResult]:
        vectors = model.encode(list(batch), batch_size=len(batch), convert_to_numpy=True)
        return [PredictionResult(t, v) for t, v in zip(batch, vectors, strict=True)]

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return {"min_batch_size": 1, "max_batch_size": self._batch_size}

    def share_model_across_processes(self) -> bool:
        return False


def texts_of(path: str, needed: pa.Array) -> Iterator[tuple[str, str]]:
    """``(chunk_hash, text embedded)`` of the rows of one chunks/ file whose hash is in
    ``needed``: the text with its context where the run added one (the hash is of that)."""
    columns = ["chunk_hash", "text", "text_with_context"]
    for batch in tables.read_parquet_batches([path], columns):
        batch = batch.filter(pc.is_in(batch["chunk_hash"], value_set=needed))
        embedded = pc.coalesce(batch["text_with_context"], batch["text"])
        yield from zip(batch["chunk_hash"].to_pylist(), embedded.to_pylist(), strict=True)


def _first(element: tuple[str, Iterable[str]]) -> tuple[str, str]:
    chunk_hash, texts = element
    return chunk_hash, next(iter(texts))  # the same text wherever it is: it has this hash


class _WriteVectorFiles(beam.DoFn):
    """Writes the vectors of a bundle to one file under ``temp``; yields its path when the
    bundle ends."""

    def __init__(self, temp: str, dimension: int) -> None:
        self._temp = temp
        self._schema = embedstore.vector_schema(dimension)
        self._dimension = dimension

    def start_bundle(self) -> None:
        self._hashes: list[str] = []
        self._vectors: list[np.ndarray] = []

    def process(self, element: tuple[str, PredictionResult]) -> None:
        chunk_hash, result = element
        self._hashes.append(chunk_hash)
        self._vectors.append(np.asarray(result.inference, dtype=np.float32))

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if not self._hashes:
            return
        flat = pa.array(np.concatenate(self._vectors), pa.float32())
        vectors = pa.FixedSizeListArray.from_arrays(flat, self._dimension)
        table = pa.table([pa.array(self._hashes, pa.string()), vectors], schema=self._schema)
        path = FileSystems.join(self._temp, f"{uuid.uuid4().hex}.parquet")
        file = tables.TableFile(path, self._schema)
        file.write(table)
        file.close()
        self._hashes, self._vectors = [], []
        yield GlobalWindows.windowed_value(path)


def store_vector_files(paths: list[str], *, temp: str, output: str, key: str, run_id: str):
    """Moves the committed bundles' files into the store as ``part-RUN_ID-NNNNN.parquet``
    and removes the temporary folder; yields the number of files moved."""
    paths = sorted(p for p in paths if FileSystems.exists(p))
    batch = uuid.uuid4().hex[:8]  # a later embed of the same run never overwrites these
    targets = [
        FileSystems.join(embedstore.store_dir(output, key), embedstore.part_name(run_id, batch, i))
        for i in range(len(paths))
    ]
    if paths:
        FileSystems.rename(paths, targets)
    if FileSystems.exists(temp):
        FileSystems.delete([temp])
    yield len(paths)


class EmbedTexts(beam.PTransform):
    """``(chunk_hash, text)`` pairs (each hash once) → their vectors in the store of
    ``model`` under ``output``; returns one element: how many files it stored."""

    def __init__(
        self, output: str, model: embedding.Model, run_id: str, batch_size: int = 64
    ) -> None:
        super().__init__()
        self._output = output
        self._model = model
        self._run_id = run_id
        self._batch_size = batch_size

    def expand(self, texts: beam.PCollection) -> beam.PCollection:
        from apache_beam.ml.inference.base import RunInference

        key = self._model.key
        temp = FileSystems.join(
            embedstore.store_dir(self._output, key), f".temp-{uuid.uuid4().hex}"
        )
        handler = SentenceTransformerHandler(str(self._model.path), self._batch_size)
        return (
            texts
            | "Embed" >> RunInference(KeyedModelHandler(handler))
            | "WriteVectorFiles" >> beam.ParDo(_WriteVectorFiles(temp, self._model.dimension))
            | "Together" >> beam.combiners.ToList()
            | "StoreVectorFiles"
            >> beam.FlatMap(
                store_vector_files, temp=temp, output=self._output, key=key, run_id=self._run_id
            )
        )


class ReadTextsToEmbed(beam.PTransform):
    """The start of the pipeline: ``(chunk_hash, text)`` of every hash of ``needed`` found in
    the chunks/ files ``paths``, each hash once."""

    def __init__(self, paths: Sequence[str], needed: pa.Array) -> None:
        super().__init__()
        self._paths = list(paths)
        self._needed = needed

    def expand(self, begin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            begin
            | "ChunksFiles" >> beam.Create(self._paths)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadTexts" >> beam.FlatMap(texts_of, self._needed)
            | "ByHash" >> beam.GroupByKey()
            | "OnePerHash" >> beam.Map(_first)
        )
