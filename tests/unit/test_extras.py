"""Cloud stores are extras: a location whose store is not installed is a one-line usage
error naming the extra, for every command that takes a location."""

from __future__ import annotations

import sys

import pytest

from chunkmill import extras
from chunkmill.pipeline.cli import main

GCP = "gs:// needs chunkmill's gcp extra: pip install 'chunkmill[gcp]'"
AWS = "s3:// needs chunkmill's aws extra: pip install 'chunkmill[aws]'"


@pytest.fixture
def without_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if neither extra were installed: their modules cannot be found."""
    for module in ("google.cloud.storage", "boto3"):
        monkeypatch.setitem(sys.modules, module, None)


def test_installed_extras_need_nothing() -> None:
    # The test environment installs both extras.
    for location in ("gs://bucket/docs/**", "s3://bucket/out", "/local/out", "memory://x", "out"):
        assert extras.missing_extra(location) is None


def test_a_missing_extra_is_named(without_cloud: None) -> None:
    assert extras.missing_extra("gs://bucket/docs/**") == GCP
    assert extras.missing_extra("S3://bucket/out") == AWS.replace("s3://", "S3://")
    assert extras.missing_extra("/local/out") is None
    assert extras.missing_extra("az://container/docs") is None  # fsspec's, not an extra


@pytest.mark.parametrize(
    ("argv", "flag", "message"),
    [
        (["run", "--input", "gs://b/docs/**", "--output", "OUT"], "--input", GCP),
        (["run", "--output", "s3://b/out"], "--output", AWS),
        (
            ["run", "--output", "OUT", "--prior-manifest", "gs://b/out/runs/r1"],
            "--prior-manifest",
            GCP,
        ),
        (["report", "--output", "gs://b/out"], "--output", GCP),
        (["plan", "--output", "s3://b/out"], "--output", AWS),
        (["runs", "list", "--output", "gs://b/out"], "--output", GCP),
        (["export", "--output", "OUT", "--to", "s3://b/export"], "--to", AWS),
        (["embed", "--output", "gs://b/out"], "--output", GCP),
        (["sync", "--output", "s3://b/out", "--to", "postgresql://u@h/db"], "--output", AWS),
        (["query", "q", "--output", "gs://b/out", "--to", "postgresql://u@h/db"], "--output", GCP),
        (
            ["run", "--output", "OUT", "--runner", "DataflowRunner"],
            "--runner",
            "DataflowRunner needs chunkmill's gcp extra: pip install 'chunkmill[gcp]'",
        ),
    ],
)
def test_every_command_names_the_extra_a_location_needs(
    without_cloud: None, tmp_path, capsys, argv: list[str], flag: str, message: str
) -> None:
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"chunkmill: error: argument {flag}: {message}"]
