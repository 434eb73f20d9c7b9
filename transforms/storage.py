"""Listing and reading documents across stores: local disk, GCS, S3 and any fsspec protocol.

Each store gives the version of an object from its listing alone, so an unchanged object is
carried over unread (``transforms.document.is_unchanged_by_listing``):

* ``gs://`` (google-cloud-storage, the client Beam's GcsIO wraps): ``gen=GENERATION``. A read
  is pinned to the listed generation (``if_generation_match``), so an object overwritten
  between listing and reading raises ``SourceChanged`` instead of returning other bytes.
* ``s3://`` (boto3, the client Beam's S3 filesystem wraps): ``etag=ETAG;size=N``; a read sends
  ``If-Match: ETAG``, likewise.
* local paths and the other stores Beam's FileSystems own (``hdfs://``, ``azfs://``):
  ``size=N;mtime=T`` (``transforms.types.source_version``).
* any other fsspec protocol (``az://``, ``abfs://``, ``https://``, ``hf://``, ...): the best
  the protocol's listing offers (generation, ETag, else size+mtime); a read whose size differs
  from the listed one raises ``SourceChanged``.

An object gone between listing and reading raises ``SourceVanished``. Names ending in ``/``
(zero-byte "directory markers" that consoles create) are never listed.

Listing is sharded for object stores: ``plan`` lists one level under a pattern's fixed part
with a delimiter, giving the objects there and one shard per sub-prefix, and ``list_shard``
lists one shard; ``transforms.io.ListFiles`` redistributes the shards between the two, so a
bucket of millions of objects is listed by many workers at once.

Credentials come from where each SDK looks by default (Application Default Credentials for
GCS; the AWS environment, config files and instance roles for S3; each fsspec
implementation's own). Clients are made lazily, once per process, never pickled.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from apache_beam.io.filesystem import CompressionTypes, FileSystem
from apache_beam.io.filesystems import FileSystems

from transforms.types import SourceFile, source_version

GCS = "gs"
S3 = "s3"
# Schemes left to Beam's own FileSystems (besides local paths): listing gives size+mtime.
_BEAM_SCHEMES = frozenset({"hdfs", "azfs"})
_GLOB_CHARS = "*?["


# errors/ reason codes of the read stage.
VANISHED = "vanished"  # listed, then deleted before it was read
CHANGED = "changed"  # listed, then overwritten before it was read; read again next run


class SourceVanished(FileNotFoundError):
    """The object was listed but is gone when read."""


class SourceChanged(Exception):
    """The object was overwritten between listing and reading; nothing of it was used."""


class StoreAccessError(Exception):
    """A bucket that does not exist or may not be read: a one-line message naming both."""


@dataclass(frozen=True)
class Shard:
    """One unit of listing work: the objects under ``prefix`` (all of them when
    ``recursive``, else only those directly under it) that match ``pattern``."""

    pattern: str
    prefix: str | None = None  # None: list the pattern as a whole (local disk, fsspec)
    recursive: bool = True
    billing_project: str | None = None  # requester-pays buckets: the project billed


def scheme(uri: str) -> str:
    """``gs``, ``s3``, ... or ``""`` for a local path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else ""


def kind(uri: str) -> str:
    """Which code lists and reads ``uri``: ``gcs``, ``s3``, ``beam`` or ``fsspec``."""
    s = scheme(uri)
    if s == GCS:
        return "gcs"
    if s == S3:
        return "s3"
    if s in ("", "file") or s in _BEAM_SCHEMES:
        return "beam"
    return "fsspec"


def split_bucket(uri: str) -> tuple[str, str]:
    """``gs://bucket/key`` → ``("bucket", "key")``."""
    rest = uri.partition("://")[2]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    return bucket, key


def bucket_url(uri: str) -> str:
    return f"{scheme(uri)}://{split_bucket(uri)[0]}"


def fixed_prefix(key_pattern: str) -> str:
    """The part of a key pattern before its first glob character."""
    cut = min((i for i in (key_pattern.find(c) for c in _GLOB_CHARS) if i >= 0), default=None)
    return key_pattern if cut is None else key_pattern[:cut]


def _matcher(key_pattern: str) -> re.Pattern[str]:
    # Beam's own glob semantics (``*`` stops at "/", ``**`` does not), so a pattern matches
    # the same objects on every store.
    return re.compile(FileSystem.translate_pattern(key_pattern))


