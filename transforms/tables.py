"""The edges: listing sources, reading the prior manifest, writing the run's tables and
publishing the run. Everything goes through Beam's FileSystems, so local paths and gs://
behave the same.

Layout of one run (docs/design.md, the output contract)::

    OUTPUT/runs/RUN_ID/{chunks,manifest,removed,errors}/part-*.parquet
    OUTPUT/runs/RUN_ID/_SUCCESS     JSON run report, written after every table is complete
    OUTPUT/LATEST                   RUN_ID of the last successful run, replaced last
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from chunkmill import schema, stores
from chunkmill.items import PriorError
from chunkmill.refusal import RunRefused
from chunkmill.transforms import lineage, prior, storage, textstore

# The names of the run-state files live with their defensive readers (transforms/runstate.py).
from chunkmill.transforms.runstate import LATEST as LATEST
from chunkmill.transforms.runstate import RUNS as RUNS
from chunkmill.transforms.runstate import SUCCESS as SUCCESS
from chunkmill.transforms.runstate import CorruptSuccess, read_bytes, read_success, run_order
from chunkmill.transforms.runstate import run_dir as run_dir


def table_dir(output: str, run_id: str, table: str) -> str:
    return FileSystems.join(run_dir(output, run_id), table)


class ListFiles(beam.PTransform):
    """Glob patterns → one element per object a pattern matches: a ``SourceFile`` to read, a
    ``Skipped`` object left out on purpose (a format that is not text, an --exclude match, a
    FIFO or device, a symlink leading out of the input), or a ``ListingError`` (a folder that
    could not be listed, a name that cannot be recorded). ``ChunkCorpus`` takes all three.

    Globs read as a shell's with globstar (``storage.glob_regex``), and a folder
    means everything under it. ``include``/``exclude`` are globs matched against the path
    relative to the pattern's fixed folder (``storage.ListingRules``). Nothing
    under ``exclude_prefix`` (the output location) is listed, by path or by real path, nor
    are directory markers. Listing is sharded by prefix (``storage.plan``) and the
    shards redistributed, so a large bucket is listed by many workers.
    ``billing_project`` is the project billed for requester-pays buckets.

    Not de-duplicated and not redistributed: an object two patterns match comes twice, and
    the consumer groups by document next. ``ChunkCorpus``'s join by doc_id keeps one listing
    of each object and spreads the documents across workers, so the expensive per-document
    work fans out, without two more shuffles of every listed object here.
    """

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        exclude_prefix: str | None = None,
        billing_project: str | None = None,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        follow_symlinks: bool = False,
    ) -> None:
        super().__init__()
        if not patterns:
            raise ValueError("ListFiles needs at least one pattern")
        self._patterns = list(patterns)
        self._rules = storage.ListingRules(
            include=tuple(include),
            exclude=tuple(exclude),
            follow_symlinks=follow_symlinks,
            output=exclude_prefix,
        )
        self._billing_project = billing_project

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            # Not reshuffled by Create: the shards are, next.
            | "Patterns" >> beam.Create(self._patterns, reshuffle=False)
            | "Shard"
            >> beam.FlatMap(storage.plan, billing_project=self._billing_project, rules=self._rules)
            | "SpreadShards" >> beam.Reshuffle()
            | "ListShard" >> beam.FlatMap(storage.list_shard, rules=self._rules)
        )


class ReadManifest(beam.PTransform):
    """The parts of the prior run's manifest (``PriorPart``: one row group of one file),
    redistributed so workers read them in parallel; an empty PCollection when ``files`` is
    empty. ``files`` are exactly the manifest's files (those the prior run's ``_SUCCESS``
    lists, proven before the run: ``chunkmill.pipeline.preflight``), never a glob, so a stray file
    beside them is not read. The rows themselves are read by ``ChunkCorpus``
    (``prior``)."""

    def __init__(self, files: Sequence[str]) -> None:
        super().__init__()
        self._files = list(files)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if not self._files:
            return pbegin | "NoPriorManifest" >> beam.Create([])
        return (
            pbegin
            | "Files" >> beam.Create(self._files, reshuffle=False)  # the parts are, next
            | "ListParts" >> beam.FlatMap(prior.list_parts)
            | "SpreadParts" >> beam.Reshuffle()
        )


def prior_errors(path: str) -> Iterator[tuple[str, PriorError]]:
    """``(doc_id, PriorError)`` for every row of one errors/ file of a prior run. Columns a
    file written before they existed lacks are null (such a failure is always tried again).
    A file that cannot be read costs the memory of its failures, never the run: its
    documents are tried again."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            parquet = pq.ParquetFile(f)
            present = set(parquet.schema_arrow.names)
            table = parquet.read(
                columns=[c for c in ("doc_id", *PriorError._fields) if c in present]
            )
    except Exception as e:
        logging.getLogger(__name__).warning(
            "prior errors file %s is unreadable (%s: %s); its documents are tried again",
            path,
            type(e).__name__,
            stores.first_line(str(e)),
        )
        return
    columns = {
        name: table[name].to_pylist() if name in present else None for name in PriorError._fields
    }
    for i, doc in enumerate(table["doc_id"].to_pylist()):
        yield doc, PriorError._make(None if col is None else col[i] for col in columns.values())


