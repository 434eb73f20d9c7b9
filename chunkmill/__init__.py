"""chunkmill: incremental chunking of a document corpus into Parquet tables, on Apache Beam.

The package's rooms: the pure core at this level (``ids``, ``schema``, ``config``,
``document``, ``chunking``, ``extract``; no Beam), the Beam composites in
``chunkmill.transforms`` and the command line in ``chunkmill.pipeline``. The Python API:
``chunk_text``, ``extract_text`` and, for use inside another Beam pipeline, ``ChunkCorpus``
(imported on first use, so ``import chunkmill`` does not import Beam).
"""

from __future__ import annotations

from typing import Any

from chunkmill.api import Chunk, Extracted, ExtractionError, chunk_text, extract_text
from chunkmill.versions import chunkmill_version

__version__ = chunkmill_version()

__all__ = [
    "Chunk",
    "ChunkCorpus",
    "Extracted",
    "ExtractionError",
    "__version__",
    "chunk_text",
    "extract_text",
]


def __getattr__(name: str) -> Any:
    if name == "ChunkCorpus":
        from chunkmill.transforms.core import ChunkCorpus

        return ChunkCorpus
    raise AttributeError(f"module 'chunkmill' has no attribute {name!r}")
