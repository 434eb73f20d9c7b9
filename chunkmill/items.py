"""Element types that travel between pipeline stages: NamedTuples for those that cross a
shuffle once per document (sent as plain tuples, which Beam's coder encodes natively where
anything else is pickled), frozen dataclasses for the rest.

Table rows are plain dicts keyed by the fields of ``chunkmill.schema``; these types are the
work items around them. The chunking config is in ``chunkmill.config``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple


class SourceFile(NamedTuple):
    """One object found by the listing."""

    uri: str
    size_bytes: int
    # What the listing says about this version of the object, without reading it (see
    # ``source_version``); None when the store told nothing usable.
    version: str | None = None


class Skipped(NamedTuple):
    """An object the listing found and left out on purpose, never read: counted in the run
    report by ``reason`` (``chunkmill.transforms.storage`` names the reasons), never a failure."""

    uri: str
    reason: str


class ListingError(NamedTuple):
    """What the listing could not do: a folder or prefix it could not list (``uri`` is the
    folder; every prior document under it keeps its rows), or a name it cannot record. One
    errors/ row each (stage ``list``)."""

    uri: str
    reason: str
    message: str


# What a listing yields.
Listed = SourceFile | Skipped | ListingError


class SourceFiles(NamedTuple):
    """Files found by the listing of a store that reports a size and a modification time, as
    columns: what a walk gives of a folder's files at once (a folder of thousands is three
    lists, not an object per file). A file's version is ``source_version(size, mtime)``,
    made only where it is needed: for thousands at once where they are held as Arrow rows
    (``chunkmill.transforms.sources.ListingHold``), one by one in ``files``."""

    uris: list[str]
    sizes: list[int]
    mtimes: list[float]  # 0.0: no modification time (the version is None)

    def files(self) -> Iterator[SourceFile]:
        """One ``SourceFile`` each, in order."""
        return map(SourceFile, self.uris, self.sizes, map(source_version, self.sizes, self.mtimes))


class ListedDocs(NamedTuple):
    """Listed documents of one doc-id bucket, as the listing sends them on: one Arrow IPC
    message of rows of ``chunkmill.transforms.sources.LISTING`` (``prior.from_ipc`` reads it),
    in place of a ``SourceFile`` each."""

    bucket: str
    message: bytes


@dataclass(frozen=True, slots=True)
class PriorPart:
    """One row group of one prior manifest file: the unit the prior manifest is read in."""

    path: str
    row_group: int

    @property
    def key(self) -> str:
        # A plain string, so grouping by part encodes deterministically on every runner.
        return f"{self.row_group}:{self.path}"

    @classmethod
    def from_key(cls, key: str) -> PriorPart:
        row_group, path = key.split(":", 1)
        return cls(path, int(row_group))


class PriorSummary(NamedTuple):
    """What one prior part holds of one document: how many rows, and the version,
    fingerprint and content hash they share (``None`` where its rows disagree or have none).

    A document's rows are summarised, not carried: deciding its fate needs only this, and its
    rows are kept, removed or dropped later where they lie (``chunkmill.transforms.prior``), so an
    unchanged document's rows never travel through the pipeline one by one."""

    part: str  # PriorPart.key
    rows: int
    source_version: str | None
    config_fingerprint: str | None
    content_sha256: str | None
    # The document's source URI, so a document missing from the listing can be told apart
    # from one under a folder whose listing failed (kept, not removed).
    source_uri: str | None = None


class PriorError(NamedTuple):
    """What the prior run's errors/ table says of one failed document: enough to decide
    whether to try it again (``chunkmill.carryover.is_known_failure``) and, if not, to write
    its errors row again."""

    source_version: str | None
    attempt_key: str | None
    stage: str
    reason: str
    message: str
    content_sha256: str | None


@dataclass(frozen=True, slots=True)
class WorkItem:
    """A listed document joined with the summaries of its rows in the prior manifest (none if
    it is new)."""

    doc_id: str
    uri: str
    size_bytes: int
    prior: tuple[PriorSummary, ...] = ()
    version: str | None = None  # the listing's ``SourceFile.version``
    prior_error: PriorError | None = None  # its row in the prior run's errors/, if any


# What becomes of a document's prior rows (``Verdict.kind``).
KEEP = "keep"  # carried over or failed: every row stays in the manifest
REPLACE = "replace"  # processed: its rows are superseded; those whose chunk_id is gone are removed
REMOVE = "remove"  # no longer listed: every row is removed
EMPTIED = "emptied"  # listed, but holds no text now: every row is removed (document_emptied)


class Verdict(NamedTuple):
    """The fate of one document's rows in one prior part."""

    doc_id: str
    kind: str
    # KEEP: the listing's version to record on the kept rows (the same bytes were found under
    # new metadata), or None to keep them as they are.
    version: str | None = None
    # REPLACE: the chunk_ids the document has now; its prior rows with other ids are removed.
    current_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceVersion:
    """The version of a listed object as its store reports it, from the listing alone: a GCS
    generation (``gen=G``), an S3 ETag and size (``etag=E;size=N``), else a size and
    modification time (``size=N;mtime=T``). Its text is what ``source_version`` columns
    hold: two listings that give the same text are taken to name the same bytes, so the
    document is carried over without being read. ``parse`` and ``str`` are inverses."""

    generation: str | None = None
    etag: str | None = None
    size: int | None = None
    mtime: float | None = None

    @classmethod
    def gcs(cls, generation: object) -> SourceVersion:
        return cls(generation=str(generation))

    @classmethod
    def s3(cls, etag: str, size: int) -> SourceVersion:
        return cls(etag=etag.strip('"'), size=size)

    @classmethod
    def stat(cls, size: int, mtime: float) -> SourceVersion:
        return cls(size=size, mtime=mtime)

    def __str__(self) -> str:
        if self.generation is not None:
            return f"gen={self.generation}"
        if self.etag is not None:
            return f"etag={self.etag};size={self.size}"
        return _stat_text(self.size, self.mtime)

    @classmethod
    def parse(cls, text: str | None) -> SourceVersion | None:
        """The version a ``source_version`` text names; None for None or a text of no known
        form (a version written by another tool is never trusted as one of these)."""
        if not text:
            return None
        fields = dict(part.partition("=")[::2] for part in text.split(";"))
        if not all(fields.values()):
            return None
        try:
            if text.startswith("gen=") and len(fields) == 1:
                return cls(generation=fields["gen"])
            if text.startswith("etag=") and fields.keys() == {"etag", "size"}:
                return cls(etag=fields["etag"], size=int(fields["size"]))
            if text.startswith("size=") and fields.keys() == {"size", "mtime"}:
                return cls(size=int(fields["size"]), mtime=float(fields["mtime"]))
        except ValueError:
            return None
        return None


def source_version(size_bytes: int, last_updated_in_seconds: float | None) -> str | None:
    """The ``size=N;mtime=T`` version of an object whose store reports a size and a
    modification time; ``None`` when it reports no time (Beam reports 0.0 then): such objects
    are always read and compared by content SHA-256."""
    if not last_updated_in_seconds:
        return None
    # _stat_text's, inline: a listing makes one per file.
    return f"size={size_bytes};mtime={last_updated_in_seconds!r}"


def _stat_text(size: int | None, mtime: float | None) -> str:
    # repr keeps every digit of the float: a sub-second rewrite of the same size still
    # changes the text where the store records sub-second times.
    return f"size={size};mtime={mtime!r}"