class ReadPriorErrors(beam.PTransform):
    """The prior run's errors/ rows as ``(doc_id, PriorError)``, one per failed document,
    read from ``paths`` (its errors files; none on a first run, or when every failure is to
    be tried again). Joined with the listing by doc_id like the prior manifest's summaries:
    a failed document not worth trying again is not read (``carryover.is_known_failure``)."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__()
        self._paths = sorted(paths)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if not self._paths:
            return pbegin | "NoPriorErrors" >> beam.Create([])
        return (
            pbegin
            | "ErrorFiles" >> beam.Create(self._paths, reshuffle=False)
            | "SpreadErrorFiles" >> beam.Reshuffle()
            | "ReadErrorFiles" >> beam.FlatMap(prior_errors)
        )


class WriteTables(beam.PTransform):
    """Writes each table of ``ChunkCorpus``'s output (``pa.Table`` elements, one row group
    each) under the run's prefix; returns the written file names (one PCollection, all
    tables).

    A DoFn per table writes a file per bundle in a temporary folder of the run, and one
    step after them names the files ``TABLE/part-SSSSS-of-NNNNN.parquet`` and removes the
    temporary folder: a few transforms where a Beam file sink per table costs a dozen each,
    which shows in the fixed cost of every run. A table with no rows gets one empty file,
    so every table of a run can be read. Pages carry CRC32 checksums, verified on every read.
    """

    def __init__(self, output: str, run_id: str, temp: str | None = None) -> None:
        super().__init__()
        self._output = output
        self._run_id = run_id
        self._temp = temp

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection:
        temp = self._temp or temp_folder(self._output, self._run_id)
        final = {name: table_dir(self._output, self._run_id, name) for name in schema.TABLES}
        written = [
            tables[name] | f"Write{name.title()}Files" >> beam.ParDo(_WriteTableFiles(name, temp))
            for name in schema.TABLES
        ]
        return (
            tuple(written)
            | "AllFiles" >> beam.Flatten()
            | "Together" >> beam.combiners.ToList()
            | "NameFiles" >> beam.FlatMap(name_table_files, temp=temp, final=final)
        )


def temp_folder(output: str, run_id: str) -> str:
    """A new temporary folder of the run: files written there before the tables are named
    (``WriteTables``), removed with everything left in it when they are."""
    return FileSystems.join(run_dir(output, run_id), f".temp-{uuid.uuid4().hex}")


class TableFile:
    """A Parquet file being written to ``path`` (any FileSystems path), with page
    checksums: the settings of Beam's Parquet sink (no compression) plus the checksums."""

    def __init__(self, path: str, table_schema: pa.Schema) -> None:
        self.path = path
        self._handle = FileSystems.create(
            path, mime_type="application/x-parquet", compression_type=CompressionTypes.UNCOMPRESSED
        )
        # Beam's own settings (no compression; lists written as Arrow names them), so the
        # files are those Beam's sink writes, plus the checksums.
        self._writer = pq.ParquetWriter(
            self._handle,
            table_schema,
            compression="none",
            use_deprecated_int96_timestamps=False,
            use_compliant_nested_type=False,
            write_page_checksum=True,
        )

    def write(self, table: pa.Table) -> None:
        """``table`` as one row group (or more, past Arrow's row-group size)."""
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()
        self._handle.close()


