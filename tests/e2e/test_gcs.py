"""The CLI end to end on GCS (gcp-storage-emulator on loopback): gs:// input and output, the
incremental re-run reading nothing unchanged, tables equal to the same runs on local disk;
objects deleted mid-run, directory markers, a missing bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkmill import ids, schema
from chunkmill.pipeline.cli import main
from chunkmill.transforms import storage
from tests.e2e.stores import comparable, gcs_emulator, gcs_env, read_table, store_env

pytestmark = pytest.mark.slow

BUCKET = "corpus"
OUT_BUCKET = "chunks"


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with gcs_emulator() as url:
        yield url


@pytest.fixture
def gcs(emulator: str) -> Iterator[object]:
    """A google-cloud-storage client on the emulator, with two fresh buckets."""
    with store_env(gcs_env(emulator)):
        from google.cloud import storage as gcs_lib

        client = gcs_lib.Client()
        for name in (BUCKET, OUT_BUCKET):
            bucket = client.bucket(name)
            if bucket.exists():
                bucket.delete(force=True)
            client.create_bucket(name)
        yield client


def upload(client, corpus: Path, prefix: str = "docs") -> str:
    bucket = client.bucket(BUCKET)
    for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
        bucket.blob(f"{prefix}/{path.relative_to(corpus).as_posix()}").upload_from_filename(path)
    return f"gs://{BUCKET}/{prefix}/"


def run(*args: str) -> None:
    code = main(["run", *args, "--runner=FnApiRunner"])
    assert code == 0


def report(output: str, run_id: str) -> dict:
    import json

    from chunkmill.transforms import runstate

    return json.loads(runstate.read_text(f"{output}/runs/{run_id}/{runstate.SUCCESS}"))


def test_gcs_runs_equal_local_runs_and_the_rerun_reads_nothing_unchanged(gcs, corpus, tmp_path):
    root = upload(gcs, corpus)
    # A zero-byte "directory marker", as the console's "create folder" makes: not a document.
    gcs.bucket(BUCKET).blob("docs/empty-folder/").upload_from_string(b"")
    out = f"gs://{OUT_BUCKET}/out"
    local_out = str(tmp_path / "local")

    for run_id in ("r1", "r2"):
        run("--input", f"{root}**", "--output", out, "--run-id", run_id)
        run("--input", str(corpus / "**"), "--output", local_out, "--run-id", run_id)

    first, second = report(out, "r1"), report(out, "r2")
    assert first["counts"] == report(local_out, "r1")["counts"]
    assert second["counts"] == report(local_out, "r2")["counts"]
    c = second["counts"]
    assert (c["docs_listed"], c["docs_carried_over"], c["docs_failed"]) == (6, 5, 1)
    # Every generation is unchanged, the corrupt PDF's too (it fails again, unread).
    assert c["docs_read"] == 0 and c["chunks_to_embed"] == 0

    for run_id in ("r1", "r2"):
        for table in schema.TABLES:
            on_gcs = read_table(f"{out}/runs/{run_id}/{table}")
            on_disk = read_table(f"{local_out}/runs/{run_id}/{table}")
            assert comparable(on_gcs, root) == comparable(on_disk, str(corpus) + "/"), table
            for r in on_gcs:
                assert r["doc_id"] == ids.doc_id(r["source_uri"])
                if table != "errors":
                    assert r["source_version"].startswith("gen=")

    # The output contract on GCS: both runs published, LATEST names the last one and its
    # staging copy was renamed away.
    names = sorted(b.name for b in gcs.list_blobs(OUT_BUCKET))
    assert "out/runs/r1/_SUCCESS" in names and "out/runs/r2/_SUCCESS" in names
    assert [n for n in names if "LATEST" in n] == ["out/LATEST"]
    assert gcs.bucket(OUT_BUCKET).blob("out/LATEST").download_as_text().strip() == "r2"
    # Nothing temporary is left: no staged occurrences, no unnamed table file.
    assert not [n for n in names if "/.temp-" in n]
    # `chunkmill report` reaches the run on GCS too.
    assert main(["report", "--output", out]) == 0
    assert "r2" in gcs.bucket(OUT_BUCKET).blob("out/runs/r2/report.html").download_as_text()


def test_object_deleted_between_listing_and_reading_is_a_vanished_row(
    gcs, corpus, monkeypatch, tmp_path
):
    root = upload(gcs, corpus)
    out = f"gs://{OUT_BUCKET}/out"
    real = storage.read_object

    def delete_then_read(uri, version=None, **kwargs):
        # FnApiRunner runs the DoFns in this process, so the patch reaches the read stage.
        if uri.endswith("notes.txt"):
            gcs.bucket(BUCKET).blob("docs/notes.txt").delete()
        return real(uri, version, **kwargs)

    monkeypatch.setattr(storage, "read_object", delete_then_read)
    run("--input", f"{root}**", "--output", out, "--run-id", "r1")
    c = report(out, "r1")["counts"]
    assert c["docs_listed"] == 6 and c["failed_by_reason"] == {"corrupt": 1, "vanished": 1}
    errors = {r["source_uri"]: r for r in read_table(f"{out}/runs/r1/errors")}
    vanished = errors[f"{root}notes.txt"]
    assert (vanished["stage"], vanished["reason"]) == ("read", "vanished")


def test_missing_bucket_is_a_one_line_error_naming_it(gcs, capsys):
    code = main(["run", "--input", "gs://no-such-bucket/docs/**", "--output", "gs://chunks/o"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == "chunkmill: error: argument --input: bucket gs://no-such-bucket does not exist"
    code = main(["run", "--input", f"gs://{BUCKET}/**", "--output", "gs://no-out-bucket/o"])
    assert code == 2
    assert "argument --output: bucket gs://no-out-bucket does not exist" in capsys.readouterr().err
