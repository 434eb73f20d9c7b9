"""Retrievers: each ranks the indexed texts for every query and returns the top ``k``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from chunkmill import backends, embedding
from chunkmill.evaluation.bm25 import Bm25


class Retriever(Protocol):
    name: str

    def rank(self, texts: Sequence[str], queries: Sequence[str], k: int) -> list[list[int]]:
        """For each query, the indices in ``texts`` of its ``k`` best texts, best first."""
        ...


class Bm25Retriever:
    """BM25 (:mod:`chunkmill.evaluation.bm25`): no model, no extra."""

    name = "bm25"

    def rank(self, texts: Sequence[str], queries: Sequence[str], k: int) -> list[list[int]]:
        index = Bm25(texts)
        return [index.top(q, k) for q in queries]


# Texts per model call, and how many texts make an embedding long enough to report progress.
BATCH = 64
PROGRESS_FROM = 512
# Queries scored against every chunk at once: 256 rows of similarities.
QUERY_BLOCK = 256


class ModelRetriever:
    """An embedding model (sentence-transformers): normalized vectors, ranked by cosine.

    Vectors are kept by text, so configurations compared in one command embed a chunk they
    share once. With ``progress``, an embedding of many texts says how far it is on stderr,
    at every tenth."""

    name = "model"

    def __init__(self, model: Path | embedding.Model, progress: bool = True) -> None:
        """``model``: a folder (run by torch), or a described model with its backend."""
        if isinstance(model, Path):
            self._model: Any = embedding.load(model)
        else:
            self._model = embedding.load_encoder(model, backends.pick_device("auto"))
        self._progress = progress
        self._vectors: dict[str, Any] = {}

    def rank(self, texts: Sequence[str], queries: Sequence[str], k: int) -> list[list[int]]:
        import numpy as np

        self._embed(list(texts) + list(queries))
        if not texts:
            return [[] for _ in queries]
        chunks = np.stack([self._vectors[t] for t in texts])
        ranked: list[list[int]] = []
        for at in range(0, len(queries), QUERY_BLOCK):  # bounds the similarity matrix
            asked = np.stack([self._vectors[q] for q in queries[at : at + QUERY_BLOCK]])
            similarity = asked @ chunks.T
            # A stable sort of the negated scores: ties keep index order.
            order = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
            ranked += [[int(i) for i in row] for row in order]
        return ranked

    def _embed(self, texts: list[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        show = self._progress and len(todo) >= PROGRESS_FROM
        tenths = 0
        for at in range(0, len(todo), BATCH):
            batch = todo[at : at + BATCH]
            vectors = self._model.encode(
                batch, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True
            )
            self._vectors.update(zip(batch, vectors, strict=True))
            done = at + len(batch)
            if show and done * 10 // len(todo) > tenths:
                tenths = done * 10 // len(todo)
                print(f"embedded {done} of {len(todo)} texts", file=sys.stderr, flush=True)
