"""The store interface, what its listings and reads share, and the errors every store raises
the same way."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chunkmill.items import Listed, ListingError, Skipped, SourceFile, SourceFiles


class SourceVanished(FileNotFoundError):
    """A listed object that no longer exists when read."""


class SourceChanged(Exception):
    """A listed object overwritten since it was listed: read again next run."""


class LinkTargetMissing(FileNotFoundError):
    """A symlink whose target does not exist."""


class NotRegularFile(OSError):
    """A FIFO, device or socket where a file was listed: never read."""


class SymlinkOutsideInput(OSError):
    """A symlink whose target lies outside the input, met when reading."""


class SourceTooLarge(Exception):
    """An object of more bytes than the read allows."""


class StoreAccessError(Exception):
    """A bucket that does not exist or cannot be listed: one line naming it."""


# errors/ and Skipped reason codes a store's listing gives (the others: transforms/storage.py).
LIST_FAILED = "list_failed"  # a folder or prefix could not be listed: its documents are kept
BAD_NAME = "bad_name"  # a local file name that is not valid UTF-8: it cannot be recorded
SYMLINK_OUTSIDE_INPUT = "symlink_outside_input"  # a local symlink leading out of the input
# A FIFO, device or socket: a skip reason when the listing sees it (never opened: reading a
# FIFO blocks until a writer comes, a device may never end), a read failure when a read does.
NOT_REGULAR = "not_regular_file"

# One level of a delimiter listing: an object directly under the prefix as (key, size,
# version), or a sub-prefix (a string ending in "/").
Entry = tuple[str, int, str] | str


class Rules(Protocol):
    """What a listing leaves out (``chunkmill.transforms.storage.ListingRules``)."""

    @property
    def follow_symlinks(self) -> bool:
        """Whether a local symlink leading outside its pattern's root is listed."""
        ...

    def screen(self, relative: str) -> str | None:
        """The reason to skip a path relative to its pattern's root, or None to list it."""
        ...

    def screen_folder(self, relative_folder: str, names: Sequence[str]) -> dict[int, str]:
        """``screen`` of each of one folder's files (the paths ``relative_folder + name``):
        the reasons to skip, by the place of the name in ``names``; the others are listed."""
        ...

    def in_output(self, path: str) -> bool:
        """Whether ``path`` lies under the run's output (never listed)."""
        ...


@dataclass(frozen=True)
class Glob:
    """A pattern as a walking store needs it (``chunkmill.transforms.storage.glob``): the
    ``pattern`` itself, the folder it lists from (``root``, ending in "/" or empty), whether
    it holds a wildcard, its regular expression, and ``of``, the same reading of another
    pattern (a store's own path for it)."""

    pattern: str
    root: str
    wildcard: bool
    regex: re.Pattern[str]
    of: Callable[[str], Glob] = field(repr=False, compare=False)

    def match(self, path: str) -> bool:
        return self.regex.fullmatch(path) is not None


class ObjectStore(Protocol):
    """A location chunkmill lists, reads and claims in (``chunkmill.stores.for_uri``).

    A ``sharded`` store holds buckets of keys (GCS, S3, memory): it lists by prefix, one level
    at a time (``list_level``) or all under a prefix (``list_prefix``), so a listing is split
    by sub-prefix. Any other store (local disk, fsspec, Beam's FileSystems) lists a pattern as
    a whole (``walk``). Versions are ``SourceVersion`` texts; every method may raise the
    client's own errors (permission, network after the client's retries), which the caller
    turns into an errors/ row."""

    sharded: bool
    atomic_create: bool  # create_if_absent is one atomic request

    def list_level(self, bucket: str, prefix: str) -> Iterator[Entry]:
        """Sharded: the objects directly under ``prefix`` and its sub-prefixes."""
        ...

    def list_prefix(
        self, bucket: str, prefix: str, recursive: bool
    ) -> Iterator[tuple[str, int, str]]:
        """Sharded: ``(key, size, version)`` of the objects under ``prefix`` (directly under
        it unless ``recursive``)."""
        ...

    def walk(self, glob: Glob, rules: Rules) -> Iterator[Listed | SourceFiles]:
        """Not sharded: what ``glob`` matches, judged by ``rules`` (listed files one by one
        or, where a store has them so, a batch of them as ``SourceFiles``); a folder that
        cannot be listed is a ``ListingError``, never an exception."""
        ...

    def matches(self, pattern: str) -> bool | None:
        """Whether ``pattern`` matches an object, where one request can tell; None: list it."""
        ...

    def is_folder(self, uri: str) -> bool:
        """Whether ``uri`` (no trailing "/") names a folder: local disk only."""
        ...

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        """The object's bytes as of ``version`` where the store can pin it (else
        ``SourceChanged``); past ``max_bytes``, enough to tell it holds more (most stores stop
        at ``max_bytes + 1``); ``SourceVanished`` when it is gone."""
        ...

    def check(self, uri: str) -> None:
        """``StoreAccessError`` when the bucket of ``uri`` does not exist or cannot be
        listed; nothing for a store without buckets."""
        ...

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        """Writes the object unless one of that name exists; True if written. Atomic where
        ``atomic_create``; elsewhere a check, then a write."""
        ...