def is_directory_marker(name: str) -> bool:
    return name.endswith("/")


# ---------------------------------------------------------------------------------------------
# Clients: one per process and setting, made on first use (workers never unpickle one).

_CLIENTS: dict[tuple[str, str | None], Any] = {}
_LOCK = threading.Lock()

# S3 retries: botocore's "standard" mode retries throttling (429, SlowDown) and 5xx with
# exponential backoff and jitter; ten attempts ride out a few seconds of throttling.
_S3_MAX_ATTEMPTS = 10


def _gcs_client() -> Any:
    with _LOCK:
        client = _CLIENTS.get(("gcs", None))
        if client is None:
            from google.cloud import storage  # type: ignore[attr-defined]

            # With STORAGE_EMULATOR_HOST set the client talks to the emulator anonymously;
            # otherwise Application Default Credentials. Beam's GcsIO in this (worker)
            # process, which writes the tables, likewise.
            use_anonymous_gcs_for_emulator()
            client = _CLIENTS[("gcs", None)] = storage.Client()
        return client


def _s3_client() -> Any:
    with _LOCK:
        client = _CLIENTS.get(("s3", None))
        if client is None:
            import boto3
            from botocore.config import Config

            # The endpoint, region and credentials come from the standard AWS places
            # (AWS_ENDPOINT_URL, AWS_REGION, ~/.aws, instance roles).
            client = _CLIENTS[("s3", None)] = boto3.session.Session().client(
                "s3", config=Config(retries={"mode": "standard", "max_attempts": _S3_MAX_ATTEMPTS})
            )
        return client


def use_anonymous_gcs_for_emulator() -> None:
    """With ``STORAGE_EMULATOR_HOST`` set, make Beam's GcsIO connect anonymously too.

    Beam otherwise probes for Google credentials (with retries, ~20 s per process) before its
    first GCS call, which an emulator does not need. Beam caches the outcome of that probe;
    this fills the cache with "no credentials", which makes GcsIO use an anonymous client.
    Does nothing without an emulator.
    """
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return
    from apache_beam.internal.gcp import auth

    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials = None
        auth._Credentials._credentials_init = True


# ---------------------------------------------------------------------------------------------
# Listing


def plan(pattern: str, billing_project: str | None = None) -> Iterator[Shard | SourceFile]:
    """Splits the listing of ``pattern`` into work that can be done in parallel.

    For an object store, one delimiter listing of the pattern's fixed prefix gives the
    objects directly under it (yielded as ``SourceFile``, already listed) and its sub-prefixes
    (yielded as one ``Shard`` each, when the pattern can match below them). Elsewhere the
    pattern is one shard. ``list_shard`` turns each item into objects.
    """
    k = kind(pattern)
    if k not in ("gcs", "s3"):
        yield Shard(pattern, billing_project=billing_project)
        return
    bucket, key = split_bucket(pattern)
    prefix = fixed_prefix(key)
    if prefix == key:  # no glob: one object (or nothing)
        yield Shard(pattern, prefix, recursive=False, billing_project=billing_project)
        return
    # What follows the last "/" of the fixed part decides whether anything deeper can match.
    rest = key[prefix.rfind("/") + 1 :]
    descend = "/" in rest or "**" in rest  # e.g. not docs/*.md: nothing below can match
    match = _matcher(key).fullmatch
    level = _gcs_level if k == "gcs" else _s3_level
    # The delimiter listing groups names under the fixed prefix by their next "/".
    for entry in level(pattern, prefix, billing_project):
        if isinstance(entry, str):
            if descend:
                yield Shard(pattern, entry, True, billing_project)
        elif not is_directory_marker(entry[0]) and match(entry[0]):
            name, size, version = entry
            yield SourceFile(f"{scheme(pattern)}://{bucket}/{name}", size, version)


def list_shard(item: Shard | SourceFile) -> Iterator[SourceFile]:
    """The objects of one shard that match its pattern, with their listing versions (an
    object ``plan`` already listed passes through)."""
    if isinstance(item, SourceFile):
        yield item
        return
    shard = item
    k = kind(shard.pattern)
    if k == "beam":
        yield from _list_beam(shard.pattern)
        return
    if k == "fsspec":
        yield from _list_fsspec(shard.pattern)
        return
    bucket, key = split_bucket(shard.pattern)
    match = _matcher(key).fullmatch
    prefix = shard.prefix or ""
    listing = _gcs_objects if k == "gcs" else _s3_objects
    for name, size, version in listing(
        shard.pattern, prefix, shard.recursive, shard.billing_project
    ):
        if not is_directory_marker(name) and match(name):
            yield SourceFile(f"{scheme(shard.pattern)}://{bucket}/{name}", size, version)


