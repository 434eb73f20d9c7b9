"""The storage layer without a network: routing, sharding, versions from listings, and how a
read maps a store's answers (gone, overwritten, denied) to chunkmill's errors."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import fsspec
import pytest
from google.api_core import exceptions as gexc

from chunkmill import stores
from chunkmill.items import Skipped, SourceFile
from chunkmill.stores import gcs
from chunkmill.stores.fsspec_store import fsspec_version
from chunkmill.stores.memory import MemoryStore
from chunkmill.transforms import storage
from chunkmill.transforms.storage import Shard


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("/data/docs/**", "beam"),
        ("docs/a.md", "beam"),
        ("gs://b/docs/**", "object"),
        ("s3://b/docs/*.md", "object"),
        ("hdfs://nn/docs/*", "beam"),
        ("az://container/docs/**", "fsspec"),
        ("abfs://container/docs/**", "fsspec"),
        ("https://example.invalid/a.md", "fsspec"),
        ("hf://datasets/org/name/**", "fsspec"),
        ("memory://docs/*", "fsspec"),
    ],
)
def test_each_uri_goes_to_one_store(uri, kind):
    assert storage.kind(uri) == kind


@pytest.mark.parametrize(
    ("key", "prefix"),
    [("docs/**", "docs/"), ("docs/a*.md", "docs/a"), ("docs/a.md", "docs/a.md"), ("*", "")],
)
def test_fixed_prefix_stops_at_the_first_glob_character(key, prefix):
    assert storage.fixed_prefix(key) == prefix


def test_split_bucket_needs_a_bucket():
    assert storage.split_bucket("gs://b/x/y.md") == ("b", "x/y.md")
    assert storage.bucket_url("s3://b/x/y.md") == "s3://b"
    with pytest.raises(ValueError, match="names no bucket"):
        storage.split_bucket("gs:///x")


@pytest.fixture
def mem():
    """An in-memory object store for ``mem://`` URIs."""
    store = MemoryStore()
    stores.register("mem", lambda billing_project: store)
    yield store
    stores.unregister("mem")


def test_object_store_patterns_list_one_level_then_shard_by_prefix(mem):
    v = {k: mem.put("bk", k, b"abc") for k in ("docs/top.md", "docs/", "docs/skip.txt")}
    mem.put("bk", "docs/a/x.md", b"x")
    mem.put("bk", "docs/b/y.md", b"y")
    got = set(storage.plan("mem://bk/docs/**.md", billing_project="payer"))
    assert got == {
        SourceFile("mem://bk/docs/top.md", 3, v["docs/top.md"]),  # not the marker docs/
        Shard("mem://bk/docs/**.md", "docs/a/", recursive=True, billing_project="payer"),
        Shard("mem://bk/docs/**.md", "docs/b/", recursive=True, billing_project="payer"),
    }
    # A pattern that cannot match below its level lists that level only.
    assert list(storage.plan("mem://bk/docs/*.md")) == [
        SourceFile("mem://bk/docs/top.md", 3, v["docs/top.md"])
    ]


def test_plan_of_one_object_or_a_local_pattern_is_one_shard(mem):
    mem.fail_listing("bk", "")  # no delimiter listing is needed
    # A key without a wildcard names one object, or everything under it as a folder.
    assert list(storage.plan("mem://bk/docs/a.md")) == [
        Shard("mem://bk/docs/a.md", "docs/a.md", False),
        Shard("mem://bk/docs/a.md/**", "docs/a.md/", True),
    ]
    assert list(storage.plan("/local/**")) == [Shard("/local/**")]
    assert list(storage.list_shard(SourceFile("mem://bk/x", 1, "v"))) == [
        SourceFile("mem://bk/x", 1, "v")
    ]


