"""The names the commands and the Python API have always imported from here, now kept by the
modules that hold them: ``sources`` (what a run reads), ``sinks`` (writing its tables),
``publish`` (the guards, ``_SUCCESS`` and ``LATEST``), ``parquet_io`` (reading and writing
chunkmill's Parquet files) and ``runstate`` (the run folder's layout and state files)."""

from __future__ import annotations

from chunkmill.transforms.parquet_io import PARQUET_BATCH_ROWS as PARQUET_BATCH_ROWS
from chunkmill.transforms.parquet_io import TableFile as TableFile
from chunkmill.transforms.parquet_io import UnreadableTable as UnreadableTable
from chunkmill.transforms.parquet_io import footer_rows as footer_rows
from chunkmill.transforms.parquet_io import read_parquet_batches as read_parquet_batches
from chunkmill.transforms.publish import PublishPolicy as PublishPolicy
from chunkmill.transforms.publish import PublishRun as PublishRun
from chunkmill.transforms.publish import check_error_ratio as check_error_ratio
from chunkmill.transforms.publish import check_removed_ratio as check_removed_ratio
from chunkmill.transforms.publish import check_replaced_ratio as check_replaced_ratio
from chunkmill.transforms.publish import finished_runs as finished_runs
from chunkmill.transforms.publish import point_latest_at_newest as point_latest_at_newest
from chunkmill.transforms.publish import publish as publish
from chunkmill.transforms.publish import replaced_state as replaced_state
from chunkmill.transforms.publish import table_files as table_files
from chunkmill.transforms.runstate import LATEST as LATEST
from chunkmill.transforms.runstate import RUNS as RUNS
from chunkmill.transforms.runstate import SUCCESS as SUCCESS
from chunkmill.transforms.runstate import read_text as read_text
from chunkmill.transforms.runstate import run_dir as run_dir
from chunkmill.transforms.runstate import table_dir as table_dir
from chunkmill.transforms.runstate import write_text as write_text
from chunkmill.transforms.sinks import WriteTables as WriteTables
from chunkmill.transforms.sinks import name_table_files as name_table_files
from chunkmill.transforms.sinks import temp_folder as temp_folder
from chunkmill.transforms.sources import ListFiles as ListFiles
from chunkmill.transforms.sources import ReadManifest as ReadManifest
from chunkmill.transforms.sources import ReadPriorErrors as ReadPriorErrors
from chunkmill.transforms.sources import prior_errors as prior_errors
