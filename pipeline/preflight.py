"""Proving the prior manifest before a run trusts it: what the run diffs against is exactly
what a finished run wrote, or a run would carry over a partial state without a word (a
manifest missing one file carries over only the rows of the others, and every later run
inherits the loss).

- A run folder (``--prior-manifest auto`` reads it from ``OUTPUT/LATEST``; a path may name
  one, or its ``manifest/`` folder, or files in it) must have a valid ``_SUCCESS``. The prior
  manifest is then exactly the files that ``_SUCCESS`` lists, never a glob (a stray file
  beside them is not read), and each must be there with the size it records, and a footer
  with its row count, the manifest schema and this schema version. (A ``_SUCCESS`` of a
  release that listed paths only is proven by presence and footers alone.)
- Any other Parquet path or glob (a manifest from elsewhere) is every file it matches, each
  footer checked: the manifest schema, a schema version this chunkmill reads.
- A run's other tables (``chunks/``, ``removed/``, ``errors/``) are refused by name.

Footers only are read here; the pages are verified as the run reads them
(``chunkmill.transforms.prior.read_part``). Every problem is a ``PriorRefused`` of one line saying
what is wrong and how to go on; ``chunkmill.pipeline.options`` turns it into a usage error.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema
from chunkmill.transforms import runstate, tables

MANIFEST = "manifest"
# How to go on, said by every refusal of a run's state.
_RECOVER = "pass --prior-manifest with an older run, or none"


class PriorRefused(Exception):
    """The prior manifest cannot be trusted; the message is one line."""


@dataclass(frozen=True)
class ProvenPrior:
    """The files of a proven prior manifest, in order, and, when the prior was given as a run
    (LATEST or a run folder), the errors/ files its ``_SUCCESS`` lists: the prior's
    failures."""

    files: tuple[str, ...]
    errors: tuple[str, ...] = ()


def prove_run(run_folder: str, name: str) -> ProvenPrior:
    """The manifest files of the finished run in ``run_folder``, as its ``_SUCCESS`` lists
    them, each proven (``_check_listed``). ``name`` is how messages call the run."""
    paths, report = _proven_listing(run_folder, name)
    errors = tuple(FileSystems.join(run_folder, e["path"]) for e in report["tables"]["errors"])
    return ProvenPrior(tuple(paths), errors)


def prove_path(path: str) -> ProvenPrior:
    """The manifest files ``path`` names: a run folder, a run's ``manifest/`` folder or
    files in it (each proven through the run's ``_SUCCESS``), or a folder, file or glob of
    Parquet files outside any run (each footer checked)."""
    path = path.rstrip("/") or "/"
    if _finished(path):
        return prove_run(path, path)
    folder, leaf = path, None
    if path.endswith(".parquet") or any(c in path for c in "*?["):
        folder, leaf = posixpath.dirname(path), path
    table, run = posixpath.basename(folder), posixpath.dirname(folder)
    if table in schema.TABLES and (_finished(run) or _is_run_folder(run)):
        if table != MANIFEST:
            raise PriorRefused(f"{path} is the {table} table of run {run}, not a manifest")
        if not _finished(run):
            raise _unfinished(run, run)
        listed, _ = _proven_listing(run, run)
        if leaf is None:
            return ProvenPrior(tuple(listed))
        chosen = tuple(p for p in listed if fnmatch.fnmatchcase(p, leaf))
        if not chosen:
            raise PriorRefused(f"{path} names none of the manifest files run {run} lists")
        return ProvenPrior(chosen)
    if leaf is None and _matches(FileSystems.join(path, MANIFEST, "*.parquet")):
        raise _unfinished(path, path)  # a run folder without _SUCCESS
    for glob in [leaf] if leaf else [FileSystems.join(path, "*.parquet")]:
        files = sorted(m.path for m in _matches(glob))
        if files:
            for f in files:
                check_footer(f)
            return ProvenPrior(tuple(files))
    raise PriorRefused("no manifest Parquet file found there")


def _proven_listing(run_folder: str, name: str) -> tuple[list[str], dict[str, Any]]:
    """The run's manifest files, each proven, and its run report."""
    report = _success(run_folder, name)
    listed = report["tables"][MANIFEST]
    paths = [FileSystems.join(run_folder, entry["path"]) for entry in listed]
    sizes = _sizes(paths)
    for entry, path in zip(listed, paths, strict=True):
        _check_listed(path, entry, sizes.get(path), name)
    return paths, report


def _success(run_folder: str, name: str) -> dict[str, Any]:
    path = FileSystems.join(run_folder, tables.SUCCESS)
    if not FileSystems.exists(path):
        raise _unfinished(run_folder, name)
    try:
        return runstate.read_success(path)
    except (ValueError, UnicodeDecodeError) as e:
        raise PriorRefused(
            f"prior run {name} did not finish: its {tables.SUCCESS} is not a valid run report "
            f"({_short(e)}); {_RECOVER}"
        ) from None


def _unfinished(run_folder: str, name: str) -> PriorRefused:
    return PriorRefused(
        f"prior run {name} did not finish (it has no {tables.SUCCESS}), so its manifest may be "
        f"partial; {_RECOVER}"
    )


def _check_listed(path: str, entry: dict[str, Any], size: int | None, name: str) -> None:
    """A file ``_SUCCESS`` lists is there, with the size and row count it records, and a
    manifest footer."""
    rel = entry["path"]
    if size is None:
        raise PriorRefused(
            f"prior run {name} is missing {rel} listed in its {tables.SUCCESS}; restore it, or "
            f"{_RECOVER}"
        )
    if entry["bytes"] is not None and size != entry["bytes"]:
        raise PriorRefused(
            f"prior run {name}'s {rel} has {size} bytes but its {tables.SUCCESS} records "
            f"{entry['bytes']} (cut short or replaced); restore it, or {_RECOVER}"
        )
    rows = check_footer(path)
    if entry["rows"] is not None and rows != entry["rows"]:
        raise PriorRefused(
            f"prior run {name}'s {rel} holds {rows} rows but its {tables.SUCCESS} records "
            f"{entry['rows']}; restore it, or {_RECOVER}"
        )


def check_footer(path: str) -> int:
    """Reads the footer of ``path`` and returns its row count; refuses a file that is not
    Parquet, has another table's schema or another schema version."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            parquet = pq.ParquetFile(f)
            found, rows = parquet.schema_arrow, parquet.metadata.num_rows
    except Exception as e:
        raise PriorRefused(
            f"prior manifest {path} is not a readable Parquet file ({_short(e)}); restore "
            f"it, or {_RECOVER}"
        ) from None
    meta = found.metadata or {}
    # Another release's manifest is named as such (its columns may differ too); a file that
    # says nothing of its version is first told apart by its columns.
    if b"chunkmill.schema_version" in meta:
        _check_version(path, meta)
    if not same_shape(found, schema.MANIFEST):
        other = [n for n, s in schema.TABLES.items() if same_shape(found, s)]
        what = f"the {other[0]} table" if other else "not a chunkmill manifest"
        raise PriorRefused(
            f"prior manifest {path} is {what}: its columns differ from the manifest's; {_RECOVER}"
        )
    _check_version(path, meta)
    return int(rows)


def _check_version(path: str, meta: dict[bytes, bytes]) -> None:
    """A prior manifest must have been written with this schema version: reading another
    would fail on a worker, or worse, diff against columns that mean something else."""
    found = meta.get(b"chunkmill.schema_version", b"?").decode(errors="replace")
    readable = schema.READABLE_MANIFEST_VERSIONS
    if found in readable:
        return
    writer = meta.get(b"chunkmill.version", b"").decode(errors="replace")
    raise PriorRefused(
        f"prior manifest {path} has schema version {found}"
        + (f" (written by chunkmill {writer})" if writer else "")
        + f"; this chunkmill reads versions {', '.join(sorted(readable))}. Run once with "
        "--prior-manifest none (every chunk is written again; chunk hashes are unchanged, so "
        "embeddings keyed by hash can be reused), or use the chunkmill release that wrote it"
    )


def same_shape(a: pa.Schema, b: pa.Schema) -> bool:
    """Same column names, types and nullability, in order; a list's item name (which Parquet
    writers spell differently) and the metadata aside."""

    def shape(t: pa.DataType) -> Any:
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return (str(type(t)), shape(t.value_type), t.value_field.nullable)
        return t

    return [(f.name, shape(f.type), f.nullable) for f in a] == [
        (f.name, shape(f.type), f.nullable) for f in b
    ]


def _finished(folder: str) -> bool:
    return FileSystems.exists(FileSystems.join(folder, tables.SUCCESS))


def _is_run_folder(folder: str) -> bool:
    """Under ``OUTPUT/runs/``: a run that may not have finished."""
    return posixpath.basename(posixpath.dirname(folder)) == tables.RUNS


def _matches(glob: str) -> list[Any]:
    try:
        return list(FileSystems.match([glob])[0].metadata_list)
    except Exception:
        return []


def _sizes(paths: list[str]) -> dict[str, int]:
    """Size in bytes of each of ``paths`` that exists."""
    sizes = {}
    for path in paths:
        for meta in _matches(path):
            sizes[meta.path] = meta.size_in_bytes
    return sizes


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:200]}"