def has_match(pattern: str, billing_project: str | None = None) -> bool:
    """Whether ``pattern`` matches at least one object (stops at the first)."""
    if kind(pattern) == "beam":
        try:
            return bool(FileSystems.match([pattern], limits=[1])[0].metadata_list)
        except Exception:  # Beam raises for a pattern whose directory does not exist
            return False
    return any(True for item in plan(pattern, billing_project) for _ in list_shard(item))


def _list_beam(pattern: str) -> Iterator[SourceFile]:
    if scheme(pattern) == "" and _before_glob(pattern) != pattern:
        yield from _list_local(pattern)
        return
    for result in FileSystems.match([pattern]):
        for m in result.metadata_list:
            size = int(m.size_in_bytes)
            yield SourceFile(m.path, size, source_version(size, m.last_updated_in_seconds))


_GLOB_START = re.compile(r"^[^[*?]*")


def _before_glob(pattern: str) -> str:
    """The part of ``pattern`` before its first wildcard (all of it when it has none)."""
    m = _GLOB_START.match(pattern)
    return m.group(0) if m else ""


def _list_local(pattern: str) -> Iterator[SourceFile]:
    """A local glob, matched exactly as Beam's ``FileSystems.match`` matches it (the same
    walk from the directory before the first wildcard, the same ``translate_pattern``
    regex), with one ``stat`` a file instead of Beam's two and its metadata objects."""
    if pattern.endswith("/"):
        pattern += "*"
    base = os.path.dirname(_before_glob(pattern))
    match = re.compile(FileSystem.translate_pattern(pattern)).match
    for dirpath, _, names in os.walk(base):
        for name in names:
            path = os.path.join(dirpath, name)
            if not match(path):
                continue
            try:
                st = os.stat(path)
            except OSError:  # gone since the walk saw it, as Beam skips it
                continue
            yield SourceFile(path, st.st_size, source_version(st.st_size, st.st_mtime))


def _gcs_bucket(uri: str, billing_project: str | None) -> Any:
    return _gcs_client().bucket(split_bucket(uri)[0], user_project=billing_project)


# One level of a delimiter listing: objects directly under ``base`` as (name, size,
# version), and the sub-prefixes as strings.
Entry = tuple[str, int, str] | str


def _gcs_level(pattern: str, base: str, billing_project: str | None) -> Iterator[Entry]:
    blobs = _gcs_bucket(pattern, billing_project).list_blobs(prefix=base, delimiter="/")
    for b in blobs:
        yield b.name, int(b.size or 0), f"gen={b.generation}"
    # The client gathers the prefixes page by page; all are known once every page is read.
    yield from sorted(blobs.prefixes)


def _gcs_objects(
    pattern: str, prefix: str, recursive: bool, billing_project: str | None
) -> Iterator[tuple[str, int, str]]:
    blobs = _gcs_bucket(pattern, billing_project).list_blobs(
        prefix=prefix, delimiter=None if recursive else "/"
    )
    for b in blobs:
        yield b.name, int(b.size or 0), f"gen={b.generation}"


def _s3_request_payer(billing_project: str | None) -> dict[str, str]:
    # S3 bills the requester's own account; the flag only says "I agree to pay".
    return {"RequestPayer": "requester"} if billing_project else {}


def _s3_pages(
    pattern: str, prefix: str, delimiter: str | None, billing_project: str | None
) -> Iterator[dict[str, Any]]:
    bucket, _ = split_bucket(pattern)
    kwargs: dict[str, Any] = {
        "Bucket": bucket,
        "Prefix": prefix,
        **_s3_request_payer(billing_project),
    }
    if delimiter:
        kwargs["Delimiter"] = delimiter
    yield from _s3_client().get_paginator("list_objects_v2").paginate(**kwargs)


def _s3_level(pattern: str, base: str, billing_project: str | None) -> Iterator[Entry]:
    for page in _s3_pages(pattern, base, "/", billing_project):
        for o in page.get("Contents", []):
            yield _s3_entry(o)
        for p in page.get("CommonPrefixes", []):
            yield p["Prefix"]


