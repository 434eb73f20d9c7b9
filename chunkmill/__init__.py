"""chunkmill: incremental chunking of a document corpus into Parquet tables, on Apache Beam.

The package's rooms: the pure core at this level (``ids``, ``schema``, ``config``,
``document``, ``carryover``, ``chunking``, ``extract``; no Beam), the Beam composites in
``chunkmill.transforms`` and the command line in ``chunkmill.pipeline``. The Python API:
``chunk_text``, ``extract_text`` and, for use inside another Beam pipeline, ``ChunkCorpus``.
Each is imported on first use, so ``import chunkmill`` (and ``chunkmill --help``) stays fast
and ``import chunkmill`` imports no Beam.
"""

from __future__ import annotations

# First: a Ctrl-C while the command starts is one line, not a traceback from an import.
from chunkmill import early_signals

early_signals.install_if_command()

import importlib  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from chunkmill import quiet  # noqa: E402
from chunkmill.versions import chunkmill_version  # noqa: E402

if TYPE_CHECKING:
    from chunkmill.api import Chunk, Extracted, ExtractionError, chunk_text, extract_text
    from chunkmill.transforms.core import ChunkCorpus

__version__ = chunkmill_version()
quiet.install()

# The public names and the modules that hold them.
_API = {
    "Chunk": "chunkmill.api",
    "Extracted": "chunkmill.api",
    "ExtractionError": "chunkmill.api",
    "chunk_text": "chunkmill.api",
    "extract_text": "chunkmill.api",
    "ChunkCorpus": "chunkmill.transforms.core",
}

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
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'chunkmill' has no attribute {name!r}")
