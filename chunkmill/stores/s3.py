"""S3 through boto3 (the client Beam's S3 filesystem wraps): versions are ETags with sizes,
reads are pinned with ``If-Match``, claims use ``If-None-Match: *``."""

from __future__ import annotations

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
    split_bucket,
)

# botocore's "standard" mode retries throttling (429, SlowDown) and 5xx with exponential
# backoff and jitter; ten attempts ride out a few seconds of throttling.
_MAX_ATTEMPTS = 10


def _client() -> Any:
    def make() -> Any:
        import boto3
        from botocore.config import Config

        # The endpoint, region and credentials come from the standard AWS places
        # (AWS_ENDPOINT_URL, AWS_REGION, ~/.aws, instance roles).
        config = Config(retries={"mode": "standard", "max_attempts": _MAX_ATTEMPTS})
        return boto3.session.Session().client("s3", config=config)

    return client("s3", make)


def _entry(o: dict[str, Any]) -> tuple[str, int, str]:
    size = int(o["Size"])
    return o["Key"], size, str(SourceVersion.s3(o["ETag"], size))


class S3Store(BucketStore):
    def __init__(self, billing_project: str | None = None) -> None:
        # S3 bills the requester's own account; the flag only says "I agree to pay".
        self._payer = {"RequestPayer": "requester"} if billing_project else {}

    def _pages(self, bucket: str, prefix: str, delimiter: str | None) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, **self._payer}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        yield from _client().get_paginator("list_objects_v2").paginate(**kwargs)

    def list_level(self, bucket: str, prefix: str) -> Iterator[Entry]:
        for page in self._pages(bucket, prefix, "/"):
            for o in page.get("Contents", []):
                yield _entry(o)
            for p in page.get("CommonPrefixes", []):
                yield p["Prefix"]

    def list_prefix(
        self, bucket: str, prefix: str, recursive: bool
    ) -> Iterator[tuple[str, int, str]]:
        for page in self._pages(bucket, prefix, None if recursive else "/"):
            for o in page.get("Contents", []):
                yield _entry(o)

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        from botocore.exceptions import ClientError

        bucket, key = split_bucket(uri)
        parsed = SourceVersion.parse(version)
        etag = None if parsed is None else parsed.etag
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, **self._payer}
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        uri = f"s3://{bucket}/{key}"  # as listed, whatever the case of the scheme given
        try:
            body = _client().get_object(**kwargs)["Body"]
            try:
                return bytes(body.read() if max_bytes is None else body.read(max_bytes + 1))
            finally:
                body.close()
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                raise SourceVanished(f"{uri} no longer exists") from None
            if code in ("PreconditionFailed", "412"):
                raise SourceChanged(f"{uri} was overwritten after ETag {etag} was listed") from None
            raise

    def check(self, uri: str) -> None:
        from botocore.exceptions import ClientError

        bucket = split_bucket(uri)[0]
        name = f"s3://{bucket}"
        try:
            _client().head_bucket(Bucket=bucket)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise StoreAccessError(f"bucket {name} does not exist") from None
            if code in ("403", "AccessDenied", "Forbidden"):
                raise StoreAccessError(
                    f"permission denied on bucket {name}: s3:ListBucket (HeadBucket)"
                ) from None
            raise

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = split_bucket(uri)
        try:
            _client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            # 412: the object exists; 409: another conditional write of it is in flight.
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return False
            raise
        return True
