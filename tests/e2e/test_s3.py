"""The CLI end to end on S3 (moto's server on loopback): s3:// input and output through boto3
and Beam's S3 filesystem, the incremental re-run reading nothing unchanged, tables equal to
the same runs on local disk; a read pinned to the listed ETag; a missing bucket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkmill import ids, schema, stores
from chunkmill.pipeline.cli import main
from chunkmill.transforms import runstate, storage
from tests.e2e.stores import comparable, read_table, s3_emulator, s3_env, store_env

pytestmark = pytest.mark.slow

BUCKET = "corpus"
OUT_BUCKET = "chunks"


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with s3_emulator() as url:
        yield url


@pytest.fixture
def s3(emulator: str) -> Iterator[object]:
    """A boto3 client on the emulator, with two fresh buckets."""
    import urllib.request

    import boto3

    # moto's own API: forget every bucket of the previous test.
    urllib.request.urlopen(urllib.request.Request(f"{emulator}/moto-api/reset", method="POST"))
    with store_env(s3_env(emulator)):
        client = boto3.client("s3")
        for name in (BUCKET, OUT_BUCKET):
            client.create_bucket(Bucket=name)
        yield client


def upload(client, corpus: Path, prefix: str = "docs") -> str:
    for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(corpus).as_posix()}"
        client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
    return f"s3://{BUCKET}/{prefix}/"


def run(*args: str) -> None:
    assert main(["run", *args, "--runner=FnApiRunner"]) == 0


def report(output: str, run_id: str) -> dict:
    return json.loads(runstate.read_text(f"{output}/runs/{run_id}/{runstate.SUCCESS}"))


def test_s3_runs_equal_local_runs_and_the_rerun_reads_nothing_unchanged(s3, corpus, tmp_path):
    root = upload(s3, corpus)
    s3.put_object(Bucket=BUCKET, Key="docs/empty-folder/", Body=b"")  # a directory marker
    out = f"s3://{OUT_BUCKET}/out"
    local_out = str(tmp_path / "local")

    for run_id in ("r1", "r2"):
        run("--input", f"{root}**", "--output", out, "--run-id", run_id)
        run("--input", str(corpus / "**"), "--output", local_out, "--run-id", run_id)

    assert report(out, "r1")["counts"] == report(local_out, "r1")["counts"]
    c = report(out, "r2")["counts"]
    assert c == report(local_out, "r2")["counts"]
    # Every ETag is unchanged, the corrupt PDF's too: nothing is read.
    assert (c["docs_listed"], c["docs_read"], c["chunks_to_embed"]) == (6, 0, 0)

    for run_id in ("r1", "r2"):
        for table in schema.TABLES:
            on_s3 = read_table(f"{out}/runs/{run_id}/{table}")
            on_disk = read_table(f"{local_out}/runs/{run_id}/{table}")
            assert comparable(on_s3, root) == comparable(on_disk, str(corpus) + "/"), table
            for r in on_s3:
                assert r["doc_id"] == ids.doc_id(r["source_uri"])
                if table != "errors":
                    assert r["source_version"].startswith("etag=")

    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=OUT_BUCKET)["Contents"]]
    assert [k for k in keys if "LATEST" in k] == ["out/LATEST"]
    # Nothing temporary is left: no staged occurrences, no unnamed table file.
    assert not [k for k in keys if "/.temp-" in k]
    latest = s3.get_object(Bucket=OUT_BUCKET, Key="out/LATEST")["Body"].read()
    assert latest.decode().strip() == "r2"
    # `chunkmill report` reaches the run on S3 too.
    assert main(["report", "--output", out]) == 0
    page = s3.get_object(Bucket=OUT_BUCKET, Key="out/runs/r2/report.html")["Body"].read()
    assert b"r2" in page


def test_objects_overwritten_or_deleted_mid_run_are_error_rows(s3, corpus, monkeypatch):
    root = upload(s3, corpus)
    out = f"s3://{OUT_BUCKET}/out"
    real = storage.read_object

    def meddle_then_read(uri, version=None, **kwargs):
        # FnApiRunner runs the DoFns in this process, so the patch reaches the read stage.
        if uri.endswith("notes.txt"):
            s3.put_object(Bucket=BUCKET, Key="docs/notes.txt", Body=b"rewritten meanwhile")
        if uri.endswith("faq.md"):
            s3.delete_object(Bucket=BUCKET, Key="docs/guides/faq.md")
        return real(uri, version, **kwargs)

    monkeypatch.setattr(storage, "read_object", meddle_then_read)
    run("--input", f"{root}**", "--output", out, "--run-id", "r1")
    c = report(out, "r1")["counts"]
    assert (c["docs_listed"], c["docs_processed"]) == (6, 3)
    assert c["failed_by_reason"] == {"changed": 1, "corrupt": 1, "vanished": 1}
    reasons = {
        r["source_uri"][len(root) :]: r["reason"] for r in read_table(f"{out}/runs/r1/errors")
    }
    assert reasons == {"notes.txt": "changed", "guides/faq.md": "vanished", "broken.pdf": "corrupt"}
    # Neither half-read document left a chunk behind.
    uris = {r["source_uri"] for r in read_table(f"{out}/runs/r1/manifest")}
    assert f"{root}notes.txt" not in uris and f"{root}guides/faq.md" not in uris


def test_read_is_pinned_to_the_listed_etag(s3):
    s3.put_object(Bucket=BUCKET, Key="docs/a.md", Body=b"first version")
    (listed,) = [f for x in storage.plan(f"s3://{BUCKET}/docs/*") for f in storage.list_shard(x)]
    assert storage.read_object(listed.uri, listed.version) == b"first version"
    s3.put_object(Bucket=BUCKET, Key="docs/a.md", Body=b"second version, longer")
    with pytest.raises(stores.SourceChanged, match="overwritten"):
        storage.read_object(listed.uri, listed.version)
    s3.delete_object(Bucket=BUCKET, Key="docs/a.md")
    with pytest.raises(stores.SourceVanished):
        storage.read_object(listed.uri, listed.version)


def test_missing_bucket_is_a_one_line_error_naming_it(s3, capsys):
    code = main(["run", "--input", "s3://no-such-bucket/docs/**", "--output", "s3://chunks/o"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == "chunkmill: error: argument --input: bucket s3://no-such-bucket does not exist"
