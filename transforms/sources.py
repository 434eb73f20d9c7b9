"""What a run reads at its edges: the listing of its sources (``ListFiles``), the prior
manifest's parts (``ReadManifest``) and the prior run's failures (``ReadPriorErrors``), each a
composite that starts from the pipeline, as Beam's own ``io`` reads do."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from chunkmill import ids, stores
from chunkmill.items import (
    Listed,
    ListedDocs,
    ListingError,
    PriorError,
    PriorPart,
    Skipped,
    SourceFile,
    SourceFiles,
    source_version,
)
from chunkmill.redact import redact_uris
from chunkmill.transforms import prior, storage

# The listing's documents as they leave it: Arrow rows by doc-id bucket, not an element
# each. A document is known by its redacted URI (``chunkmill.redact``): a re-signed URL of the
# same object is the same document, and no credential enters its doc_id. The listing's real
# URI travels on, to be read from.
LISTING = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("uri", pa.string(), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("version", pa.string()),
    ]
)
# Listed documents (~150 bytes each) a bundle holds before sending them on, cut by bucket:
# enough that a bucket's share travels in few messages, small enough to bound the buffer.
LISTING_HOLD = 20_000


def listing_table(
    uris: Sequence[str], sizes: Sequence[int], versions: Sequence[str | None] | pa.Array
) -> pa.Table:
    """Listed documents (columns of their ``SourceFile`` fields) as rows of ``LISTING``, in
    their order, each with its doc_id."""
    joined = ids.doc_ids_joined(redact_uris(uris)).encode("ascii")
    offsets = np.arange(0, len(joined) + 1, ids.DOC_ID_CHARS, dtype=np.int32)
    doc_ids = pa.StringArray.from_buffers(len(uris), pa.py_buffer(offsets), pa.py_buffer(joined))
    return pa.table([doc_ids, uris, sizes, versions], schema=LISTING)


def stat_versions(sizes: pa.Array, mtimes: pa.Array) -> pa.Array:
    """``source_version`` of each size and modification time (a string array, null where the
    time is 0), made by Arrow's kernels: a listing's thousands without a Python string
    each. Arrow writes a float as its shortest round-trip digits, as ``repr`` does, but for
    two spellings: a whole number without ``.0``, which is added, and an exponent, which
    each writes at its own bounds (``repr`` below 1e-4 and from 1e16, Arrow below 1e-6 and
    from 1e10: never a file's time after 1970 and before 2286), as for ``inf`` and ``nan``;
    then every text is made by ``source_version`` instead."""
    times = np.abs(mtimes.to_numpy(zero_copy_only=False))
    if not len(times):
        return pa.array([], pa.string())
    timeless = times == 0.0

    def by_repr() -> pa.Array:
        return pa.array(map(source_version, sizes.to_pylist(), mtimes.to_pylist()), pa.string())

    # ``repr`` writes an exponent outside [1e-4, 1e16) (Arrow at other bounds), inf and nan.
    if not (((times >= 1e-4) | timeless) & (times < 1e16)).all():
        return by_repr()
    text = pc.cast(mtimes, pa.string())
    # The texts' characters, read off their buffer between their first and last offsets:
    # a check of thousands with no kernel call.
    bounds = np.frombuffer(text.buffers()[1], np.int32)[[text.offset, text.offset + len(text)]]
    chars = np.frombuffer(text.buffers()[2], np.uint8)[bounds[0] : bounds[1]]
    if (chars == ord("e")).any():  # Arrow's exponent, from 1e10 (after the year 2286)
        return by_repr()
    if np.count_nonzero(chars == ord(".")) < len(text):  # a whole number: "1700000000"
        whole = pc.equal(pc.find_substring(text, "."), -1)
        text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    size_text = pc.cast(sizes, pa.string())
    versions = pc.binary_join_element_wise("size=", size_text, ";mtime=", text, "")
    if timeless.any():
        versions = pc.if_else(pa.array(timeless), pa.scalar(None, pa.string()), versions)
    return versions


# Files a hold makes the versions of with Arrow's kernels, from: fewer are made one by one
# (a one-document run's would pay the kernels' first calls for one text).
_VERSIONS_AT_ONCE = 256


class ListingHold:
    """Listed documents held, then sent on as ``ListedDocs`` (a message per doc-id bucket),
    ``LISTING_HOLD`` at a time. A document is held as its fields, in a list per column: no
    object per document outlives its listing (thousands of them, held, would wake Python's
    garbage collector, whose full pass over a worker's heap costs more than the listing).
    The files of a walk (``SourceFiles``) are held with their modification times, their
    versions made at release for all at once (``stat_versions``); a ``SourceFile``, with its
    version."""

    def __init__(self) -> None:
        self._uris: list[str] = []
        self._sizes: list[int] = []
        self._mtimes: list[float] = []  # 0.0 for a file held with its version
        self._versions: list[str | None] = []  # as many as the files held by ``add``'s last

    def add(self, file: SourceFile) -> list[ListedDocs]:
        """Holds ``file``; when the hold is full, every document held, by bucket."""
        self._versions += [None] * (len(self._uris) - len(self._versions))
        self._versions.append(file.version)
        self._uris.append(file.uri)
        self._sizes.append(file.size_bytes)
        self._mtimes.append(0.0)
        return self.release() if len(self._uris) >= LISTING_HOLD else []

    def extend(self, files: SourceFiles) -> list[ListedDocs]:
        """Holds ``files``; when the hold is full, every document held, by bucket."""
        self._uris += files.uris
        self._sizes += files.sizes
        self._mtimes += files.mtimes
        return self.release() if len(self._uris) >= LISTING_HOLD else []

    def release(self) -> list[ListedDocs]:
        """Every document held, by bucket (none when none is)."""
        if not self._uris:
            return []
        given = self._versions + [None] * (len(self._uris) - len(self._versions))
        sizes = pa.array(self._sizes, pa.int64())
        versions: list[str | None] | pa.Array
        if len(self._uris) < _VERSIONS_AT_ONCE:
            made = map(source_version, self._sizes, self._mtimes)
            versions = [
                by_time if one is None else one for one, by_time in zip(given, made, strict=True)
            ]
        else:
            versions = stat_versions(sizes, pa.array(self._mtimes, pa.float64()))
            if self._versions:
                versions = pc.coalesce(pa.array(given, pa.string()), versions)
        table = listing_table(self._uris, sizes, versions)
        self._uris, self._sizes, self._mtimes, self._versions = [], [], [], []
        return [ListedDocs(*cut) for cut in prior.by_bucket(table, "doc_id")]


class ListFiles(beam.PTransform):
    """Glob patterns → what they match: the documents to read as ``ListedDocs`` (rows of
    ``LISTING`` by doc-id bucket, no element per document), and one element per object left
    out on purpose, ``Skipped`` (a format that is not text, an --exclude match, a FIFO or
    device, a symlink leading out of the input), or per ``ListingError`` (a folder that could
    not be listed, a name that cannot be recorded). ``ChunkCorpus`` takes all three.

    Globs read as a shell's with globstar (``storage.glob_regex``), and a folder
    means everything under it. ``include``/``exclude`` are globs matched against the path
    relative to the pattern's fixed folder (``storage.ListingRules``). Nothing
    under ``exclude_prefix`` (the output location) is listed, by path or by real path, nor
    are directory markers. Listing is sharded by prefix (``storage.plan``) and the
    shards redistributed by grouping on a key each (as ``ReadManifest`` spreads its parts:
    fewer steps than a ``Reshuffle``), so a large bucket is listed by many workers.
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
            | "Start" >> beam.Impulse()
            | "Shard"
            >> beam.FlatMap(
                _shard_keys,
                patterns=self._patterns,
                billing_project=self._billing_project,
                rules=self._rules,
            )
            | "SpreadShards" >> beam.GroupByKey()
            | "ListShard" >> beam.ParDo(_ListShards(self._rules))
        )


def _shard_keys(
    _: bytes,
    patterns: Sequence[str],
    billing_project: str | None,
    rules: storage.ListingRules,
) -> Iterator[tuple[str, storage.Shard | Listed]]:
    """Every shard of ``patterns`` (``storage.plan``), keyed by its place among them: a key
    each, so the grouping spreads them as a ``Reshuffle`` would."""
    items = (
        item
        for pattern in patterns
        for item in storage.plan(pattern, billing_project=billing_project, rules=rules)
    )
    for i, item in enumerate(items):
        yield f"{i:010d}", item


class _ListShards(beam.DoFn):
    """Lists each shard (``storage.list_shard``): its skipped objects and listing errors go
    on as they are, its documents are held over the bundle (``ListingHold``)."""

    def __init__(self, rules: storage.ListingRules) -> None:
        self._rules = rules

    def start_bundle(self) -> None:
        self._held = ListingHold()

    def process(
        self, grouped: tuple[str, Iterable[storage.Shard | Listed]]
    ) -> Iterator[ListedDocs | Skipped | ListingError]:
        held = self._held
        for item in grouped[1]:
            for listed in storage.list_shard_batched(item, rules=self._rules):
                if isinstance(listed, SourceFiles):
                    yield from held.extend(listed)
                elif isinstance(listed, SourceFile):
                    yield from held.add(listed)
                else:
                    yield listed

    def finish_bundle(self) -> Iterator[Any]:
        windowed = GlobalWindows.windowed_value(None).with_value  # one window made, not one each
        for docs in self._held.release():
            yield windowed(docs)


class ReadManifest(beam.PTransform):
    """The parts of the prior run's manifest (``PriorPart``: one row group of one file),
    redistributed so workers read them in parallel; an empty PCollection when ``files`` is
    empty. ``files`` are exactly the manifest's files (those the prior run's ``_SUCCESS``
    lists, proven before the run: ``chunkmill.pipeline.preflight``), never a glob, so a stray file
    beside them is not read. The rows themselves are read by ``ChunkCorpus``
    (``prior``).

    The parts are grouped by their key, which spreads them as a ``Reshuffle`` would, in
    fewer steps (each step of a graph costs its start-up on every run, a nightly one
    included): one impulse lists every file's row groups, and the grouping spreads them.
    A manifest of one file of one row group (a small corpus's) has nothing to spread: its
    footer is read as the graph is built and its one part follows the impulse, with no
    grouping (a stage and two steps fewer)."""

    def __init__(self, files: Sequence[str]) -> None:
        super().__init__()
        self._files = list(files)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if not self._files:
            return pbegin | "NoPriorManifest" >> beam.Create([])
        if len(self._files) == 1:
            parts = list(prior.list_parts(self._files[0]))
            if len(parts) == 1:
                return (
                    pbegin
                    | "Start" >> beam.Impulse()
                    | "OnePart" >> beam.Map(_only_part, key=parts[0].key)
                )
        return (
            pbegin
            | "Start" >> beam.Impulse()
            | "ListParts" >> beam.FlatMap(_part_keys, files=self._files)
            | "SpreadParts" >> beam.GroupByKey()
            | "Parts" >> beam.Map(_part)
        )


def _part_keys(_: bytes, files: Sequence[str]) -> Iterator[tuple[str, None]]:
    """Every row group of ``files`` (``prior.list_parts``), keyed by its part key."""
    for path in files:
        for part in prior.list_parts(path):
            yield part.key, None


def _only_part(_: bytes, key: str) -> PriorPart:
    return PriorPart.from_key(key)


def _part(grouped: tuple[str, Iterable[None]]) -> PriorPart:
    return PriorPart.from_key(grouped[0])


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
    be tried again), spread by grouping on each path. Joined with the listing by doc_id like
    the prior manifest's summaries: a failed document not worth trying again is not read
    (``carryover.is_known_failure``)."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__()
        self._paths = sorted(paths)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if not self._paths:
            return pbegin | "NoPriorErrors" >> beam.Create([])
        return (
            pbegin
            | "Start" >> beam.Impulse()
            | "ErrorFiles" >> beam.FlatMap(_path_keys, paths=self._paths)
            | "SpreadErrorFiles" >> beam.GroupByKey()
            | "ReadErrorFiles" >> beam.FlatMap(_read_prior_errors)
        )


def _path_keys(_: bytes, paths: Sequence[str]) -> Iterator[tuple[str, None]]:
    """Each of ``paths`` as a key: the grouping spreads them as a ``Reshuffle`` would."""
    for path in paths:
        yield path, None


def _read_prior_errors(grouped: tuple[str, Iterable[None]]) -> Iterator[tuple[str, PriorError]]:
    return prior_errors(grouped[0])