class _WriteTableFiles(beam.DoFn):
    """Writes the Arrow tables of a bundle of table ``name`` to one file under ``temp``;
    yields ``(name, temporary path)`` when the bundle ends. A retried bundle's file is never
    named: only the committed attempt's output reaches ``name_table_files``."""

    def __init__(self, name: str, temp: str) -> None:
        self._name = name
        self._schema = schema.TABLES[name]
        self._temp = temp

    def start_bundle(self) -> None:
        self._file: TableFile | None = None

    def process(self, table: pa.Table) -> None:
        if self._file is None:
            path = FileSystems.join(self._temp, f"{self._name}-{uuid.uuid4().hex}.parquet")
            self._file = TableFile(path, self._schema)
        self._file.write(table)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._file is not None:
            self._file.close()
            yield GlobalWindows.windowed_value((self._name, self._file.path))
        self._file = None


def name_table_files(
    files: list[tuple[str, str]], *, temp: str, final: dict[str, str]
) -> Iterator[str]:
    """Moves each table's temporary files to ``TABLE/part-SSSSS-of-NNNNN.parquet`` (in
    temporary-name order), writes one empty file for a table that has none, removes the
    temporary folder with whatever else is in it (staged occurrences) and yields every final
    path. Safe to retry: a file already moved is not moved again."""
    by_table: dict[str, list[str]] = {name: [] for name in final}
    for name, path in files:
        by_table[name].append(path)
    for name, paths in by_table.items():
        if not paths:
            empty = FileSystems.join(final[name], "part-00000-of-00001.parquet")
            if not FileSystems.exists(empty):
                TableFile(empty, schema.TABLES[name]).close()
            yield empty
            continue
        paths.sort()
        targets = [
            FileSystems.join(final[name], f"part-{i:05d}-of-{len(paths):05d}.parquet")
            for i in range(len(paths))
        ]
        moving = [(s, t) for s, t in zip(paths, targets, strict=True) if FileSystems.exists(s)]
        if moving and not FileSystems.exists(final[name]):
            FileSystems.mkdirs(final[name])  # a local folder; nothing on object stores
        if moving:
            FileSystems.rename([s for s, _ in moving], [t for _, t in moving])
        yield from targets
    # Object stores have no folders: what is left is deleted by name.
    (left,) = FileSystems.match([FileSystems.join(temp, "*")])
    if left.metadata_list:
        FileSystems.delete([m.path for m in left.metadata_list])
    if FileSystems.exists(temp):
        FileSystems.delete([temp])


def write_text(path: str, text: str) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(text.encode("utf-8"))


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def check_error_ratio(counts: dict[str, Any], max_ratio: float | None) -> None:
    """Refuses the run (``RunRefused``, one line naming the flag) when more than ``max_ratio``
    of the listed documents failed; ``None`` turns the check off. A bucket full of garbage
    must not look like a good night, nor become the state the next run diffs against."""
    listed, failed = int(counts.get("docs_listed", 0)), int(counts.get("docs_failed", 0))
    if max_ratio is None or listed == 0 or failed / listed <= max_ratio:
        return
    raise RunRefused(
        f"{failed} of {listed} listed documents failed ({failed / listed:.1%}), more than "
        f"--max-error-ratio {max_ratio:g}; the run is not published"
    )


