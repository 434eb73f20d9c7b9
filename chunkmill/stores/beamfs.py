"""The other stores Beam's FileSystems own (``hdfs://``, ``azfs://``, ``file://``): a
pattern is one FileSystems match; versions are size and modification time; a claim is a
check, then a write."""

from __future__ import annotations

from collections.abc import Iterator

from chunkmill.items import Listed, SourceFile, source_version
from chunkmill.stores.base import Glob, Rules, SourceVanished, WalkedStore, list_failed, screened


def create_if_absent(uri: str, data: bytes) -> bool:
    """Writes ``data`` to ``uri`` through FileSystems unless it exists (not atomic)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    if FileSystems.exists(uri):
        return False
    with FileSystems.create(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return True


class BeamStore(WalkedStore):
    atomic_create = False

    def walk(self, glob: Glob, rules: Rules) -> Iterator[Listed]:
        from apache_beam.io.filesystems import FileSystems

        try:
            results = FileSystems.match([glob.pattern])
        except Exception as e:
            yield list_failed(glob.root, e)
            return
        found = []
        for result in results:
            for m in result.metadata_list:
                size = int(m.size_in_bytes)
                version = source_version(size, m.last_updated_in_seconds)
                found.append(SourceFile(m.path, size, version))
        yield from screened(found, glob.root, rules)

    def matches(self, pattern: str) -> bool | None:
        from apache_beam.io.filesystems import FileSystems

        try:
            return bool(FileSystems.match([pattern], limits=[1])[0].metadata_list)
        except Exception:  # Beam raises for a pattern whose directory does not exist
            return False

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems

        try:
            with FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                return bytes(f.read() if max_bytes is None else f.read(max_bytes + 1))
        except Exception:
            if not FileSystems.exists(uri):
                raise SourceVanished(f"{uri} no longer exists") from None
            raise

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        return create_if_absent(uri, data)
