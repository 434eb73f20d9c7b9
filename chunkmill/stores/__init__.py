"""Object stores behind one interface: the operations chunkmill needs of a bucket (list one
level, list a prefix, read a pinned version, check it, create an object only if absent),
with GCS, S3 and an in-memory store the tests use (docs/design.md, "Listing and reading").
Local disk and fsspec protocols are listed by walking, not by prefix, and are read by
``chunkmill.transforms.storage``."""

from __future__ import annotations

from collections.abc import Callable

from chunkmill.stores.base import (
    Entry,
    LinkTargetMissing,
    NotRegularFile,
    ObjectStore,
    SourceChanged,
    SourceTooLarge,
    SourceVanished,
    StoreAccessError,
    first_line,
    reset_clients,
)

__all__ = [
    "Entry",
    "LinkTargetMissing",
    "NotRegularFile",
    "ObjectStore",
    "SourceChanged",
    "SourceTooLarge",
    "SourceVanished",
    "StoreAccessError",
    "first_line",
    "object_store",
    "register",
    "reset_clients",
    "schemes",
    "unregister",
]

# scheme -> a factory of the store, given the billing project of requester-pays buckets.
_FACTORIES: dict[str, Callable[[str | None], ObjectStore]] = {}


def register(scheme: str, factory: Callable[[str | None], ObjectStore]) -> None:
    """Makes ``scheme://bucket/key`` URIs an object store's (``MemoryStore`` in tests)."""
    _FACTORIES[scheme] = factory


def unregister(scheme: str) -> None:
    _FACTORIES.pop(scheme, None)


def schemes() -> frozenset[str]:
    """The URI schemes listed and read as object stores."""
    return frozenset(_FACTORIES)


def object_store(scheme: str, billing_project: str | None = None) -> ObjectStore:
    """The store of ``scheme://`` URIs (``KeyError`` for a scheme of no object store)."""
    return _FACTORIES[scheme](billing_project)


def _gcs(billing_project: str | None) -> ObjectStore:
    from chunkmill.stores.gcs import GcsStore

    return GcsStore(billing_project)


def _s3(billing_project: str | None) -> ObjectStore:
    from chunkmill.stores.s3 import S3Store

    return S3Store(billing_project)


register("gs", _gcs)
register("s3", _s3)
