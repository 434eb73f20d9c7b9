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
what is wrong and how to go on, which ``check_run`` turns into a usage error.

This module holds every check of a command line against storage (``check_run``,
``finished_run``); the commands' ``parse`` (``chunkmill.pipeline.commands``) only parses.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema, stores
from chunkmill.pipeline import options
from chunkmill.pipeline.options import RunSettings, UsageError
from chunkmill.transforms import lineage, runstate, storage

MANIFEST = "manifest"
# How to go on, said by every refusal of a run's state.
_RECOVER = runstate.RECOVER_PRIOR


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
    # A file of no failures has nothing to join: the run reads none (and a prior without
    # failures adds no step to the graph).
    errors = tuple(
        FileSystems.join(run_folder, e["path"])
        for e in report["tables"]["errors"]
        if e.get("rows") != 0
    )
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
    path = FileSystems.join(run_folder, runstate.SUCCESS)
    if not FileSystems.exists(path):
        raise _unfinished(run_folder, name)
    try:
        return runstate.read_success(path)
    except (ValueError, UnicodeDecodeError) as e:
        raise PriorRefused(
            f"prior run {name} did not finish: its {runstate.SUCCESS} is not a valid run report "
            f"({_short(e)}); {_RECOVER}"
        ) from None


def _unfinished(run_folder: str, name: str) -> PriorRefused:
    return PriorRefused(
        f"prior run {name} did not finish (it has no {runstate.SUCCESS}), so its manifest may be "
        f"partial; {_RECOVER}"
    )


def _check_listed(path: str, entry: dict[str, Any], size: int | None, name: str) -> None:
    """A file ``_SUCCESS`` lists is there, with the size and row count it records, and a
    manifest footer."""
    rel = entry["path"]
    if size is None:
        raise PriorRefused(
            f"prior run {name} is missing {rel} listed in its {runstate.SUCCESS}; restore it, or "
            f"{_RECOVER}"
        )
    if entry["bytes"] is not None and size != entry["bytes"]:
        raise PriorRefused(
            f"prior run {name}'s {rel} has {size} bytes but its {runstate.SUCCESS} records "
            f"{entry['bytes']} (cut short or replaced); restore it, or {_RECOVER}"
        )
    rows = check_footer(path)
    if entry["rows"] is not None and rows != entry["rows"]:
        raise PriorRefused(
            f"prior run {name}'s {rel} holds {rows} rows but its {runstate.SUCCESS} records "
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
    if not fits(found, schema.MANIFEST):
        other = [n for n, s in schema.TABLES.items() if fits(found, s)]
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
        "embeddings keyed by hash can be reused; still refused if it would drop more than "
        "--max-removed-ratio of LATEST's documents), or use the chunkmill release that wrote it"
    )


