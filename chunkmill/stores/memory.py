"""An object store in memory, for tests: buckets of keys, a generation per write, listings
that can be made to fail, reads pinned like GCS's. Register it for a scheme of its own
(``chunkmill.stores.register("mem", lambda _: store)``) and run anything on ``mem://``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from chunkmill.items import SourceVersion
from chunkmill.stores.base import (
    BucketStore,
    Entry,
    SourceChanged,
    SourceVanished,
    StoreAccessError,
    split_bucket,
)


class MemoryStore(BucketStore):
    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, tuple[bytes, int]]] = {}
        self.failing: set[tuple[str, str]] = set()  # (bucket, prefix) whose listing fails
        self._generation = 0
        self._lock = threading.RLock()

    # -- what a test does to it

    def put(self, bucket: str, key: str, data: bytes) -> str:
        """Writes an object (a new generation); returns its version."""
        with self._lock:
            self._generation += 1
            self.buckets.setdefault(bucket, {})[key] = (data, self._generation)
            return str(SourceVersion.gcs(self._generation))

    def delete(self, bucket: str, key: str) -> None:
        with self._lock:
            self.buckets.get(bucket, {}).pop(key, None)

    def fail_listing(self, bucket: str, prefix: str) -> None:
        """Every listing of ``prefix`` (or under it) in ``bucket`` raises from now on."""
        self.failing.add((bucket, prefix))

    # -- ObjectStore

    def _keys(self, bucket: str, prefix: str) -> list[tuple[str, bytes, int]]:
        if any(b == bucket and prefix.startswith(p) for b, p in self.failing):
            raise PermissionError(f"listing mem://{bucket}/{prefix} is denied")
        objects = self.buckets.get(bucket, {})
        return [(k, d, g) for k, (d, g) in sorted(objects.items()) if k.startswith(prefix)]

    def list_level(self, bucket: str, prefix: str) -> Iterator[Entry]:
        below: set[str] = set()
        for key, data, generation in self._keys(bucket, prefix):
            rest = key[len(prefix) :]
            if "/" in rest:
                below.add(prefix + rest.split("/", 1)[0] + "/")
            else:
                yield key, len(data), str(SourceVersion.gcs(generation))
        yield from sorted(below)

    def list_prefix(
        self, bucket: str, prefix: str, recursive: bool
    ) -> Iterator[tuple[str, int, str]]:
        for key, data, generation in self._keys(bucket, prefix):
            if recursive or "/" not in key[len(prefix) :]:
                yield key, len(data), str(SourceVersion.gcs(generation))

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        bucket, key = split_bucket(uri)
        found = self.buckets.get(bucket, {}).get(key)
        if found is None:
            raise SourceVanished(f"{uri} no longer exists")
        data, generation = found
        listed = SourceVersion.parse(version)
        if listed is not None and listed.generation not in (None, str(generation)):
            raise SourceChanged(f"{uri} was overwritten after generation {listed.generation}")
        return data if max_bytes is None else data[: max_bytes + 1]

    def check(self, uri: str) -> None:
        bucket = split_bucket(uri)[0]
        if bucket not in self.buckets:
            raise StoreAccessError(f"bucket mem://{bucket} does not exist")

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        bucket, key = split_bucket(uri)
        with self._lock:
            if key in self.buckets.get(bucket, {}):
                return False
            self.put(bucket, key, data)
            return True