def check_removed_ratio(counts: dict[str, Any], max_ratio: float | None) -> None:
    """Refuses the run (``RunRefused``, one line naming the flag) when it would remove more
    than ``max_ratio`` of the prior manifest's documents (``docs_removed`` and
    ``docs_emptied``, of ``docs_prior``: an emptied document loses its chunks as surely as a
    deleted one, and a mount that serves empty files empties the whole corpus);
    ``None`` turns the check off. (A run without a prior is held to the documents of LATEST's
    run instead: ``check_replaced_ratio``.) A run that
    removes most of the corpus is far more often a broken glob, a missing mount or a lost
    permission than a real deletion, and once published its removals reach every later run."""
    prior_docs = int(counts.get("docs_prior", 0))
    emptied = int(counts.get("docs_emptied", 0))
    removed = int(counts.get("docs_removed", 0)) + emptied
    if max_ratio is None or prior_docs == 0 or removed / prior_docs <= max_ratio:
        return
    of_them = f" ({emptied} of them emptied: listed, but holding no text)" if emptied else ""
    raise RunRefused(
        f"the run removes {removed} of {prior_docs} documents of the prior run{of_them} "
        f"({removed / prior_docs:.1%}), more than --max-removed-ratio {max_ratio:g}; nothing "
        "was published. If this is intended, re-run with --max-removed-ratio 1"
    )


def replaced_state(
    output: str,
    run_id: str,
    report: dict[str, Any],
    written: Sequence[str],
    max_ratio: float | None,
) -> dict[str, Any] | None:
    """What a run that did not diff against ``LATEST``'s run does to the state it replaces:
    ``{"run_id", "docs", "docs_dropped"}``, LATEST's run at launch (``prior.after``), its
    documents and how many of them have no row in this run's manifest (``written``), which a
    consumer of the state would delete. None when there is nothing to compare: the run
    diffed against LATEST's run (``check_removed_ratio`` holds it), no LATEST was named at
    launch, or the check is off (``max_ratio`` None or 1). Reads the doc_id column of both
    manifests, once, in the publishing step: only runs without LATEST as their prior
    (``--prior-manifest none`` or a path) pay it."""
    prior = report.get("prior") or {}
    after = prior.get("after")
    if max_ratio is None or max_ratio >= 1 or after is None or prior.get("run_id") == after:
        return None
    try:
        latest = read_success(FileSystems.join(run_dir(output, after), SUCCESS))
        theirs = _doc_ids(
            [
                FileSystems.join(run_dir(output, after), f["path"])
                for f in latest["tables"]["manifest"]
            ]
        )
    except (OSError, CorruptSuccess, pa.ArrowException) as e:
        raise RunRefused(
            f"the run does not diff against LATEST's run {after}, whose documents it would "
            f"replace, and that run cannot be read to compare ({type(e).__name__}: "
            f"{stores.first_line(str(e))}); nothing was published. Re-run, or re-run with "
            "--max-removed-ratio 1 to publish without comparing"
        ) from None
    prefix = FileSystems.join(run_dir(output, run_id), "manifest") + "/"
    ours = _doc_ids([p for p in written if p.startswith(prefix)])
    dropped = len(theirs) - int(pc.sum(pc.is_in(theirs, value_set=ours)).as_py() or 0)
    return {"run_id": after, "docs": len(theirs), "docs_dropped": dropped}


def _doc_ids(paths: Sequence[str]) -> pa.Array:
    """The distinct doc_ids of manifest files, made distinct a batch at a time: what is held
    is one id per document, not one per chunk."""
    parts: list[pa.Array] = []
    held = distinct = 0
    for batch in read_parquet_batches(paths, ["doc_id"]):
        parts.append(pc.unique(batch["doc_id"]))
        held += len(parts[-1])
        if held > 2 * distinct + 1_000_000:  # merged when the parts hold twice the distinct
            parts = [pc.unique(pa.chunked_array(parts, pa.string()))]
            held = distinct = len(parts[0])
    return pc.unique(pa.chunked_array(parts, pa.string()))


