"""Chunk occurrences staged in files between the two halves of the hash join.

The text of a chunk is most of a run's bytes, and the join that decides which hashes are
new needs only hashes and ids. So ``ProcessDocuments`` writes the occurrences it makes (text
included) to a staged file per few thousand rows, and only their hashes and ids cross the
shuffle; once every occurrence of a staged file is decided, the file is read back once and
its rows go to the tables (docs/design.md, "Why the shapes are what they are"). The files
live in the run's temporary folder and go with it when the tables are named
(``sinks.name_table_files``).

A staged file is written once and read once, soon, by the same run: it is an Arrow IPC file
(no encoding to undo; the columns are the read's arrays as they lie), followed by a trailer
of the CRC-32 of those bytes, so a worker's disk or an object store that damages a file
stops the run instead of changing a table.
"""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import tempfile
import uuid
import zlib

import pyarrow as pa
import pyarrow.ipc as ipc
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema, stores

PREFIX = "occurrences-"
SUFFIX = ".staged"

# What follows the IPC file's bytes: a mark naming the layout, then their CRC-32.
_MARK = b"CMS1"
_TRAILER = struct.Struct("<4sI")


class StagedFileDamaged(OSError):
    """A staged file whose bytes are not the ones written."""


def local_folder() -> str:
    """A local temporary folder for staged files, removed when this process exits: for
    ``ChunkCorpus`` run without a folder of the run's (a test, the Python API)."""
    folder = tempfile.mkdtemp(prefix="chunkmill-staging-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def encode(table: pa.Table) -> tuple[pa.Buffer, bytes]:
    """``table`` as a staged file's bytes: an Arrow IPC file, and the trailer that follows."""
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    body = sink.getvalue()
    return body, _TRAILER.pack(_MARK, zlib.crc32(body))


def decode(data: pa.Buffer | bytes, name: str) -> pa.Table:
    """The rows of a staged file's bytes (``encode``'s), as ``schema.CHUNKS``;
    ``StagedFileDamaged`` naming ``name`` when the trailer or the checksum do not match."""
    buffer = pa.py_buffer(data) if isinstance(data, bytes) else data
    size = buffer.size - _TRAILER.size
    if size < 0:
        raise StagedFileDamaged(f"staged file {name}: {buffer.size} bytes, too short")
    mark, crc = _TRAILER.unpack(buffer.slice(size).to_pybytes())
    body = buffer.slice(0, size)
    if mark != _MARK:
        raise StagedFileDamaged(f"staged file {name}: no checksum trailer (cut short?)")
    if zlib.crc32(body) != crc:
        raise StagedFileDamaged(f"staged file {name}: its bytes do not match their checksum")
    table = ipc.open_file(body).read_all()
    return pa.Table.from_arrays(table.columns, schema=schema.CHUNKS)


def new_path(folder: str) -> str:
    """The path of a new staged file under ``folder``. A new name each time: a retried
    bundle's file is never one its successor reads."""
    return FileSystems.join(folder, f"{PREFIX}{uuid.uuid4().hex}{SUFFIX}")


def write(folder: str, table: pa.Table) -> str:
    """``table`` (``schema.CHUNKS``) as a new staged file under ``folder``; returns its path."""
    path = new_path(folder)
    write_to(path, table)
    return path


def write_to(path: str, table: pa.Table) -> None:
    """``table`` (``schema.CHUNKS``) as the staged file ``path`` (``new_path``'s)."""
    body, trailer = encode(table)
    local = stores.local_path(path)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)  # as FileSystems.create does
        with pa.OSFile(local, "wb") as handle:
            handle.write(body)
            handle.write(trailer)
        return
    with FileSystems.create(
        path, mime_type="application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED
    ) as handle:
        handle.write(memoryview(body))
        handle.write(trailer)


def read(path: str) -> pa.Table:
    """The rows of a staged file, as ``schema.CHUNKS``; ``StagedFileDamaged`` when its bytes
    are not the ones written."""
    local = stores.local_path(path)
    if local is not None:
        # Mapped, not read: the rows' buffers are the file's pages, not a copy of them.
        with pa.memory_map(local, "r") as handle:
            data: pa.Buffer | bytes = handle.read_buffer()
    else:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            data = handle.read()
    return decode(data, path)
