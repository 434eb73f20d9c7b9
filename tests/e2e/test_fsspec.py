"""The CLI end to end on an fsspec source (fsspec's in-memory filesystem, which FnApiRunner
shares with this process): listed and read through fsspec, tables equal to the same runs on
local disk; the listing gives no version, so the content SHA-256 decides what is unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator

import fsspec
import pytest

from chunkmill import schema
from chunkmill.pipeline.cli import main
from tests.e2e.stores import comparable, read_table

pytestmark = pytest.mark.slow


@pytest.fixture
def memfs() -> Iterator[object]:
    fs = fsspec.filesystem("memory")
    yield fs
    if fs.exists("/corpus"):
        fs.rm("/corpus", recursive=True)


def test_fsspec_source_runs_equal_local_runs_with_sha256_as_the_fallback(memfs, corpus, tmp_path):
    for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
        memfs.pipe(f"/corpus/{path.relative_to(corpus).as_posix()}", path.read_bytes())
    out, local_out = str(tmp_path / "mem-out"), str(tmp_path / "local-out")
    for run_id in ("r1", "r2"):
        for pattern, output in (("memory://corpus/**", out), (str(corpus / "**"), local_out)):
            argv = ["run", "--input", pattern, "--output", output, "--run-id", run_id]
            assert main([*argv, "--runner=FnApiRunner"]) == 0

    second = read_table(f"{out}/runs/r2/manifest")
    assert second and all(r["source_version"] is None for r in second)
    counts = json.loads((tmp_path / "mem-out/runs/r2/_SUCCESS").read_text())["counts"]
    # No version from the listing: every document is read, and its SHA-256 carries it over.
    assert (counts["docs_read"], counts["docs_carried_over"], counts["chunks_to_embed"]) == (
        6,
        5,
        0,
    )
    for run_id in ("r1", "r2"):
        for table in schema.TABLES:
            mem = read_table(f"{out}/runs/{run_id}/{table}")
            disk = read_table(f"{local_out}/runs/{run_id}/{table}")
            assert comparable(mem, "memory:///corpus/") == comparable(disk, str(corpus) + "/")
