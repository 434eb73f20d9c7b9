"""Parquet files of chunkmill's tables outside a pipeline's shuffle: writing one with page
checksums (``TableFile``) and reading any back a batch at a time (``read_parquet_batches``),
through Beam's FileSystems, so local paths, gs:// and s3:// behave the same."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import stores

# Columns whose values are (nearly) all different: a dictionary of them saves nothing, and the
# writer would hash up to a page of them before giving it up.
UNIQUE_COLUMNS = frozenset({"chunk_id", "chunk_hash", "text", "text_with_context"})
# Columns of long text: min/max statistics of them would be the writer comparing every text
# to no reader's use (a filter on a chunk's text is no filter a row group can skip).
TEXT_COLUMNS = frozenset({"text", "text_with_context"})


class TableFile:
    """A Parquet file being written to ``path`` (any FileSystems path), with page
    checksums: the settings of Beam's Parquet sink (no compression) plus the checksums,
    without a dictionary for ``UNIQUE_COLUMNS`` and statistics for ``TEXT_COLUMNS``
    (docs/design.md, "Why the shapes are what they are")."""

    def __init__(self, path: str, table_schema: pa.Schema) -> None:
        self.path = path
        local = stores.local_path(path)
        if local is not None:
            # Arrow's own file: the writer's pages go to the disk without a Python copy each.
            os.makedirs(os.path.dirname(local) or ".", exist_ok=True)  # as FileSystems.create
            self._handle: Any = pa.OSFile(local, "wb")
        else:
            self._handle = FileSystems.create(
                path,
                mime_type="application/x-parquet",
                compression_type=CompressionTypes.UNCOMPRESSED,
            )
        # Beam's own settings (no compression; lists written as Arrow names them), so the
        # files are those Beam's sink writes, plus the checksums.
        self._writer = pq.ParquetWriter(
            self._handle,
            table_schema,
            **_BEAM_SETTINGS,
            write_page_checksum=True,
            use_dictionary=_leaves(table_schema, UNIQUE_COLUMNS),
            write_statistics=_leaves(table_schema, TEXT_COLUMNS),
        )

    def write(self, table: pa.Table) -> None:
        """``table`` as one row group (or more, past Arrow's row-group size)."""
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()
        self._handle.close()


_BEAM_SETTINGS = {
    "compression": "none",
    "use_deprecated_int96_timestamps": False,
    "use_compliant_nested_type": False,
}


@functools.lru_cache(maxsize=32)
def _leaves(table_schema: pa.Schema, without: frozenset[str]) -> list[str]:
    """The Parquet column paths of ``table_schema`` (a list's is ``name.list.item``: the
    writer's settings name leaves) but those of the top-level columns ``without``. Spelled
    from the Arrow types as the writer names them with Beam's settings (lists not in the
    compliant form): no file written and read back to learn them, which took a process
    2-3 ms for the chunks/ schema alone."""
    return [
        path
        for field in table_schema
        if field.name not in without
        for path in _paths(field.name, field.type)
    ]


def _paths(name: str, arrow_type: pa.DataType) -> Iterator[str]:
    if pa.types.is_dictionary(arrow_type):
        yield from _paths(name, arrow_type.value_type)
    elif (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    ):
        yield from _paths(f"{name}.list.{arrow_type.value_field.name}", arrow_type.value_type)
    elif pa.types.is_map(arrow_type):
        yield from _paths(f"{name}.key_value.key", arrow_type.key_type)
        yield from _paths(f"{name}.key_value.value", arrow_type.item_type)
    elif pa.types.is_struct(arrow_type):
        for child in arrow_type:
            yield from _paths(f"{name}.{child.name}", child.type)
    else:
        yield name


def open_input(path: str) -> Any:
    """``path`` (any FileSystems path) opened for reading by a Parquet reader: a local file
    as Arrow's own (its pages are read straight into Arrow's buffers, no Python call or
    copy per read), any other through FileSystems."""
    local = stores.local_path(path)
    if local is not None:
        return pa.OSFile(local)
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def footer_rows(path: str) -> int:
    """The row count a Parquet file's footer records (only the footer is read)."""
    with open_input(path) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


# Rows per batch when chunkmill reads its own tables outside Beam (report, plan): enough to
# amortise Arrow's per-batch cost, small enough that a table of any size streams.
PARQUET_BATCH_ROWS = 64 * 1024


def read_parquet_batches(
    paths: Sequence[str], columns: Sequence[str], *, batch_rows: int | None = None
) -> Iterator[pa.Table]:
    """The given columns of Parquet files, at most ``batch_rows`` rows at a time (default
    ``PARQUET_BATCH_ROWS``), through FileSystems (local, gs://, s3://), so no table has to fit
    in memory. Page checksums are verified (chunkmill writes them): a flipped byte raises
    ``UnreadableTable`` naming the file instead of passing into what is read."""
    batch_rows = batch_rows or PARQUET_BATCH_ROWS
    for path in paths:
        try:
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                parquet = pq.ParquetFile(f, page_checksum_verification=True)
                # Row group by row group: ParquetFile.iter_batches reads ahead, and its memory
                # grows with the file (370 MB for a 265 MB chunks/ file), this with a group.
                for group in range(parquet.num_row_groups):
                    table = parquet.read_row_group(group, columns=list(columns))
                    for start in range(0, table.num_rows, batch_rows):
                        yield table.slice(start, batch_rows)
        except (OSError, pa.ArrowException) as e:  # not Parquet, cut short: ArrowInvalid
            raise UnreadableTable(f"{path}: {' '.join(str(e).split())}") from e


class UnreadableTable(OSError):
    """A file of a chunkmill table that cannot be read back (gone, cut short, a page whose
    checksum does not match); the message names the file."""
