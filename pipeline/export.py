"""``chunkmill export``: a run's whole current state with its text, as one table at one path.

    DESTINATION/state-RUN_ID-NNNNN-of-MMMMM.parquet   every occurrence, with text (schema.CHUNKS)
    DESTINATION/_EXPORT                               JSON: the run, its rows and files

A run's own tables hold only its changes (chunks/ has the hashes new in it); the text of
its state is read from the text store its ``_TEXT`` names (docs/text-store.md). This is the
one table to point a BigQuery external table, a dbt source or pandas at, or to re-embed from.
Exporting again into the same destination writes the new files, then ``_EXPORT``, then
deletes the previous export's files: a reader that follows ``_EXPORT`` sees one whole state;
one that globs the folder sees both states for that moment.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from chunkmill.pipeline import runners
from chunkmill.pipeline.options import UsageError

if TYPE_CHECKING:
    from chunkmill.pipeline.commands.export import ExportSettings

MARKER = "_EXPORT"


def _previous(destination: str) -> list[str] | None:
    """The files of the export in ``destination`` ([] when it is empty or absent); None when
    it holds files that no export of chunkmill wrote."""
    marker = FileSystems.join(destination, MARKER)
    pattern = FileSystems.join(destination, "*")
    found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    if not found:
        return []
    if marker not in found:
        return None
    from chunkmill.transforms import runstate

    previous: list[str] = json.loads(runstate.read_text(marker))["files"]
    return [FileSystems.join(destination, name) for name in previous]


def _missing_texts(manifest: list[str], chunks: list[str]) -> int:
    """How many distinct hashes of the manifest no chunks/ file holds."""
    from chunkmill.transforms import parquet_io

    def hashes(paths: list[str]) -> pa.Array:
        batches = parquet_io.read_parquet_batches(paths, ["chunk_hash"])
        parts = [c for t in batches for c in t["chunk_hash"].chunks]
        return pc.unique(pa.chunked_array(parts, pa.string()))

    live = hashes(manifest)
    return int(pc.sum(pc.invert(pc.is_in(live, value_set=hashes(chunks)))).as_py() or 0)


def export(settings: ExportSettings) -> int:
    """``chunkmill export`` with its settings parsed (``chunkmill.pipeline.commands.export``)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from chunkmill.pipeline.preflight import prepare_filesystems
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import parquet_io, runstate
    from chunkmill.transforms.export import ExportState

    prepare_filesystems(list(settings.beam_args))
    started = time.monotonic()
    state = state_files(settings.output, settings.run_id)
    previous = _previous(settings.destination)
    if previous is None:
        raise UsageError(
            f"--to {settings.destination}: the folder holds files that are not an export "
            "(no _EXPORT); choose an empty folder"
        )
    try:
        missing = _missing_texts(state.manifest, state.chunks)
    except parquet_io.UnreadableTable as e:
        print(
            f"chunkmill: chunks of run {state.run_id} have no text: {e}; nothing exported. "
            "Re-run with --prior-manifest none to chunk everything again",
            file=sys.stderr,
        )
        return 1
    if missing:
        print(
            f"chunkmill: {missing} chunks of run {state.run_id} have no text in "
            + ("its text store" if state.from_store else "any run's chunks/")
            + " (a file was deleted by hand); nothing exported. Re-run with "
            "--prior-manifest none to chunk everything again (still refused if it would drop "
            "more than --max-removed-ratio of LATEST's documents)",
            file=sys.stderr,
        )
        return 1
    options = PipelineOptions(runners.local_engine(settings.beam_args))
    prefix = f"state-{state.run_id}"
    with beam.Pipeline(options=options) as p:
        _ = p | "Export" >> ExportState(state.manifest, state.chunks, settings.destination, prefix)
    pattern = FileSystems.join(settings.destination, f"{prefix}-*.parquet")
    written = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    rows = sum(parquet_io.footer_rows(path) for path in written)
    names = [path.rsplit("/", 1)[-1] for path in written]
    report = {"run_id": state.run_id, "rows": rows, "files": names}
    staging = FileSystems.join(settings.destination, f".{MARKER}.tmp")
    runstate.write_text(staging, json.dumps(report, indent=1))
    FileSystems.rename([staging], [FileSystems.join(settings.destination, MARKER)])
    stale = [path for path in previous if path not in set(written)]
    if stale:
        FileSystems.delete(stale)
    seconds = time.monotonic() - started
    print(
        f"exported run {state.run_id}: {rows} chunks with their text in {len(names)} files "
        f"to {settings.destination} in {seconds:.1f} s"
    )
    return 0
