"""Every location chunkmill lists, reads and claims in, behind one interface
(``ObjectStore``): GCS, S3 and an in-memory store of buckets and keys, local disk, any fsspec
protocol and Beam's other FileSystems. ``for_uri`` is the one place a URI's scheme picks its
store (docs/design.md, "Listing and reading")."""

from __future__ import annotations

from collections.abc import Callable

from chunkmill.stores.base import (
    BAD_NAME,
    LIST_FAILED,
    NOT_REGULAR,
    SYMLINK_OUTSIDE_INPUT,
    Entry,
    Glob,
    LinkTargetMissing,
    NotRegularFile,
    ObjectStore,
    Rules,
    SourceChanged,
    SourceTooLarge,
    SourceVanished,
    StoreAccessError,
    SymlinkOutsideInput,
    display_name,
    first_line,
    is_directory_marker,
    list_failed,
    one_by_one,
    reset_clients,
    scheme,
    screened,
    split_bucket,
)

__all__ = [
    "BAD_NAME",
    "BEAM_SCHEMES",
    "LIST_FAILED",
    "NOT_REGULAR",
    "SYMLINK_OUTSIDE_INPUT",
    "Entry",
    "Glob",
    "LinkTargetMissing",
    "NotRegularFile",
    "ObjectStore",
    "Rules",
    "SourceChanged",
    "SourceTooLarge",
    "SourceVanished",
    "StoreAccessError",
    "SymlinkOutsideInput",
    "display_name",
    "first_line",
    "for_uri",
    "is_directory_marker",
    "is_local",
    "list_failed",
    "one_by_one",
    "register",
    "reset_clients",
    "scheme",
    "screened",
    "split_bucket",
    "unregister",
]

# Schemes left to Beam's own FileSystems (besides local paths): listing gives size+mtime.
BEAM_SCHEMES = frozenset({"file", "hdfs", "azfs"})

# scheme -> a factory of the bucket store, given the billing project of requester-pays buckets.
_FACTORIES: dict[str, Callable[[str | None], ObjectStore]] = {}


def register(scheme: str, factory: Callable[[str | None], ObjectStore]) -> None:
    """Makes ``scheme://bucket/key`` URIs a bucket store's (``MemoryStore`` in tests)."""
    _FACTORIES[scheme] = factory


def unregister(scheme: str) -> None:
    _FACTORIES.pop(scheme, None)


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a path on local disk (no scheme)."""
    return scheme(uri) == ""


def local_path(uri: str) -> str | None:
    """The path on local disk of a bare path or a ``file://`` URI; None for any other store."""
    s = scheme(uri)
    if s == "":
        return uri
    return uri.removeprefix("file://") if s == "file" else None


def for_uri(
    uri: str, billing_project: str | None = None, within: tuple[str, ...] | None = None
) -> ObjectStore:
    """The store of ``uri``: a registered bucket store (``gs``, ``s3``, ...); local disk for a
    path; Beam's FileSystems for ``file``, ``hdfs`` and ``azfs``; fsspec for any other
    scheme. ``billing_project``: the project billed by requester-pays buckets; ``within``:
    where a local symlink met when reading may lead (``LocalStore``)."""
    s = scheme(uri)
    if s in _FACTORIES:
        return _FACTORIES[s](billing_project)
    if s == "":
        from chunkmill.stores.local import LocalStore

        return LocalStore(within)
    if s in BEAM_SCHEMES:
        from chunkmill.stores.beamfs import BeamStore

        return BeamStore()
    from chunkmill.stores.fsspec_store import FsspecStore

    return FsspecStore()


def _gcs(billing_project: str | None) -> ObjectStore:
    from chunkmill.stores.gcs import GcsStore

    return GcsStore(billing_project)


def _s3(billing_project: str | None) -> ObjectStore:
    from chunkmill.stores.s3 import S3Store

    return S3Store(billing_project)


register("gs", _gcs)
register("s3", _s3)