def check_replaced_ratio(
    replaced: dict[str, Any] | None, report: dict[str, Any], max_ratio: float | None
) -> None:
    """Refuses a run that did not diff against LATEST's run (``--prior-manifest none`` or a
    path) when it would drop more than ``max_ratio`` of the documents of LATEST's run
    (``replaced_state``): a run without a prior removes nothing by its own counts, yet once
    LATEST, every document it lacks is gone from the state, and from the index synced to
    it."""
    if replaced is None or max_ratio is None or replaced["docs"] == 0:
        return
    docs, dropped = replaced["docs"], replaced["docs_dropped"]
    if dropped / docs <= max_ratio:
        return
    prior = report.get("prior") or {}
    base = (
        "nothing (--prior-manifest none)"
        if prior.get("mode") == "none"
        else f"--prior-manifest {prior.get('manifest')}"
    )
    raise RunRefused(
        f"the run diffs against {base}, not LATEST's run {replaced['run_id']}, and holds no "
        f"row of {dropped} of its {docs} documents ({dropped / docs:.1%}), more than "
        f"--max-removed-ratio {max_ratio:g}: published, they would be gone from the state and "
        "from every index synced to it; nothing was published. If this is intended, re-run "
        "with --max-removed-ratio 1"
    )


def table_files(base: str, written: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every table's files among ``written`` (paths under the run folder ``base``), sorted,
    each with its row count (from its Parquet footer) and its size in bytes: what
    ``_SUCCESS`` records so that a reader can prove a table whole before trusting it."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in schema.TABLES:
        prefix = FileSystems.join(base, name) + "/"
        paths = sorted(p for p in written if p.startswith(prefix))
        sizes = {}
        if paths:
            for result in FileSystems.match(paths):
                for meta in result.metadata_list:
                    sizes[meta.path] = meta.size_in_bytes
        tables[name] = [
            {"path": p[len(base) + 1 :], "rows": footer_rows(p), "bytes": sizes[p]} for p in paths
        ]
    return tables


def footer_rows(path: str) -> int:
    """The row count a Parquet file's footer records (only the footer is read)."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


@dataclass(frozen=True)
class PublishPolicy:
    """When a finished run is refused instead of published: more than ``max_error_ratio`` of
    its listed documents failed, or it would remove more than ``max_removed_ratio`` of the
    prior's documents, or, when it did not diff against LATEST's run, drop more than that
    share of LATEST's documents (``None``: that check is off)."""

    max_error_ratio: float | None = None
    max_removed_ratio: float | None = None


def publish(
    _: Any,
    counts: dict[str, Any],
    written: list[str],
    output: str,
    run_id: str,
    report: dict[str, Any],
    policy: PublishPolicy = PublishPolicy(),
) -> str:
    """Adds the run's new text to the text store and writes its ``_TEXT``
    (``textstore.write_run_text``), writes ``_SUCCESS`` (the run report, with every table's
    files, rows and bytes), then
    points ``LATEST`` at the newest finished run, which is this one unless a run that started
    later has already finished. Idempotent, so a retried bundle republishes the same thing.
    Publishes nothing (``RunRefused``) when ``policy`` refuses the run."""
    check_error_ratio(counts, policy.max_error_ratio)
    check_removed_ratio(counts, policy.max_removed_ratio)
    replaced = replaced_state(output, run_id, report, written, policy.max_removed_ratio)
    check_replaced_ratio(replaced, report, policy.max_removed_ratio)
    base = run_dir(output, run_id)
    full = {**report, "counts": counts, "tables": table_files(base, written)}
    if replaced is not None:
        full["prior"] = {**full["prior"], "replaces": replaced}
    # The run's text joins the store, and its _TEXT names it, before _SUCCESS publishes it.
    textstore.write_run_text(output, run_id, report, written)
    success = FileSystems.join(base, SUCCESS)
    # Written beside and renamed over (a rename is atomic on a local disk; an object store
    # makes an object visible only once whole), so a half-written _SUCCESS is never read.
    staging = f"{success}.tmp"
    write_text(staging, json.dumps(full, indent=2, sort_keys=True) + "\n")
    FileSystems.rename([staging], [success])
    point_latest_at_newest(output, run_id)
    return run_id


# Two runs may finish at the same time (a slow night overlapping the next, a backfill beside
# the schedule). chunkmill does not lock the output prefix: a lock on object storage needs a
# conditional write FileSystems cannot express, and a dead run would hold it. Instead
# publishing is safe under races: LATEST is not "the run that published last" but "the
# newest finished run" (the last of runs/*/_SUCCESS in runstate.run_order), and every
# publisher re-checks after its own write. Whoever writes LATEST last then lists after that
# write, so it sees every _SUCCESS written before it and repairs LATEST if a newer run
# exists; a run that finishes later publishes later. So a stale run can never leave LATEST
# naming an older run than one already finished (tests/unit/test_publish.py).
# A round repeats only when a newer run published meanwhile; the bound stops a publisher
# from chasing an endless stream of them (the last of those fixes LATEST itself).
_PUBLISH_ROUNDS = 10


def finished_runs(output: str) -> list[tuple[str, str]]:
    """``(started_at, run_id)`` of every run under ``output`` whose ``_SUCCESS`` is valid
    (``runstate.read_success``), oldest first (``runstate.run_order``: by their chain, so a
    run comes after every run it descends from, whatever the clocks said): the candidates
    for ``LATEST``."""
    pattern = FileSystems.join(output, RUNS, "*", SUCCESS)
    runs = []
    for meta in FileSystems.match([pattern])[0].metadata_list:
        run_id = meta.path.rstrip("/").split("/")[-2]
        try:
            report = read_success(meta.path)
        except CorruptSuccess:
            # Damaged, or another publisher is writing it (a local file appears before its
            # content). Skipping is safe: that publisher lists again after its own write.
            continue
        started_at = str(report["started_at"])
        runs.append((run_order(started_at, run_id, lineage.chain_block(report)), started_at))
    return [(started_at, order[-1]) for order, started_at in sorted(runs)]


def point_latest_at_newest(output: str, run_id: str) -> str:
    """Makes ``LATEST`` name the newest finished run (which may not be ``run_id``); returns
    the run it names."""
    latest = FileSystems.join(output, LATEST)
    for _ in range(_PUBLISH_ROUNDS):
        newest = finished_runs(output)[-1][1]
        # Written beside and renamed over, so a reader never sees a half-written LATEST.
        staging = f"{latest}.{run_id}.tmp"
        write_text(staging, newest + "\n")
        FileSystems.rename([staging], [latest])
        if finished_runs(output)[-1][1] == newest:
            break
    if newest != run_id:
        logging.getLogger(__name__).warning(
            "run %s finished after the newer run %s; LATEST keeps naming %s", run_id, newest, newest
        )
    return newest


class PublishRun(beam.PTransform):
    """Runs once, after every table is written (the side inputs make it wait)."""

    def __init__(
        self,
        output: str,
        run_id: str,
        report: dict[str, Any],
        policy: PublishPolicy = PublishPolicy(),
    ) -> None:
        super().__init__()
        self._output, self._run_id, self._report = output, run_id, report
        self._policy = policy

    def expand(self, inputs: dict[str, beam.PCollection]) -> beam.PCollection:
        return (
            inputs["counts"].pipeline
            | "Once" >> beam.Create([None])
            | "WriteSuccessAndLatest"
            >> beam.Map(
                publish,
                counts=beam.pvalue.AsSingleton(inputs["counts"]),
                written=beam.pvalue.AsList(inputs["written"]),
                output=self._output,
                run_id=self._run_id,
                report=self._report,
                policy=self._policy,
            )
        )


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
