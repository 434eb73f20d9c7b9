"""Embedding the chunks a run needs: the texts of the hashes that the store does not hold yet,
encoded by one model per worker process (Beam's ``Shared``), the vectors committed to the
store as they are made (``embedstore``).

``EmbedTexts`` takes ``(chunk_hash, text)`` pairs and the sorted list of the hashes to embed.
The hashes are cut into groups of ``texts_per_file`` before the pipeline starts (``Groups``):
a group is embedded in length-sorted batches of at most ``batch_size`` texts and
``max_batch_tokens`` padded tokens (``chunkmill.backends``) and written as one file of the
store, whole, as soon as it is done. A killed job keeps every group it finished, and a
retried bundle writes its groups again under the same names (``embedstore.write_vectors``),
so no hash is stored twice for one key by a retry or a re-run.

Not RunInference: importing ``apache_beam.ml.inference`` imports torch and scipy (Beam's
model manager), seconds and hundreds of MB that an ONNX or OpenVINO backend never uses
(docs/embedding-backends.md, "Fixed costs"); a group is already a batch, so what RunInference
adds here is its model sharing, which ``Shared`` gives.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.utils import shared

from chunkmill import embedding
from chunkmill.transforms import embedstore, parquet_io


class EncodeGroups(beam.DoFn):
    """``((hashes...), [texts...])`` → ``((hashes...), vectors)``: the model as its backend
    runs it (``embedding.load_encoder``), loaded once per worker process and shared by its
    threads, encodes a group in length-sorted batches of at most ``batch_size`` texts and
    ``max_batch_tokens`` padded tokens; torch compiled when ``compiled``."""

    def __init__(
        self,
        model: embedding.Model,
        batch_size: int = 64,
        device: str = "cpu",
        max_batch_tokens: int | None = None,
        compiled: bool = False,
    ) -> None:
        self._model = model
        self._batch_size = batch_size
        self._device = device
        self._max_batch_tokens = max_batch_tokens
        self._compiled = compiled
        self._shared = shared.Shared()
        self._encoder: Any = None

    def _load(self) -> Any:
        return embedding.load_encoder(
            self._model, self._device, self._max_batch_tokens, self._compiled
        )

    def setup(self) -> None:
        tag = f"{self._model.key}/{self._device}/{self._max_batch_tokens}/{self._compiled}"
        self._encoder = self._shared.acquire(self._load, tag=tag)

    def process(
        self, element: tuple[tuple[str, ...], list[str]]
    ) -> Iterator[tuple[tuple[str, ...], np.ndarray]]:
        hashes, texts = element
        yield hashes, self._encoder.encode(texts, batch_size=self._batch_size)


def texts_of(path: str, needed: pa.Array) -> Iterator[tuple[str, str]]:
    """``(chunk_hash, text embedded)`` of the rows of one chunks/ file whose hash is in
    ``needed``: the text with its context where the run added one (the hash is of that)."""
    columns = ["chunk_hash", "text", "text_with_context"]
    for batch in parquet_io.read_parquet_batches([path], columns):
        batch = batch.filter(pc.is_in(batch["chunk_hash"], value_set=needed))
        embedded = pc.coalesce(batch["text_with_context"], batch["text"])
        yield from zip(batch["chunk_hash"].to_pylist(), embedded.to_pylist(), strict=True)


class Groups:
    """The hashes to embed cut into groups of ``size`` in sorted order, known by the last
    hash of each group: which group a hash is in is fixed before the pipeline starts, so a
    retried bundle meets the same groups."""

    def __init__(self, hashes: pa.Array, size: int) -> None:
        ordered = pc.sort_indices(hashes)
        last = pc.take(hashes, ordered).to_pylist()[size - 1 :: size]
        if len(hashes) % size:
            last.append(pc.max(hashes).as_py())
        self.ends: list[str] = last

    def of(self, chunk_hash: str) -> int:
        return bisect.bisect_left(self.ends, chunk_hash)


def _one_text_per_hash(element: tuple[int, Iterable[tuple[str, str]]]):
    """``((hashes...), [texts...])`` of one group, each hash once (a hash has one text: the
    hash is of it), sorted by hash."""
    _, pairs = element
    ordered = sorted(dict(pairs).items())
    return tuple(h for h, _ in ordered), [t for _, t in ordered]


class _WriteGroup(beam.DoFn):
    """Commits one group's vectors to the store as one file; yields how many hashes."""

    def __init__(self, output: str, model: embedding.Model) -> None:
        self._output = output
        self._model = model

    def process(self, element: tuple[tuple[str, ...], np.ndarray]) -> Iterator[int]:
        hashes, vectors = element
        vectors = np.asarray(vectors, dtype=np.float32)
        dimension = self._model.dimension
        if vectors.ndim != 2 or vectors.shape != (len(hashes), dimension):
            raise ValueError(
                f"model {self._model.name} (key {self._model.key}) made vectors of shape "
                f"{vectors.shape} for {len(hashes)} texts; its store records dimension "
                f"{dimension}"
            )
        flat = pa.array(vectors.reshape(-1), pa.float32())
        table = pa.table(
            [pa.array(hashes, pa.string()), pa.FixedSizeListArray.from_arrays(flat, dimension)],
            schema=embedstore.vector_schema(dimension),
        )
        embedstore.write_vectors(self._output, self._model.key, table)
        yield len(hashes)


class EmbedTexts(beam.PTransform):
    """``(chunk_hash, text)`` pairs of the hashes of ``hashes`` (a hash may come more than
    once) → their vectors in the store of ``model`` under ``output``, committed a file per
    group of ``texts_per_file`` as they are made, by torch compiled when ``compiled``;
    returns one element: how many hashes it stored."""

    def __init__(
        self,
        output: str,
        model: embedding.Model,
        hashes: pa.Array,
        batch_size: int,
        texts_per_file: int,
        device: str = "cpu",
        max_batch_tokens: int | None = None,
        compiled: bool = False,
    ) -> None:
        super().__init__()
        self._output = output
        self._model = model
        self._groups = Groups(hashes, texts_per_file)
        self._encode = EncodeGroups(model, batch_size, device, max_batch_tokens, compiled)

    def expand(self, texts: beam.PCollection) -> beam.PCollection:
        groups = self._groups
        return (
            texts
            | "ToGroups" >> beam.Map(lambda pair: (groups.of(pair[0]), pair))
            | "ByGroup" >> beam.GroupByKey()
            | "OneTextPerHash" >> beam.Map(_one_text_per_hash)
            | "Embed" >> beam.ParDo(self._encode)
            | "Commit" >> beam.ParDo(_WriteGroup(self._output, self._model))
            | "Stored" >> beam.CombineGlobally(sum)
        )


class ReadTextsToEmbed(beam.PTransform):
    """The start of the pipeline: ``(chunk_hash, text)`` of every hash of ``needed`` found in
    the chunks/ files ``paths`` (a hash in several files comes once from each)."""

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
        )
