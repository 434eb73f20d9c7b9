"""The embedding store: the vectors of chunk hashes, content-addressed per model key.

    OUTPUT/embeddings/KEY/model.json                 what KEY is (written before any vector)
    OUTPUT/embeddings/KEY/part-RUN_ID-BATCH-NNNNN.parquet  chunk_hash, vector (float32 x dim)

A hash is embedded once per key: an embed job embeds only the hashes no file of KEY holds
yet, and each file is written whole (under a temporary name, then renamed), so a file either
holds all its rows or is not there. Files are read through Beam's FileSystems, so the store
may live on local disk, gs:// or s3://, beside the runs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill.transforms import tables

EMBEDDINGS = "embeddings"
MODEL_INFO = "model.json"
PART_PREFIX = "part-"


def store_dir(output: str, key: str) -> str:
    return FileSystems.join(output, EMBEDDINGS, key)


def vector_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_hash", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension), nullable=False),
        ]
    )


def write_model_info(output: str, key: str, info: dict[str, Any]) -> None:
    """Records what ``key`` is, once: an existing record is left as it is."""
    path = FileSystems.join(store_dir(output, key), MODEL_INFO)
    if FileSystems.exists(path):
        return
    _write_whole(path, json.dumps({"key": key, **info}, sort_keys=True, indent=1).encode())


def read_model_info(output: str, key: str) -> dict[str, Any] | None:
    """What ``key`` is, or None when the store holds no vector of it."""
    path = FileSystems.join(store_dir(output, key), MODEL_INFO)
    if not FileSystems.exists(path):
        return None
    info: dict[str, Any] = json.loads(tables.read_text(path))
    return info


def part_paths(output: str, key: str) -> list[str]:
    """Every vector file of ``key``, sorted."""
    pattern = FileSystems.join(store_dir(output, key), f"{PART_PREFIX}*.parquet")
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def stored_hashes(output: str, key: str) -> pa.Array:
    """The distinct hashes the store holds a vector of for ``key``."""
    parts = [
        chunk
        for t in tables.read_parquet_batches(part_paths(output, key), ["chunk_hash"])
        for chunk in t["chunk_hash"].chunks
    ]
    return pc.unique(pa.chunked_array(parts, pa.string()))


def read_vectors(
    output: str, key: str, hashes: pa.Array | pa.ChunkedArray | None = None
) -> Iterator[pa.Table]:
    """``(chunk_hash, vector)`` batches of ``key``'s vectors, only those of ``hashes`` when
    given. A hash may come twice (two jobs embedded it at once); its vectors are the same."""
    for t in tables.read_parquet_batches(part_paths(output, key), ["chunk_hash", "vector"]):
        if hashes is not None:
            t = t.filter(pc.is_in(t["chunk_hash"], value_set=hashes))
        if t.num_rows:
            yield t


def part_name(run_id: str, batch: str, index: int) -> str:
    """The ``index``-th vector file that one embed of ``run_id`` (``batch``) stored."""
    return f"{PART_PREFIX}{run_id}-{batch}-{index:05d}.parquet"


def write_part(output: str, key: str, name: str, table: pa.Table) -> str:
    """Writes one vector file whole under ``name``; returns its path."""
    path = FileSystems.join(store_dir(output, key), name)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)
    _write_whole(path, sink.getvalue().to_pybytes())
    return path


def _write_whole(path: str, data: bytes) -> None:
    """``data`` at ``path``, never half: written under a temporary name beside it, then
    renamed (an object store shows an object only once its upload is complete)."""
    staging = f"{path}.{uuid.uuid4().hex}.tmp"
    with FileSystems.create(staging, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    FileSystems.rename([staging], [path])
