"""The object-store interface and the errors every store raises the same way."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol


class SourceVanished(FileNotFoundError):
    """A listed object that no longer exists when read."""


class SourceChanged(Exception):
    """A listed object overwritten since it was listed: read again next run."""


class LinkTargetMissing(FileNotFoundError):
    """A symlink whose target does not exist."""


class NotRegularFile(OSError):
    """A FIFO, device or socket where a file was listed: never read."""


class SourceTooLarge(Exception):
    """An object of more bytes than the read allows."""


class StoreAccessError(Exception):
    """A bucket that does not exist or cannot be listed: one line naming it."""


# One level of a delimiter listing: an object directly under the prefix as (key, size,
# version), or a sub-prefix (a string ending in "/").
Entry = tuple[str, int, str] | str


class ObjectStore(Protocol):
    """A bucket-and-key store. Keys are relative to the bucket; versions are
    ``SourceVersion`` texts; every method may raise the client's own errors (permission,
    network after the client's retries), which the caller turns into an errors/ row."""

    def list_level(self, bucket: str, prefix: str) -> Iterator[Entry]:
        """The objects directly under ``prefix`` and its sub-prefixes (a delimiter listing)."""
        ...

    def list_prefix(
        self, bucket: str, prefix: str, recursive: bool
    ) -> Iterator[tuple[str, int, str]]:
        """``(key, size, version)`` of the objects under ``prefix`` (directly under it unless
        ``recursive``)."""
        ...

    def read(self, bucket: str, key: str, version: str | None, max_bytes: int | None) -> bytes:
        """The object's bytes as of ``version`` where the store can pin it (else
        ``SourceChanged``), at most ``max_bytes + 1``; ``SourceVanished`` when it is gone."""
        ...

    def check(self, bucket: str) -> None:
        """``StoreAccessError`` when the bucket does not exist or cannot be listed."""
        ...

    def create_if_absent(self, bucket: str, key: str, data: bytes) -> bool:
        """Writes the object unless one of that key exists, atomically; True if written."""
        ...


def first_line(text: str | None) -> str:
    """The first line of a client library's message (they append details and tracebacks)."""
    stripped = (text or "").strip()
    return stripped.splitlines()[0] if stripped else ""


# Clients are made lazily, once per process, never pickled.
_CLIENTS: dict[str, Any] = {}
_LOCK = threading.Lock()


def client(name: str, make: Callable[[], Any]) -> Any:
    """The process's one client ``name``, made by ``make`` the first time."""
    with _LOCK:
        if name not in _CLIENTS:
            _CLIENTS[name] = make()
        return _CLIENTS[name]


def reset_clients() -> None:
    """Forgets every client (a test that points the stores at another endpoint)."""
    with _LOCK:
        _CLIENTS.clear()