def test_shard_listing_filters_by_glob_and_drops_directory_markers(mem):
    v = {
        k: mem.put("bk", k, data)
        for k, data in [
            ("docs/a/x.md", b"abc"),
            ("docs/a/", b""),  # a directory marker
            ("docs/a/deep/y.md", b"abcd"),
            ("docs/a/z.txt", b"abcde"),
        ]
    }
    got = list(storage.list_shard(Shard("mem://bk/docs/a/*.md", "docs/a/", False)))
    assert [(f.uri, f.size_bytes, f.version) for f in got] == [
        ("mem://bk/docs/a/x.md", 3, v["docs/a/x.md"])
    ]
    got = list(storage.list_shard(Shard("mem://bk/docs/**", "docs/a/", True)))
    assert [f.uri for f in got] == [
        "mem://bk/docs/a/deep/y.md",
        "mem://bk/docs/a/x.md",
        "mem://bk/docs/a/z.txt",
    ]


def test_object_store_reads_are_pinned_to_the_listed_version(mem):
    listed = mem.put("bk", "docs/a.md", b"old")
    assert storage.read_object("mem://bk/docs/a.md", listed) == b"old"
    mem.put("bk", "docs/a.md", b"new")  # overwritten after the listing
    with pytest.raises(stores.SourceChanged):
        storage.read_object("mem://bk/docs/a.md", listed)
    assert storage.read_object("mem://bk/docs/a.md", None) == b"new"
    mem.delete("bk", "docs/a.md")
    with pytest.raises(stores.SourceVanished):
        storage.read_object("mem://bk/docs/a.md", None)


def test_claims_on_an_object_store_are_one_winner(mem):
    assert storage.creates_atomically("mem://bk/runs/r1/_CLAIM")
    assert storage.create_if_absent("mem://bk/runs/r1/_CLAIM", b"first")
    assert not storage.create_if_absent("mem://bk/runs/r1/_CLAIM", b"second")
    assert storage.read_object("mem://bk/runs/r1/_CLAIM") == b"first"


def test_a_missing_bucket_is_a_store_access_error(mem):
    mem.put("bk", "a.md", b"a")
    storage.check_bucket("mem://bk/docs/**")
    with pytest.raises(stores.StoreAccessError, match="mem://nope does not exist"):
        storage.check_bucket("mem://nope/docs/**")


@pytest.mark.parametrize(
    ("info", "version"),
    [
        ({"size": 5, "generation": "17", "mtime": 1.0}, "gen=17"),
        ({"size": 5, "ETag": '"abc"', "LastModified": dt.datetime(2026, 1, 1)}, "etag=abc;size=5"),
        ({"size": 5, "etag": "0x8D"}, "etag=0x8D;size=5"),
        ({"size": 5, "mtime": 1700000000.5}, "size=5;mtime=1700000000.5"),
        (
            {"size": 5, "last_modified": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)},
            f"size=5;mtime={dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp()!r}",
        ),
        ({"size": 5}, None),
    ],
)
def test_fsspec_version_takes_the_strongest_the_listing_offers(info, version):
    assert fsspec_version(info) == version


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    fs.pipe({"/corpus/a.md": b"alpha", "/corpus/sub/b.txt": b"beta", "/corpus/c.bin": b"c"})
    yield fs
    fs.rm("/corpus", recursive=True)


def test_fsspec_listing_and_reading(memfs):
    listed = [f for s in storage.plan("memory://corpus/**") for f in storage.list_shard(s)]
    assert sorted((f.uri, f.size_bytes) for f in listed if isinstance(f, SourceFile)) == [
        ("memory:///corpus/a.md", 5),
        ("memory:///corpus/sub/b.txt", 4),
    ]
    # A format that is not text is left out, never read.
    assert [f for f in listed if isinstance(f, Skipped)] == [
        Skipped("memory:///corpus/c.bin", storage.UNSUPPORTED_FORMAT)
    ]
    assert storage.has_match("memory://corpus/*.md")
    assert not storage.has_match("memory://corpus/*.pdf")
    assert storage.read_object("memory:///corpus/a.md", "size=5;mtime=1.0") == b"alpha"


