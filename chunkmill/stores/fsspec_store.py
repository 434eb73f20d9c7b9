"""Any other protocol through fsspec (``az://``, ``abfs://``, ``https://``, ``hf://``,
``memory://``, ...): a pattern is listed by one recursive listing of its root; versions are
the best the protocol's listing offers, and a read of another size than listed is
``SourceChanged``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chunkmill.items import Listed, SourceFile, SourceVersion, source_version
from chunkmill.stores.base import (
    Glob,
    Rules,
    SourceChanged,
    SourceVanished,
    WalkedStore,
    is_directory_marker,
    list_failed,
    screened,
)


def _fs(uri: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(uri)


def fsspec_version(info: dict[str, Any]) -> str | None:
    """The best version an fsspec listing entry offers: generation, else ETag and size, else
    size and modification time; None when it has none of them."""
    size = int(info.get("size") or 0)
    if info.get("generation"):
        return str(SourceVersion.gcs(info["generation"]))
    etag = info.get("ETag") or info.get("etag")
    if etag:
        return str(SourceVersion.s3(str(etag), size))
    mtime: Any = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
    if hasattr(mtime, "timestamp"):  # a datetime (s3fs, adlfs)
        mtime = mtime.timestamp()
    if isinstance(mtime, int | float):
        return source_version(size, float(mtime))
    return None


class FsspecStore(WalkedStore):
    # Claims are written the way the tables are, through Beam's FileSystems: a check, then
    # a write.
    atomic_create = False

    def walk(self, glob: Glob, rules: Rules) -> Iterator[Listed]:
        """A recursive listing of the pattern's root, matched by the glob (fsspec's own glob
        reads ``**`` its own way)."""
        try:
            fs, path = _fs(glob.pattern)
            own = glob.of(path)
            if not own.wildcard and fs.isdir(path):
                own = glob.of(path.rstrip("/") + "/**")
            if own.wildcard:
                base = own.root.rstrip("/")
                found = {n: i for n, i in fs.find(base, detail=True).items() if own.match(n)}
            else:
                found = {path: fs.info(path)} if fs.exists(path) else {}
        except Exception as e:
            yield list_failed(glob.root, e)
            return
        files = []
        for name, info in sorted(found.items()):
            if info.get("type", "file") != "file" or is_directory_marker(name):
                continue
            size = int(info.get("size") or 0)
            files.append(SourceFile(fs.unstrip_protocol(name), size, fsspec_version(info)))
        yield from screened(files, fs.unstrip_protocol(own.root), rules)

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        fs, path = _fs(uri)
        try:
            data = fs.cat_file(path, start=0, end=None if max_bytes is None else max_bytes + 1)
        except FileNotFoundError:
            raise SourceVanished(f"{uri} no longer exists") from None
        listed = SourceVersion.parse(version)
        size = None if listed is None else listed.size
        if size is not None and size != len(data) and not (max_bytes and len(data) > max_bytes):
            raise SourceChanged(f"{uri} is {len(data)} bytes now, {size} when listed")
        return bytes(data)

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        from chunkmill.stores.beamfs import create_if_absent

        return create_if_absent(uri, data)