class BucketStore:
    """What every sharded store shares: URIs of ``scheme://bucket/key``, no walk, no folders,
    atomic claims."""

    sharded = True
    atomic_create = True

    def walk(self, glob: Glob, rules: Rules) -> Iterator[Listed]:
        raise TypeError(f"{glob.pattern} is listed by prefix (list_level, list_prefix)")

    def matches(self, pattern: str) -> bool | None:
        return None

    def is_folder(self, uri: str) -> bool:
        return False


class WalkedStore:
    """What every store listed by walking shares: no prefix listing, no bucket to check."""

    sharded = False

    def list_level(self, bucket: str, prefix: str) -> Iterator[Entry]:
        raise TypeError("a store without buckets is walked, not listed by prefix")

    def list_prefix(
        self, bucket: str, prefix: str, recursive: bool
    ) -> Iterator[tuple[str, int, str]]:
        raise TypeError("a store without buckets is walked, not listed by prefix")

    def matches(self, pattern: str) -> bool | None:
        return None

    def is_folder(self, uri: str) -> bool:
        return False

    def check(self, uri: str) -> None:
        return None


def scheme(uri: str) -> str:
    """``gs``, ``s3``, ... or ``""`` for a local path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else ""


def split_bucket(uri: str) -> tuple[str, str]:
    """``gs://bucket/key`` → ``("bucket", "key")``."""
    rest = uri.partition("://")[2]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    return bucket, key


def display_name(path: str) -> str:
    """``path`` as valid UTF-8 text: bytes a local file name holds that are not UTF-8 (which
    ``os`` hands over as lone surrogates, and Arrow refuses) shown as ``\\xNN``."""
    if path.isascii():  # most names: no encoding to try
        return path
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_directory_marker(name: str) -> bool:
    """A zero-byte "folder" that consoles create: a name ending in "/", never listed."""
    return name.endswith("/")


def first_line(text: str | None) -> str:
    """The first line of a client library's message (they append details and tracebacks)."""
    stripped = (text or "").strip()
    return stripped.splitlines()[0] if stripped else ""


def list_failed(prefix: str, e: BaseException) -> ListingError:
    """The ``ListingError`` of a folder or prefix whose listing raised ``e``."""
    detail = first_line(str(e))
    return ListingError(display_name(prefix), LIST_FAILED, f"{type(e).__name__}: {detail}"[:1000])


def one_by_one(listed: Iterable[Listed | SourceFiles]) -> Iterator[Listed]:
    """A listing (``ObjectStore.walk``'s) with each batch of files as its ``SourceFile``s."""
    for item in listed:
        if isinstance(item, SourceFiles):
            yield from item.files()
        else:
            yield item


def screened(
    files: Iterable[SourceFile], root: str, rules: Rules
) -> Iterator[SourceFile | Skipped]:
    """``files`` as ``rules`` judge them (paths relative to ``root``); the output left out."""
    for f in files:
        if rules.in_output(f.uri):
            continue
        reason = rules.screen(f.uri[len(root) :])
        yield f if reason is None else Skipped(f.uri, reason)


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