def test_fsspec_read_of_a_changed_or_deleted_object(memfs):
    memfs.pipe("/corpus/a.md", b"alpha, now longer")
    with pytest.raises(stores.SourceChanged, match="17 bytes now, 5 when listed"):
        storage.read_object("memory:///corpus/a.md", "size=5;mtime=1.0")
    memfs.rm("/corpus/a.md")
    with pytest.raises(stores.SourceVanished):
        storage.read_object("memory:///corpus/a.md", "size=5;mtime=1.0")


def test_local_file_deleted_after_listing_vanishes(tmp_path: Path):
    path = tmp_path / "a.md"
    path.write_text("x")
    (listed,) = [f for s in storage.plan(str(tmp_path / "*")) for f in storage.list_shard(s)]
    assert listed.version and listed.version.startswith("size=1;mtime=")
    path.unlink()
    with pytest.raises(stores.SourceVanished):
        storage.read_object(listed.uri, listed.version)


class FakeBlob:
    """The one google-cloud-storage call a read makes, with GCS's precondition semantics."""

    def __init__(self, store: dict[str, tuple[int, bytes]], name: str) -> None:
        self.store, self.name = store, name

    def download_as_bytes(self, *, if_generation_match=None):
        if self.name not in self.store:
            raise gexc.NotFound("No such object")
        generation, data = self.store[self.name]
        if if_generation_match is not None and if_generation_match != generation:
            raise gexc.PreconditionFailed("conditionNotMet")
        return data


class FakeBucket:
    def __init__(self, store, list_error=None) -> None:
        self.store, self.list_error = store, list_error

    def blob(self, name):
        return FakeBlob(self.store, name)

    def list_blobs(self, **_):
        raise self.list_error


class FakeClient:
    """google-cloud-storage's client, as far as GcsStore uses it."""

    def __init__(self, bucket: FakeBucket) -> None:
        self._bucket = bucket

    def bucket(self, name, user_project=None):
        return self._bucket


def test_gcs_read_is_pinned_to_the_listed_generation(monkeypatch):
    store = {"docs/a.md": (7, b"old")}
    monkeypatch.setattr(gcs, "_client", lambda: FakeClient(FakeBucket(store)))
    assert storage.read_object("gs://bk/docs/a.md", "gen=7") == b"old"
    store["docs/a.md"] = (8, b"new")  # overwritten after the listing
    with pytest.raises(stores.SourceChanged, match="after generation 7"):
        storage.read_object("gs://bk/docs/a.md", "gen=7")
    # No listed generation (a version from elsewhere): read whatever is there.
    assert storage.read_object("gs://bk/docs/a.md", None) == b"new"
    del store["docs/a.md"]
    with pytest.raises(stores.SourceVanished):
        storage.read_object("gs://bk/docs/a.md", "gen=8")


def test_denied_bucket_is_one_line_naming_bucket_and_permission(monkeypatch):
    denied = gexc.Forbidden(
        "someone@example.com does not have storage.objects.list access to the bucket.\nmore"
    )
    monkeypatch.setattr(gcs, "_client", lambda: FakeClient(FakeBucket({}, denied)))
    with pytest.raises(stores.StoreAccessError) as e:
        storage.check_bucket("gs://secret/docs/**")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("permission denied on bucket gs://secret: listing objects")
    assert "storage.objects.list" in message


class RecordingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.levels: list[str] = []

    def list_level(self, bucket, prefix):
        self.levels.append(prefix)
        return super().list_level(bucket, prefix)


def test_the_delimiter_listing_starts_at_the_whole_fixed_prefix():
    store = RecordingStore()
    for key in ("docs/ab.md", "docs/ab/c.md", "docs/b.md"):
        store.put("bk", key, b"x")
    stores.register("mem", lambda billing_project: store)
    try:
        got = list(storage.plan("mem://bk/docs/a*/**"))
    finally:
        stores.unregister("mem")
    assert store.levels == ["docs/a"]
    assert got == [Shard("mem://bk/docs/a*/**", "docs/ab/", True)]  # docs/ab.md: no match
