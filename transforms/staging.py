"""Chunk occurrences staged in files between the two halves of the hash join.

The text of a chunk is most of a run's bytes, and the join that decides which hashes are
new needs only hashes and ids. So ``ProcessDocuments`` writes the occurrences it makes (text
included) to a staged file per few thousand rows, and only their hashes and ids cross the
shuffle; once every occurrence of a staged file is decided, the file is read back once and
its rows go to the tables (docs/design.md, "Why the shapes are what they are"). The files
live in the run's temporary folder and go with it when the tables are named
(``sinks.name_table_files``).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema

PREFIX = "occurrences-"


def local_folder() -> str:
    """A local temporary folder for staged files, removed when this process exits: for
    ``ChunkCorpus`` run without a folder of the run's (a test, the Python API)."""
    folder = tempfile.mkdtemp(prefix="chunkmill-staging-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def write(folder: str, table: pa.Table) -> str:
    """``table`` (``schema.CHUNKS``) as a new staged file under ``folder``; returns its path.
    A new name each time: a retried bundle's file is never one its successor reads."""
    path = FileSystems.join(folder, f"{PREFIX}{uuid.uuid4().hex}.parquet")
    with FileSystems.create(
        path, mime_type="application/x-parquet", compression_type=CompressionTypes.UNCOMPRESSED
    ) as handle:
        # Read once, soon, by this run: no compression, and checksums (a worker's disk or
        # an object store can corrupt a file as well as a table's).
        pq.write_table(
            table,
            handle,
            compression="none",
            use_compliant_nested_type=False,  # list items keep the name Arrow gives them
            write_page_checksum=True,
        )
    return path


def read(path: str) -> pa.Table:
    """The rows of a staged file, as ``schema.CHUNKS``."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        table = pq.ParquetFile(handle, page_checksum_verification=True).read()
    return pa.Table.from_arrays(table.columns, schema=schema.CHUNKS)