def fits(found: pa.Schema, table: pa.Schema) -> bool:
    """``found`` is the shape of ``table``, or of ``table`` as an older schema version wrote
    it (without nullable columns added since, which read as null)."""
    return same_shape(found, table) or same_shape(
        found, schema.as_written_before(table, found.names)
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
    return FileSystems.exists(FileSystems.join(folder, runstate.SUCCESS))


def _is_run_folder(folder: str) -> bool:
    """Under ``OUTPUT/runs/``: a run that may not have finished."""
    return posixpath.basename(posixpath.dirname(folder)) == runstate.RUNS


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


# -- the checks of a command line against storage ----------------------------------------


def check_run(settings: RunSettings) -> RunSettings:
    """``settings`` (parsed, ``commands.run.parse``) checked against storage, with the
    prior proven: every bucket reachable, every input matching a file, the output writable,
    a given run id free; one line (``UsageError``) naming the flag to change otherwise."""
    prepare_filesystems(settings.beam_args)
    check_buckets(settings.inputs, settings.output, settings.billing_project)
    for pattern in settings.inputs:
        if not storage.has_match(pattern, settings.billing_project):
            raise UsageError(f"argument --input: {pattern!r} matches no file")
    check_writable(settings.output)
    # Checked here so `plan` says it too; the claim at launch is what makes it race-free.
    run_folder = runstate.run_dir(settings.output, settings.run_id)
    if settings.run_id_given and has_match(FileSystems.join(run_folder, "**")):
        raise UsageError(
            f"argument --run-id: run {settings.run_id!r} already exists in {settings.output}; "
            "choose another"
        )
    mode, manifest, prior_run_id, files, errors = resolve_prior(
        settings.prior_mode, settings.output
    )
    after = prior_run_id if mode == "auto" else latest_or_none(settings.output)
    return dataclasses.replace(
        settings,
        prior_mode=mode,
        prior_manifest=manifest,
        prior_run_id=prior_run_id,
        prior_files=files,
        prior_errors=() if settings.retry_failed else errors,
        prior_after=after,
        chain=lineage.chain_after(settings.output, after, settings.started_at),
    )


def latest_or_none(output: str) -> str | None:
    """The finished run ``LATEST`` names, or None when there is none or it cannot be read (a
    run told ``--prior-manifest`` is not stopped by a damaged LATEST: that is how to go on
    past one)."""
    try:
        latest = runstate.read_latest(output)
    except runstate.BadLatest:
        return None
    if latest is None or not _finished(runstate.run_dir(output, latest)):
        return None
    return latest


def prepare_filesystems(beam_args: Sequence[str]) -> None:
    """Beam's filesystems need the pipeline options before a pipeline exists (s3:// reads its
    endpoint and keys from them); with a GCS emulator, no credential probing."""
    from apache_beam.options.pipeline_options import PipelineOptions

    FileSystems.set_options(PipelineOptions(list(beam_args)))
    storage.use_anonymous_gcs_for_emulator()


def check_buckets(inputs: Sequence[str], output: str, billing_project: str | None) -> None:
    """Every bucket named by an input or the output exists and can be listed: otherwise one
    line naming the bucket and what was denied, before a graph is built."""
    seen: set[str] = set()
    for uri in (*inputs, output):
        if storage.kind(uri) != "object" or storage.bucket_url(uri) in seen:
            continue
        seen.add(storage.bucket_url(uri))
        flag = "--output" if uri == output else "--input"
        try:
            storage.check_bucket(uri, billing_project if flag == "--input" else None)
        except stores.StoreAccessError as e:
            raise UsageError(f"argument {flag}: {e}") from None
        except Exception as e:  # no credentials, no network: still one line
            raise UsageError(
                f"argument {flag}: cannot reach {storage.bucket_url(uri)}: "
                f"{type(e).__name__}: {stores.first_line(str(e))}"
            ) from None


def has_match(pattern: str) -> bool:
    """Whether a FileSystems glob matches anything (False when it cannot be listed)."""
    try:
        result = FileSystems.match([pattern], limits=[1])[0]
    except Exception:
        return False
    return bool(result.metadata_list)


def resolve_prior(
    mode: str, output: str
) -> tuple[str, str | None, str | None, tuple[str, ...], tuple[str, ...]]:
    """(mode, what the prior manifest is as given (a path or glob) or None, prior run id or
    None, its files, the prior run's errors files). The files are proven before they are
    used; errors files exist only for a prior given as a run."""
    if mode == "none":
        return "none", None, None, (), ()
    if mode == "auto":
        try:
            # Not "none": with LATEST unreadable, nothing would hold that run to its documents.
            prior_run = runstate.read_latest(output, alternative=runstate.OLDER_PRIOR)
        except runstate.BadLatest as e:
            raise UsageError(str(e)) from None
        if prior_run is None:
            return "auto", None, None, (), ()
        try:
            proven = prove_run(runstate.run_dir(output, prior_run), prior_run)
        except PriorRefused as e:
            raise UsageError(str(e)) from None
        check_text_store(output, prior_run)
        glob = FileSystems.join(runstate.table_dir(output, prior_run, "manifest"), "*.parquet")
        return "auto", glob, prior_run, proven.files, proven.errors
    try:
        proven = prove_path(options.absolute(mode))
    except PriorRefused as e:
        raise UsageError(f"argument --prior-manifest {mode!r}: {e}") from None
    return "path", options.absolute(mode), None, proven.files, proven.errors


def check_text_store(output: str, prior_run: str) -> None:
    """The prior run's text store, which this run adds to, is whole (its ``_TEXT`` parses and
    every file it names is there with its size): found at launch, not when the run publishes
    after chunking the whole corpus (the run checks again then)."""
    from chunkmill.transforms import textstore

    try:
        textstore.prove_run(output, prior_run)
    except (textstore.CorruptIndex, textstore.TextMissing) as e:
        raise UsageError(
            f"the text store of the prior run {prior_run} cannot be used ({e}). Restore its "
            f"{textstore.INDEX} and files, or re-run with --prior-manifest none"
        ) from None


def check_writable(output: str) -> None:
    """A local output prefix must be a folder chunkmill can write in, or one it can create:
    found now, not when the first table is written after the whole corpus is chunked.
    (An object store prefix is checked by its first write: a probe would need write access a
    plan does not.)"""
    if not stores.is_local(output):
        return
    existing = output
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UsageError(
            f"argument --output: cannot write under {output}: {existing} is a file, not a folder"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"argument --output: cannot write under {output}: {existing} is read-only")


def finished_run(output: str, run_id: str | None) -> str:
    """The finished run ``chunkmill report`` reports: ``run_id``, else the one in
    ``OUTPUT/LATEST``; one line (``UsageError``) for a run that is not there or did not
    finish (no valid ``_SUCCESS``)."""
    prepare_filesystems([])
    if run_id is None:
        try:
            run_id = runstate.read_latest(output, alternative="pass a run id as RUN")
        except runstate.BadLatest as e:
            raise UsageError(str(e)) from None
        if run_id is None:
            raise UsageError(f"no run in {output} yet; run `chunkmill run --output {output}` first")
    elif not runstate.is_run_id(run_id):
        raise UsageError(f"argument RUN: {run_id!r} is not a run id")
    success = FileSystems.join(runstate.run_dir(output, run_id), runstate.SUCCESS)
    if FileSystems.exists(success):
        try:
            runstate.read_success(success)
        except runstate.CorruptSuccess as e:
            raise UsageError(
                f"run {run_id!r} in {output} cannot be reported: its {runstate.SUCCESS} is damaged "
                f"({e}); it did not finish as far as chunkmill is concerned"
            ) from None
        return run_id
    if has_match(FileSystems.join(runstate.run_dir(output, run_id), "**")):
        raise UsageError(
            f"run {run_id!r} in {output} did not finish (it has no {runstate.SUCCESS}); "
            "there is nothing to report"
        )
    try:
        named = runstate.read_latest(output)
        hint = f" (LATEST names {named!r})" if named else ""
    except runstate.BadLatest as e:
        hint = f" ({e})"
    raise UsageError(f"no run {run_id!r} in {output}{hint}")