def _s3_entry(o: dict[str, Any]) -> tuple[str, int, str]:
    size = int(o["Size"])
    return o["Key"], size, f"etag={o['ETag'].strip(chr(34))};size={size}"


def _s3_objects(
    pattern: str, prefix: str, recursive: bool, billing_project: str | None
) -> Iterator[tuple[str, int, str]]:
    for page in _s3_pages(pattern, prefix, None if recursive else "/", billing_project):
        for o in page.get("Contents", []):
            yield _s3_entry(o)


def _fsspec_fs(uri: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(uri)


def fsspec_version(info: dict[str, Any]) -> str | None:
    """The best version an fsspec listing entry offers: generation, else ETag and size, else
    size and modification time; None when it has none of them."""
    size = int(info.get("size") or 0)
    if info.get("generation"):
        return f"gen={info['generation']}"
    etag = info.get("ETag") or info.get("etag")
    if etag:
        return f"etag={str(etag).strip(chr(34))};size={size}"
    mtime: Any = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
    if hasattr(mtime, "timestamp"):  # a datetime (s3fs, adlfs)
        mtime = mtime.timestamp()
    if isinstance(mtime, int | float):
        return source_version(size, float(mtime))
    return None


def _list_fsspec(pattern: str) -> Iterator[SourceFile]:
    fs, path = _fsspec_fs(pattern)
    found = fs.glob(path, detail=True) if any(c in path for c in _GLOB_CHARS) else None
    if found is None:
        found = {path: fs.info(path)} if fs.exists(path) else {}
    for name, info in sorted(found.items()):
        if info.get("type", "file") != "file" or is_directory_marker(name):
            continue
        size = int(info.get("size") or 0)
        yield SourceFile(fs.unstrip_protocol(name), size, fsspec_version(info))


# ---------------------------------------------------------------------------------------------
# Reading


def read_object(
    uri: str, version: str | None = None, *, billing_project: str | None = None
) -> bytes:
    """All bytes of the object at ``uri``, as of the listed ``version`` where the store can pin
    it (see the module docstring).

    Raises ``SourceVanished`` when the object is gone and ``SourceChanged`` when it is no
    longer the listed version; other errors (permission, network after retries) propagate.
    Compression is never inferred from the name: a ``.gz`` document is bytes to extract.
    """
    k = kind(uri)
    if k == "gcs":
        return _read_gcs(uri, version, billing_project)
    if k == "s3":
        return _read_s3(uri, version, billing_project)
    if k == "fsspec":
        return _read_fsspec(uri, version)
    if scheme(uri) == "":
        # A local path: read directly, without FileSystems' per-call dispatch and wrapping.
        try:
            with open(uri, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise SourceVanished(f"{uri} no longer exists") from None
    try:
        with FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            return f.read()
    except Exception:
        if not FileSystems.exists(uri):
            raise SourceVanished(f"{uri} no longer exists") from None
        raise


def _generation(version: str | None) -> int | None:
    if version and version.startswith("gen="):
        return int(version[4:])
    return None


def _read_gcs(uri: str, version: str | None, billing_project: str | None) -> bytes:
    from google.api_core import exceptions

    generation = _generation(version)
    blob = _gcs_bucket(uri, billing_project).blob(split_bucket(uri)[1])
    try:
        # Retried on 429/5xx by the client's default policy; the precondition makes every
        # chunk of a large download come from the listed generation.
        return blob.download_as_bytes(if_generation_match=generation)
    except exceptions.NotFound:
        raise SourceVanished(f"{uri} no longer exists") from None
    except exceptions.PreconditionFailed:
        raise SourceChanged(
            f"{uri} was overwritten after generation {generation} was listed"
        ) from None


def _read_s3(uri: str, version: str | None, billing_project: str | None) -> bytes:
    from botocore.exceptions import ClientError

    bucket, key = split_bucket(uri)
    etag = version[5:].split(";", 1)[0] if version and version.startswith("etag=") else None
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, **_s3_request_payer(billing_project)}
    if etag:
        kwargs["IfMatch"] = f'"{etag}"'
    try:
        return _s3_client().get_object(**kwargs)["Body"].read()
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        if code in ("NoSuchKey", "404", "NotFound"):
            raise SourceVanished(f"{uri} no longer exists") from None
        if code in ("PreconditionFailed", "412"):
            raise SourceChanged(f"{uri} was overwritten after ETag {etag} was listed") from None
        raise


def _read_fsspec(uri: str, version: str | None) -> bytes:
    fs, path = _fsspec_fs(uri)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        raise SourceVanished(f"{uri} no longer exists") from None
    listed = re.search(r"size=(\d+)", version or "")
    if listed and int(listed.group(1)) != len(data):
        raise SourceChanged(f"{uri} is {len(data)} bytes now, {listed.group(1)} when listed")
    return bytes(data)


class ObjectReader:
    """The default ``read_bytes`` of ``ChunkCorpus``: ``read_object`` as a picklable callable
    that also takes the listed version (``pins_versions``)."""

    pins_versions = True

    def __init__(self, *, billing_project: str | None = None) -> None:
        self.billing_project = billing_project

    def __call__(self, uri: str, version: str | None = None) -> bytes:
        return read_object(uri, version, billing_project=self.billing_project)


# ---------------------------------------------------------------------------------------------
# Start-up checks


def check_bucket(uri: str, billing_project: str | None = None) -> None:
    """Raises ``StoreAccessError`` (one line naming the bucket and what was denied) when the
    bucket of ``uri`` does not exist or cannot be listed; does nothing for other stores."""
    k = kind(uri)
    if k == "gcs":
        _check_gcs(uri, billing_project)
    elif k == "s3":
        _check_s3(uri)


def _check_gcs(uri: str, billing_project: str | None) -> None:
    from google.api_core import exceptions

    name = bucket_url(uri)
    try:
        next(iter(_gcs_bucket(uri, billing_project).list_blobs(max_results=1)), None)
    except exceptions.NotFound:
        raise StoreAccessError(f"bucket {name} does not exist") from None
    except exceptions.Forbidden as e:
        raise StoreAccessError(
            f"permission denied on bucket {name}: listing objects (storage.objects.list): "
            f"{first_line(e.message)}"
        ) from None


def _check_s3(uri: str) -> None:
    from botocore.exceptions import ClientError

    name = bucket_url(uri)
    try:
        _s3_client().head_bucket(Bucket=split_bucket(uri)[0])
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise StoreAccessError(f"bucket {name} does not exist") from None
        if code in ("403", "AccessDenied", "Forbidden"):
            raise StoreAccessError(
                f"permission denied on bucket {name}: s3:ListBucket (HeadBucket)"
            ) from None
        raise


def first_line(text: str | None) -> str:
    """The first line of a client library's message (they append details and tracebacks)."""
    stripped = (text or "").strip()
    return stripped.splitlines()[0] if stripped else ""


# ---------------------------------------------------------------------------------------------
# Claims: create an object only if no object of that name exists, as one atomic request.


def creates_atomically(uri: str) -> bool:
    """Whether ``create_if_absent`` is atomic on the store of ``uri``: local disk, GCS and S3.
    Elsewhere it checks, then writes, and two writers in the same instant can both win."""
    return scheme(uri) in ("", GCS, S3)


def create_if_absent(uri: str, data: bytes) -> bool:
    """Writes ``data`` to ``uri`` unless an object of that name exists; True when this call
    created it. Local disk: ``O_CREAT | O_EXCL``; GCS: ``if_generation_match=0``; S3:
    ``If-None-Match: *``. Other stores: an existence check, then a write (not atomic, see
    ``creates_atomically``)."""
    s = scheme(uri)
    if s == "":
        return _create_local(uri, data)
    if s == GCS:
        return _create_gcs(uri, data)
    if s == S3:
        return _create_s3(uri, data)
    if FileSystems.exists(uri):
        return False
    with FileSystems.create(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return True


def _create_local(path: str, data: bytes) -> bool:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


def _create_gcs(uri: str, data: bytes) -> bool:
    from google.api_core import exceptions

    bucket, key = split_bucket(uri)
    blob = _gcs_client().bucket(bucket).blob(key)
    try:
        # Generation 0 means "no live object": GCS refuses the upload if one exists.
        blob.upload_from_string(data, if_generation_match=0)
    except exceptions.PreconditionFailed:
        return False
    return True


def _create_s3(uri: str, data: bytes) -> bool:
    from botocore.exceptions import ClientError

    bucket, key = split_bucket(uri)
    try:
        _s3_client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        # 412: the object exists; 409: another conditional write of it is in flight.
        if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
            return False
        raise
    return True
