"""One contract for every store behind ``chunkmill.stores.ObjectStore``: the same listing,
reads, pinned versions and claims on memory, local disk, fsspec, Beam's FileSystems and, on
emulators over loopback, GCS and S3; and the one place a scheme picks its store."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import fsspec
import pytest

from chunkmill import stores
from chunkmill.items import SourceFile
from chunkmill.stores.beamfs import BeamStore
from chunkmill.stores.fsspec_store import FsspecStore
from chunkmill.stores.gcs import GcsStore
from chunkmill.stores.local import LocalStore
from chunkmill.stores.memory import MemoryStore
from chunkmill.stores.s3 import S3Store
from chunkmill.transforms import storage
from tests.e2e.stores import fake_gcs_server, gcs_env, s3_emulator, s3_env, store_env


@dataclass
class Place:
    """A store and a folder of it a test may fill: ``root`` ends in "/"."""

    store: stores.ObjectStore
    root: str
    put: Callable[[str, bytes], None]
    delete: Callable[[str], None]
    # A read of a listed version raises SourceChanged once it is overwritten (True), reads
    # what is there now (False), or pins on the real service only (None: GCS, whose
    # emulators ignore ifGenerationMatch on a read; test_storage shows GCS's answers).
    pins: bool | None
    versioned: bool  # the listing reports a version
    missing_bucket: str | None = None  # a URI of a bucket that does not exist


def _memory(tmp_path: Path) -> Iterator[Place]:
    store = MemoryStore()
    stores.register("mem", lambda billing_project: store)
    try:
        yield Place(
            stores.for_uri("mem://bk/"),
            "mem://bk/",
            lambda key, data: store.put("bk", key, data) and None,
            lambda key: store.delete("bk", key),
            pins=True,
            versioned=True,
            missing_bucket="mem://nope/x",
        )
    finally:
        stores.unregister("mem")


def _on_disk(tmp_path: Path, store: stores.ObjectStore) -> Place:
    def put(key: str, data: bytes) -> None:
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_bytes(data)

    def delete(key: str) -> None:
        (tmp_path / key).unlink()

    return Place(store, f"{tmp_path}/", put, delete, pins=False, versioned=True)


def _local(tmp_path: Path) -> Iterator[Place]:
    yield _on_disk(tmp_path, stores.for_uri(str(tmp_path)))


def _beam(tmp_path: Path) -> Iterator[Place]:
    # Beam's FileSystems on its local file system: the code hdfs:// and azfs:// go through.
    yield _on_disk(tmp_path, BeamStore())


def _fsspec(tmp_path: Path) -> Iterator[Place]:
    fs = fsspec.filesystem("memory")
    folder = f"/contract-{uuid.uuid4().hex}"
    try:
        yield Place(
            stores.for_uri(f"memory://{folder}/"),
            f"memory://{folder}/",
            lambda key, data: fs.pipe(f"{folder}/{key}", data),
            lambda key: fs.rm(f"{folder}/{key}"),
            pins=False,
            versioned=False,  # fsspec's memory listing has no version: SHA-256 decides
        )
    finally:
        if fs.exists(folder):
            fs.rm(folder, recursive=True)


def _gcs(tmp_path: Path) -> Iterator[Place]:
    # fake-gcs-server honours preconditions (pinned reads, claims); gcp-storage-emulator not.
    with fake_gcs_server() as url, store_env(gcs_env(url)):
        from google.cloud import storage as gcs_lib

        bucket = gcs_lib.Client().create_bucket("contract")
        yield Place(
            stores.for_uri("gs://contract/"),
            "gs://contract/",
            lambda key, data: bucket.blob(key).upload_from_string(data),
            lambda key: bucket.blob(key).delete(),
            pins=None,
            versioned=True,
            missing_bucket="gs://no-such-bucket/x",
        )


def _s3(tmp_path: Path) -> Iterator[Place]:
    with s3_emulator() as url, store_env(s3_env(url)):
        import boto3

        client = boto3.client("s3")
        client.create_bucket(Bucket="contract")
        yield Place(
            stores.for_uri("s3://contract/"),
            "s3://contract/",
            lambda key, data: client.put_object(Bucket="contract", Key=key, Body=data) and None,
            lambda key: client.delete_object(Bucket="contract", Key=key) and None,
            pins=True,
            versioned=True,
            missing_bucket="s3://no-such-bucket/x",
        )


PLACES = {
    "memory": _memory,
    "local": _local,
    "beam": _beam,
    "fsspec": _fsspec,
    "gcs": _gcs,
    "s3": _s3,
}
ATOMIC = {"memory": True, "local": True, "beam": False, "fsspec": False, "gcs": True, "s3": True}


@pytest.fixture(params=sorted(PLACES))
def place(request, tmp_path: Path) -> Iterator[Place]:
    yield from PLACES[request.param](tmp_path)


def listed(place: Place, pattern: str) -> list[tuple[str, int, str | None]]:
    """What the store lists of ``pattern`` (under its root), through its interface alone."""
    uri = place.root + pattern
    store = place.store
    if store.sharded:
        bucket, key = stores.split_bucket(uri)
        match = storage.glob(key).match
        return [
            (f"{stores.scheme(uri)}://{bucket}/{name}", size, version)
            for name, size, version in store.list_prefix(bucket, storage.fixed_prefix(key), True)
            if match(name)
        ]
    return [
        (f.uri, f.size_bytes, f.version)
        for f in stores.one_by_one(store.walk(storage.glob(uri), storage.DEFAULT_RULES))
        if isinstance(f, SourceFile)
    ]


def test_every_store_lists_what_the_glob_matches_with_sizes_and_versions(place):
    place.put("docs/a.md", b"alpha")
    place.put("docs/sub/b.md", b"beta!!")
    place.put("docs/c.txt", b"c")
    place.put("other/d.md", b"d")
    got = sorted(listed(place, "docs/**.md"))
    assert [(uri, size) for uri, size, _ in got] == [
        (place.root + "docs/a.md", 5),
        (place.root + "docs/sub/b.md", 6),
    ]
    assert all(version is not None for _, _, version in got) is place.versioned
    assert listed(place, "nothing/**") == []


def test_every_store_reads_the_listed_bytes_within_a_limit(place):
    place.put("a.md", b"0123456789")
    ((uri, _, version),) = listed(place, "a.md")
    assert place.store.read(uri, version, None) == b"0123456789"
    # Past a limit, enough to tell the object is over it: more than max_bytes, a prefix.
    head = place.store.read(uri, version, 3)
    assert len(head) > 3 and b"0123456789".startswith(head)


def test_a_read_of_an_overwritten_object_is_pinned_or_the_version_moves(place):
    place.put("a.md", b"old")
    ((uri, _, version),) = listed(place, "a.md")
    place.put("a.md", b"new, and longer")
    # The next listing tells it changed (a store without versions: the content SHA-256).
    ((_, _, now),) = listed(place, "a.md")
    assert (now != version) is place.versioned
    if place.pins:
        with pytest.raises(stores.SourceChanged):
            place.store.read(uri, version, None)
    elif place.pins is False:
        assert place.store.read(uri, version, None) == b"new, and longer"
    assert place.store.read(uri, None, None) == b"new, and longer"


def test_a_read_of_a_deleted_object_is_vanished(place):
    place.put("a.md", b"a")
    ((uri, _, version),) = listed(place, "a.md")
    place.delete("a.md")
    with pytest.raises(stores.SourceVanished):
        place.store.read(uri, version, None)


def test_create_if_absent_has_one_winner(place, request):
    name = request.node.callspec.params["place"]
    assert place.store.atomic_create is ATOMIC[name]
    if name == "fsspec":
        # Claims are written where the tables are, through Beam's FileSystems: an fsspec
        # protocol Beam does not know is no output.
        with pytest.raises(ValueError, match="Unable to get filesystem"):
            place.store.create_if_absent(place.root + "runs/r1/_CLAIM", b"first")
        return
    claim = place.root + "runs/r1/_CLAIM"
    assert place.store.create_if_absent(claim, b"first")
    assert not place.store.create_if_absent(claim, b"second")
    assert place.store.read(claim, None, None) == b"first"


def test_a_missing_bucket_fails_the_check_and_a_store_without_buckets_has_none(place):
    place.put("a.md", b"a")
    place.store.check(place.root + "a.md")
    if place.missing_bucket is None:
        assert not place.store.sharded
        return
    assert place.store.sharded
    with pytest.raises(stores.StoreAccessError, match=place.missing_bucket[:-2] + " "):
        place.store.check(place.missing_bucket)


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("/data/docs/**", LocalStore),
        ("docs/a.md", LocalStore),
        ("gs://b/docs/**", GcsStore),
        ("GS://b/docs/**", GcsStore),
        ("s3://b/docs/*.md", S3Store),
        ("hdfs://nn/docs/*", BeamStore),
        ("azfs://account/container/docs/*", BeamStore),
        ("file:///data/docs/*", BeamStore),
        ("az://container/docs/**", FsspecStore),
        ("abfs://container/docs/**", FsspecStore),
        ("https://example.invalid/a.md", FsspecStore),
        ("hf://datasets/org/name/**", FsspecStore),
        ("memory://docs/*", FsspecStore),
    ],
)
def test_the_scheme_picks_the_store(uri, kind):
    assert type(stores.for_uri(uri)) is kind


def test_a_registered_scheme_and_the_store_settings():
    store = MemoryStore()
    stores.register("mem", lambda billing_project: store)
    try:
        assert stores.for_uri("mem://bk/x") is store
    finally:
        stores.unregister("mem")
    assert type(stores.for_uri("mem://bk/x")) is FsspecStore  # no longer a bucket store
    local = stores.for_uri("/data/x", within=("/data",))
    assert isinstance(local, LocalStore) and local.within == ("/data",)
    gcs = stores.for_uri("gs://b/x", billing_project="payer")
    assert isinstance(gcs, GcsStore) and gcs.billing_project == "payer"
    assert stores.is_local("docs/a.md") and not stores.is_local("gs://b/a.md")
