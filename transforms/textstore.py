"""The current text store: the text of every live chunk hash, readable from a published run,
grown by what is new each night and compacted by ``runs gc`` (docs/text-store.md)::

    OUTPUT/text/RUN_ID/text-K.parquet     the text a run added: one row per hash new to the store
    OUTPUT/text/RUN_ID/dead-K.parquet     the store's dead hashes after that run (hashes only)
    OUTPUT/text/gc-STAMP/text-NNNNN.parquet   live text rewritten by ``runs gc``
    OUTPUT/runs/RUN_ID/_TEXT              JSON index: the exact text files and dead file of
                                          the run's state, written before its _SUCCESS

The files an index names hold every hash of the run's manifest once, plus the hashes of its
dead file (text no current chunk has, kept until compaction); no hash twice. A reader takes
the files the index names, never a glob, and leaves out the dead hashes
(``live_text``). ``_TEXT`` is replaced only whole (written beside, renamed over).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema
from chunkmill.refusal import RunRefused
from chunkmill.transforms import parquet_io, runstate

TEXT = "text"
INDEX = "_TEXT"
FORMAT = 1
# runs gc rewrites LATEST's text when more than this share of the store's rows is dead text
# (docs/text-store.md: reading a quarter more than needed vs rewriting everything) ...
COMPACT_DEAD_SHARE = 0.25
# ... or when its state is spread over more files than this (one per night that added text).
COMPACT_MAX_FILES = 64
# Rows per file written by compaction.
COMPACT_FILE_ROWS = 1_000_000
# Rounds a publisher tries when runs gc compacts the prior's text meanwhile.
_PUBLISH_ROUNDS = 5
# The most files of a run's text written where its rows were decided (one per bundle) that
# its index names as they are; more (a run of many workers) are gathered into one file, so
# that a night adds a file to the store, not one per bundle (COMPACT_MAX_FILES).
NAMED_AS_WRITTEN = 8

TEXT_SCHEMA = pa.schema(
    [
        pa.field("chunk_hash", pa.string(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("text_with_context", pa.large_string(), nullable=True),
    ],
    metadata=schema.CHUNKS.metadata,
)
DEAD_SCHEMA = pa.schema(
    [pa.field("chunk_hash", pa.string(), nullable=False)], metadata=schema.CHUNKS.metadata
)


class CorruptIndex(ValueError):
    """A ``_TEXT`` that is not a text-store index (damaged, or not chunkmill's)."""


class TextMissing(OSError):
    """The text of some live hashes is in no file the index names."""


@dataclass(frozen=True)
class TextIndex:
    """What ``_TEXT`` says: the text files (``{"path", "rows", "bytes"}``, paths relative to
    OUTPUT, under ``text/``) and the dead file (or None) of one run's state."""

    run_id: str
    files: tuple[dict[str, Any], ...]
    dead: dict[str, Any] | None

    @property
    def rows(self) -> int:
        return sum(int(f["rows"]) for f in self.files)

    @property
    def dead_rows(self) -> int:
        return int(self.dead["rows"]) if self.dead else 0

    @property
    def live(self) -> int:
        return self.rows - self.dead_rows

    def paths(self, output: str) -> list[str]:
        return [FileSystems.join(output, f["path"]) for f in self.files]

    def named(self) -> set[str]:
        """Every file the index names, relative to OUTPUT."""
        return {f["path"] for f in self.files} | ({self.dead["path"]} if self.dead else set())

    def to_json(self) -> str:
        body = {
            "format": FORMAT,
            "run_id": self.run_id,
            "files": list(self.files),
            "dead": self.dead,
            "rows": self.rows,
            "live": self.live,
        }
        return json.dumps(body, indent=1, sort_keys=True) + "\n"


def _entry(value: Any) -> dict[str, Any]:
    path = value.get("path") if isinstance(value, dict) else None
    if (
        not isinstance(path, str)
        or not path.startswith(TEXT + "/")
        or ".." in path.split("/")
        or not all(type(value.get(k)) is int and value[k] >= 0 for k in ("rows", "bytes"))
    ):
        raise CorruptIndex(f"an entry is not a file of {TEXT}/ with rows and bytes: {value!r}")
    return {"path": path, "rows": value["rows"], "bytes": value["bytes"]}


def parse_index(data: bytes) -> TextIndex:
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptIndex(f"not JSON ({type(e).__name__})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CorruptIndex("not a text-store index of format 1")
    files = raw.get("files")
    if not isinstance(files, list) or not isinstance(raw.get("run_id"), str):
        raise CorruptIndex("no run_id or files")
    dead = raw.get("dead")
    return TextIndex(
        run_id=raw["run_id"],
        files=tuple(_entry(f) for f in files),
        dead=None if dead is None else _entry(dead),
    )


def index_path(output: str, run_id: str) -> str:
    return FileSystems.join(runstate.run_dir(output, run_id), INDEX)


def read_index(output: str, run_id: str) -> TextIndex | None:
    """The index of a run, or None when it has none (a run of an older release, or one whose
    prior was a manifest from elsewhere). Raises ``CorruptIndex``; I/O errors propagate."""
    path = index_path(output, run_id)
    if not FileSystems.exists(path):
        return None
    return parse_index(runstate.read_bytes(path))


def write_index(output: str, run_id: str, index: TextIndex) -> None:
    """Writes ``_TEXT`` beside and renames it over, so a reader sees the old index or the new
    one, whole."""

    path = index_path(output, run_id)
    staging = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    runstate.write_text(staging, index.to_json())
    FileSystems.rename([staging], [path])


def _hashes(paths: Sequence[str]) -> pa.Array:

    parts = [c for t in parquet_io.read_parquet_batches(paths, ["chunk_hash"]) for c in t[0].chunks]
    return pc.unique(pa.chunked_array(parts, pa.string()))


def dead_hashes(output: str, index: TextIndex) -> pa.Array:
    if index.dead is None:
        return pa.array([], pa.string())
    return _hashes([FileSystems.join(output, index.dead["path"])])


def live_text(output: str, index: TextIndex) -> Iterator[pa.Table]:
    """The text of every live hash of the index's state (``TEXT_SCHEMA``), a batch at a time:
    the rows of its files without its dead hashes. ``parquet_io.UnreadableTable`` names a file
    that is gone or damaged."""

    dead = dead_hashes(output, index)
    for batch in parquet_io.read_parquet_batches(index.paths(output), TEXT_SCHEMA.names):
        batch = batch.cast(TEXT_SCHEMA)
        if len(dead):
            batch = batch.filter(pc.invert(pc.is_in(batch["chunk_hash"], value_set=dead)))
        yield batch


# ---------------------------------------------------------------------------------------------
# Writing a run's text (in its publishing step)


def _file_entry(output: str, path: str, rows: int) -> dict[str, Any]:
    (meta,) = FileSystems.match([path])[0].metadata_list
    return {"path": path[len(output.rstrip("/")) + 1 :], "rows": rows, "bytes": meta.size_in_bytes}


def _write(path: str, table_schema: pa.Schema, batches: Iterator[pa.Table]) -> int:
    """Writes the non-empty ``batches`` to ``path``; the rows written (no file when 0)."""

    file = None
    rows = 0
    for batch in batches:
        if not len(batch):
            continue
        if file is None:
            file = parquet_io.TableFile(path, table_schema)
        file.write(batch)
        rows += len(batch)
    if file is not None:
        file.close()
    return rows


def _not_dead(
    batches: Iterator[pa.Table], dead: pa.Array, hashes: list[pa.Array]
) -> Iterator[pa.Table]:
    """``batches`` as ``TEXT_SCHEMA`` without the rows of ``dead`` hashes; every hash read,
    dead or not, is added to ``hashes``."""
    for batch in batches:
        hashes.extend(batch["chunk_hash"].chunks)
        alive = pc.invert(pc.is_in(batch["chunk_hash"], value_set=dead))
        yield batch.cast(TEXT_SCHEMA).filter(alive)


_EMPTY = TextIndex(run_id="", files=(), dead=None)


def base_index(output: str, report: dict[str, Any]) -> TextIndex | None:
    """The store state a run adds to: its prior run's index, the empty store for a run
    without a prior (its chunks/ holds every hash), None when there is none to add to (a
    prior manifest from elsewhere, or a prior run written before the store existed)."""
    prior = report.get("prior") or {}
    if prior.get("run_id"):
        return read_index(output, str(prior["run_id"]))
    if prior.get("mode") in ("none", "auto"):
        return _EMPTY
    return None


def run_folder(output: str, run_id: str) -> str:
    """``OUTPUT/text/RUN_ID``: the text files run ``run_id`` adds to the store."""
    return FileSystems.join(output, TEXT, run_id)


def _run_text_paths(output: str, run_id: str, written: Sequence[str]) -> list[str]:
    """The paths among ``written`` under the run's ``run_folder``, sorted."""
    folder = run_folder(output, run_id) + "/"
    return sorted(p for p in written if p.startswith(folder))


def discard_run_text(
    output: str, run_id: str, written: Sequence[str], index: TextIndex | None = None
) -> None:
    """Deletes the run's text files written where its rows were decided (those of
    ``written`` under ``run_folder``) that ``index`` does not name: all of them without one
    (a refused run, a run with no store to add to), and with one those whose text went into
    a file written again (gathered, or without revived hashes)."""
    named = set() if index is None else {FileSystems.join(output, f["path"]) for f in index.files}
    unnamed = [
        p
        for p in _run_text_paths(output, run_id, written)
        if p not in named and FileSystems.exists(p)
    ]
    if unnamed:
        FileSystems.delete(unnamed)


def written_text(
    output: str, run_id: str, written: Sequence[str]
) -> tuple[list[str], list[dict[str, Any]] | None]:
    """The text files of the run's chunks/ rows written where they were decided (the paths
    among ``written`` under ``run_folder``), and their entries for an index when they hold
    exactly the rows of its chunks/ (None otherwise: its text is read from chunks/)."""
    paths = _run_text_paths(output, run_id, written)
    prefix = FileSystems.join(runstate.run_dir(output, run_id), "chunks") + "/"
    chunks_rows = sum(parquet_io.footer_rows(p) for p in written if p.startswith(prefix))
    rows = [parquet_io.footer_rows(p) for p in paths]
    if sum(rows) != chunks_rows:
        return paths, None
    return paths, [_file_entry(output, p, n) for p, n in zip(paths, rows, strict=True) if n]


def write_run_text(
    output: str, run_id: str, report: dict[str, Any], written: Sequence[str]
) -> TextIndex | None:
    """Adds a finished run's new text to the store and writes its ``_TEXT``, before its
    ``_SUCCESS``: the hashes of its chunks/ the store lacks (those that were dead in it are
    live again, not written twice), and the dead hashes of its state (the prior's, less
    those, plus its retired/). Then reads the prior's index again: if ``runs gc`` compacted
    it meanwhile, does it all again on the compacted one (``runs gc`` keeps every file an
    index names, so one read after this one's is written is enough). None, writing nothing,
    when the run has no store to add to (``base_index``), unless its prior run was written
    before the store existed: then the store starts here (``start_store``).

    The text of chunks/ written where its rows were decided (``written_text``) is named as
    it is when none of its hashes is dead in the base (always so for a run without a prior)
    and it is in at most ``NAMED_AS_WRITTEN`` files; otherwise, and when there is none, the
    text is read (from those files, or from chunks/) and written again as one file, without
    the revived hashes."""
    base_path = None
    prior = (report.get("prior") or {}).get("run_id")
    base = base_index(output, report)
    folder = run_folder(output, run_id)
    run = runstate.run_dir(output, run_id)

    def of(table: str) -> list[str]:
        prefix = FileSystems.join(run, table) + "/"
        return sorted(p for p in written if p.startswith(prefix))

    text_paths, text_entries = written_text(output, run_id, written)
    if base is None:
        # No store to add to, or one started from chunks/: the run's text files are not named.
        discard_run_text(output, run_id, written)
        return start_store(output, run_id, of("manifest"), of("chunks")) if prior else None
    base_path = index_path(output, str(prior)) if prior else None
    sources = of("chunks") if text_entries is None else text_paths
    text_hashes: pa.Array | None = None  # of the text files, read once when something is dead

    for attempt in range(_PUBLISH_ROUNDS):
        seen = runstate.read_bytes(base_path) if base_path else b""
        if base_path:
            try:
                base = parse_index(seen)
                prove(output, base)
            except (CorruptIndex, TextMissing) as e:
                raise RunRefused(
                    f"the text store of the prior run {prior} cannot be used ({e}); nothing "
                    f"was published. Restore its {INDEX} and files, or re-run with "
                    "--prior-manifest none"
                ) from None
        old_dead = dead_hashes(output, base)
        files = list(base.files)
        if text_entries is not None and len(old_dead) and text_hashes is None:
            text_hashes = _hashes(text_paths) if text_paths else pa.array([], pa.string())
        new = pa.array([], pa.string()) if text_hashes is None else text_hashes
        if (
            text_entries is not None
            and len(text_entries) <= NAMED_AS_WRITTEN
            and not pc.any(pc.is_in(old_dead, value_set=new)).as_py()
        ):
            # None of its hashes is dead in the base: the text written where it was decided
            # is the run's, named as it is.
            files += text_entries
        else:
            text_path = FileSystems.join(folder, f"text-{attempt}.parquet")
            run_hashes: list[pa.Array] = []  # every hash of chunks/, gathered by the one read
            added = _write(
                text_path,
                TEXT_SCHEMA,
                _not_dead(
                    parquet_io.read_parquet_batches(sources, TEXT_SCHEMA.names),
                    old_dead,
                    run_hashes,
                ),
            )
            if added:
                files.append(_file_entry(output, text_path, added))
            new = pc.unique(pa.chunked_array(run_hashes, pa.string()))
        retired = _hashes(of("retired"))
        dead = base.dead
        revived = pc.is_in(old_dead, value_set=new)
        if len(retired) or pc.any(revived).as_py():
            still = old_dead.filter(pc.invert(revived))
            dead_table = pa.table(
                {"chunk_hash": pa.concat_arrays([still, retired.cast(pa.string())])},
                schema=DEAD_SCHEMA,
            )
            dead_path = FileSystems.join(folder, f"dead-{attempt}.parquet")
            if len(dead_table):
                _write(dead_path, DEAD_SCHEMA, iter([dead_table]))
                dead = _file_entry(output, dead_path, len(dead_table))
            else:
                dead = None
        index = TextIndex(run_id=run_id, files=tuple(files), dead=dead)
        write_index(output, run_id, index)
        if not base_path or runstate.read_bytes(base_path) == seen:
            discard_run_text(output, run_id, written, index)
            return index
    raise RuntimeError(
        f"the text of run {prior} was rewritten {_PUBLISH_ROUNDS} times while run {run_id} "
        "published; nothing was published, re-run"
    )


def prove_run(output: str, run_id: str, rounds: int = 3) -> None:
    """Proves the index of run ``run_id`` (``prove``), if it has one. A file missing because
    ``runs gc`` compacted the store meanwhile is not damage: the index changed, so it is read
    and proven again, ``rounds`` times at most. Raises ``CorruptIndex`` or ``TextMissing``."""
    path = index_path(output, run_id)
    for _ in range(rounds):
        if not FileSystems.exists(path):
            return  # a run of an older release, or one whose prior came from elsewhere
        seen = runstate.read_bytes(path)
        try:
            prove(output, parse_index(seen))
            return
        except TextMissing:
            if runstate.read_bytes(path) == seen:
                raise
    raise TextMissing(f"{path} was rewritten {rounds} times while it was read")


def prove(output: str, index: TextIndex) -> None:
    """Every file ``index`` names is there with the size it records; ``TextMissing``
    names the first that is not."""
    entries = [*index.files, *([index.dead] if index.dead else [])]
    if not entries:
        return
    paths = [FileSystems.join(output, e["path"]) for e in entries]
    sizes: dict[str, int] = {}
    try:
        results = FileSystems.match(paths)
    except Exception:  # a store that raises for a path matching nothing: one at a time
        results = []
        for path in paths:
            try:
                results += FileSystems.match([path])
            except Exception:
                continue
    for result in results:
        for meta in result.metadata_list:
            sizes[meta.path] = meta.size_in_bytes
    for entry, path in zip(entries, paths, strict=True):
        if sizes.get(path) != entry["bytes"]:
            raise TextMissing(f"{entry['path']} is missing or not of {entry['bytes']} bytes")


def start_store(
    output: str, run_id: str, manifest: Sequence[str], chunks: Sequence[str]
) -> TextIndex | None:
    """The store's first state, for a run whose prior run was written before the store
    existed: the text of every hash of its manifest, from its own chunks/ and those of the
    finished runs before it (newest first), into ``text/RUN_ID/``, once. None, writing no
    index, when some text is in no run's chunks/ (a run folder deleted by hand): readers
    then read the runs' chunks/ as before."""
    from chunkmill.transforms import publish  # imports this module

    sources = list(chunks)
    for _, other in reversed(publish.finished_runs(output)):
        if other == run_id:
            continue
        try:
            report = runstate.read_success(
                FileSystems.join(runstate.run_dir(output, other), runstate.SUCCESS)
            )
        except (runstate.CorruptSuccess, OSError):
            continue
        base = runstate.run_dir(output, other)
        sources += [FileSystems.join(base, f["path"]) for f in report["tables"]["chunks"]]
    needed = _hashes(manifest)
    path = FileSystems.join(output, TEXT, run_id, "text-start.parquet")

    def found() -> Iterator[pa.Table]:
        nonlocal needed
        for batch in parquet_io.read_parquet_batches(sources, TEXT_SCHEMA.names):
            if not len(needed):
                return
            batch = batch.cast(TEXT_SCHEMA).filter(pc.is_in(batch["chunk_hash"], value_set=needed))
            needed = needed.filter(pc.invert(pc.is_in(needed, value_set=batch["chunk_hash"])))
            yield batch

    rows = _write(path, TEXT_SCHEMA, found())
    if len(needed):
        if rows:
            FileSystems.delete([path])
        return None
    files = (_file_entry(output, path, rows),) if rows else ()
    index = TextIndex(run_id=run_id, files=files, dead=None)
    write_index(output, run_id, index)
    return index


# ---------------------------------------------------------------------------------------------
# Compaction and sweeping (runs gc)


def needs_compaction(index: TextIndex) -> str | None:
    """Why ``runs gc`` should rewrite the index's text, or None."""
    if index.rows and index.dead_rows / index.rows > COMPACT_DEAD_SHARE:
        return f"{index.dead_rows} of its {index.rows} texts are dead"
    if len(index.files) > COMPACT_MAX_FILES:
        return f"its text is in {len(index.files)} files"
    return None


def compact(output: str, run_id: str, index: TextIndex) -> TextIndex:
    """Rewrites the live text of ``run_id``'s state into new files under
    ``text/gc-STAMP/``, then replaces its ``_TEXT`` with one naming them (no dead file). The
    files it named before are left for ``sweep``."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = FileSystems.join(output, TEXT, f"gc-{stamp}-{uuid.uuid4().hex[:8]}")
    files: list[dict[str, Any]] = []
    pending: list[pa.Table] = []
    held = 0

    def flush() -> None:
        nonlocal pending, held
        path = FileSystems.join(folder, f"text-{len(files):05d}.parquet")
        rows = _write(path, TEXT_SCHEMA, iter(pending))
        if rows:
            files.append(_file_entry(output, path, rows))
        pending, held = [], 0

    for batch in live_text(output, index):
        pending.append(batch)
        held += len(batch)
        if held >= COMPACT_FILE_ROWS:
            flush()
    flush()
    compacted = TextIndex(run_id=run_id, files=tuple(files), dead=None)
    if compacted.live != index.live:
        raise TextMissing(f"compaction read {compacted.live} texts of {index.live}")
    write_index(output, run_id, compacted)
    return compacted


@dataclass(frozen=True)
class Sweep:
    deleted: list[str]  # relative to OUTPUT
    kept: int


def sweep(output: str, *, deleting: Sequence[str] = (), dry_run: bool = False) -> Sweep:
    """Deletes every file under ``text/`` that no ``_TEXT`` of any run folder names, except
    under ``text/RUN_ID/`` while ``runs/RUN_ID/`` has no ``_SUCCESS`` (a run that may be
    writing its text). ``deleting``: runs about to be deleted (a dry run), whose indexes do
    not count. The store's files are listed first, then the runs: a run whose text was
    listed had claimed its folder before (so its index or its unfinished folder is seen),
    and a file written after the listing is not deleted. Nothing is deleted when an index
    cannot be read."""
    base = output.rstrip("/")
    start = len(base) + 1
    root = FileSystems.join(output, TEXT) + "/"
    files = [
        m.path[start:]
        for m in FileSystems.match([FileSystems.join(output, TEXT, "**")])[0].metadata_list
        if m.path.startswith(root)
    ]
    runs_root = FileSystems.join(output, runstate.RUNS) + "/"
    by_run: dict[str, set[str]] = {}
    for meta in FileSystems.match([FileSystems.join(output, runstate.RUNS, "**")])[0].metadata_list:
        if meta.path.startswith(runs_root):
            run, _, name = meta.path[len(runs_root) :].partition("/")
            if run not in deleting:
                by_run.setdefault(run, set()).add(name)
    named: set[str] = set()
    for run, names in by_run.items():
        if INDEX in names:
            try:
                named |= parse_index(runstate.read_bytes(index_path(output, run))).named()
            except (CorruptIndex, OSError):
                return Sweep([], len(files))  # nothing can be shown dead
    writing = tuple(
        f"{TEXT}/{run}/" for run, names in by_run.items() if runstate.SUCCESS not in names
    )
    dead = sorted(f for f in files if f not in named and not f.startswith(writing))
    if dead and not dry_run:
        FileSystems.delete([FileSystems.join(output, f) for f in dead])
        _remove_empty_folders(output, dead)
    return Sweep(dead, len(files) - len(dead))


def _remove_empty_folders(output: str, deleted: Sequence[str]) -> None:
    """Local disk: the folders under text/ that deleting left empty (object stores have
    none)."""
    import os

    from chunkmill import stores

    root = stores.local_path(output)
    if root is None:
        return
    for folder in sorted({f.rsplit("/", 1)[0] for f in deleted}, reverse=True):
        local = os.path.join(root, folder)
        with contextlib.suppress(OSError):
            os.rmdir(local)
