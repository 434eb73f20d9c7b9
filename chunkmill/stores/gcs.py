"""Google Cloud Storage through google-cloud-storage (the client Beam's GcsIO wraps): versions
are generations, reads are pinned with ``if_generation_match``, claims use generation 0."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from chunkmill.items import SourceVersion
from chunkmill.stores.base import (
    BucketStore,
    Entry,
    SourceChanged,
    SourceVanished,
    StoreAccessError,
    client,
    first_line,
    split_bucket,
)


def _client() -> Any:
    from google.cloud import storage  # type: ignore[attr-defined]

    # With STORAGE_EMULATOR_HOST set the client talks to the emulator anonymously;
    # otherwise Application Default Credentials.
    return client("gcs", storage.Client)


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


class GcsStore(BucketStore):
    def __init__(self, billing_project: str | None = None) -> None:
        self.billing_project = billing_project  # requester-pays buckets: the project billed
        # Beam's GcsIO in this (worker) process, which writes the tables, connects to an
        # emulator anonymously too.
        use_anonymous_gcs_for_emulator()

    def _bucket(self, bucket: str) -> Any:
        return _client().bucket(bucket, user_project=self.billing_project)

    def list_level(self, bucket: str, prefix: str) -> Iterator[Entry]:
        blobs = self._bucket(bucket).list_blobs(prefix=prefix, delimiter="/")
        for b in blobs:
            yield b.name, int(b.size or 0), str(SourceVersion.gcs(b.generation))
        # The client gathers the prefixes page by page; all are known once every page is read.
        yield from sorted(blobs.prefixes)

    def list_prefix(
        self, bucket: str, prefix: str, recursive: bool
    ) -> Iterator[tuple[str, int, str]]:
        blobs = self._bucket(bucket).list_blobs(prefix=prefix, delimiter=None if recursive else "/")
        for b in blobs:
            yield b.name, int(b.size or 0), str(SourceVersion.gcs(b.generation))

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        from google.api_core import exceptions

        bucket, key = split_bucket(uri)
        parsed = SourceVersion.parse(version)
        generation = None if parsed is None or parsed.generation is None else int(parsed.generation)
        blob = self._bucket(bucket).blob(key)
        uri = f"gs://{bucket}/{key}"  # as listed, whatever the case of the scheme given
        try:
            # Retried on 429/5xx by the client's default policy; the precondition makes
            # every chunk of a large download come from the listed generation.
            return bytes(blob.download_as_bytes(if_generation_match=generation))
        except exceptions.NotFound:
            raise SourceVanished(f"{uri} no longer exists") from None
        except exceptions.PreconditionFailed:
            raise SourceChanged(
                f"{uri} was overwritten after generation {generation} was listed"
            ) from None

    def check(self, uri: str) -> None:
        from google.api_core import exceptions

        bucket = split_bucket(uri)[0]
        name = f"gs://{bucket}"
        try:
            next(iter(self._bucket(bucket).list_blobs(max_results=1)), None)
        except exceptions.NotFound:
            raise StoreAccessError(f"bucket {name} does not exist") from None
        except exceptions.Forbidden as e:
            raise StoreAccessError(
                f"permission denied on bucket {name}: listing objects (storage.objects.list): "
                f"{first_line(e.message)}"
            ) from None

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        from google.api_core import exceptions

        bucket, key = split_bucket(uri)
        blob = _client().bucket(bucket).blob(key)
        try:
            # Generation 0 means "no live object": GCS refuses the upload if one exists.
            blob.upload_from_string(data, if_generation_match=0)
        except exceptions.PreconditionFailed:
            return False
        return True
