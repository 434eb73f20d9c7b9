"""The text store (docs/text-store.md): the whole current text readable from LATEST on every
night, grown by what is new, compacted by ``runs gc`` without ever losing live text, also when
gc is killed between its steps."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunkmill.api import read_chunks
from chunkmill.pipeline.cli import main
from chunkmill.transforms import parquet_io, textstore
from tests.e2e.conftest import prose

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def store_hashes(output: Path, run_id: str) -> tuple[list[str], set[str]]:
    """Every hash in the files ``run_id``'s _TEXT names (with repeats), and its dead ones."""
    index = textstore.read_index(str(output), run_id)
    assert index is not None
    hashes = [
        h for p in index.paths(str(output)) for h in pq.read_table(p)["chunk_hash"].to_pylist()
    ]
    dead = set(textstore.dead_hashes(str(output), index).to_pylist())
    return hashes, dead


def manifest_hashes(run) -> set[str]:
    return {r["chunk_hash"] for r in run.rows("manifest")}


def store_files(output: Path) -> set[str]:
    return {str(p.relative_to(output)) for p in (output / "text").rglob("*.parquet")}


def gc(output: Path, *args: str) -> int:
    return main(["runs", "gc", "--output", str(output), "--keep", "0", *args])


def three_nights(chunkmill, corpus: Path):
    """r1; r2 edits a paragraph, deletes a document, adds one; r3 changes nothing."""
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    (corpus / "guides" / "faq.md").unlink()
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    r2 = chunkmill("--input", str(corpus / "**"), run_id="r2")
    r3 = chunkmill("--input", str(corpus / "**"), run_id="r3")
    return r1, r2, r3


def exported(output: Path, capsys) -> list[dict]:
    destination = output.parent / "state"
    assert main(["export", "--output", str(output), "--to", str(destination)]) == 0
    capsys.readouterr()
    return pq.read_table(destination).to_pylist()


def test_each_night_adds_only_its_new_text_and_names_every_live_hash_once(chunkmill, corpus):
    r1, r2, r3 = three_nights(chunkmill, corpus)
    output = r1.dir.parents[1]
    for run in (r1, r2, r3):
        hashes, dead = store_hashes(output, run.dir.name)
        assert len(hashes) == len(set(hashes))  # never a hash twice
        assert set(hashes) - dead == manifest_hashes(run)
        assert not dead & manifest_hashes(run)
    # r2's store file holds exactly its chunks/ (written where its rows were decided, named
    # as it is: none of its hashes was dead); r3 (unchanged) wrote none.
    (r2_file,) = sorted((output / "text" / "r2").glob("part-*.parquet"))
    assert "text/r2/part-00000-of-00001.parquet" in textstore.read_index(str(output), "r2").named()
    assert sorted(pq.read_table(r2_file)["chunk_hash"].to_pylist()) == sorted(
        r["chunk_hash"] for r in r2.rows("chunks")
    )
    assert not (output / "text" / "r3").exists()
    # r2's dead hashes are what it retired.
    _, dead = store_hashes(output, "r2")
    assert dead == {r["chunk_hash"] for r in r2.rows("retired")} and dead


def test_a_run_names_the_text_written_where_its_rows_were_decided(chunkmill, corpus, monkeypatch):
    read: list[str] = []
    real = parquet_io.read_parquet_batches

    def reading(paths, *args, **kwargs):
        read.extend(str(p) for p in paths)
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(parquet_io, "read_parquet_batches", reading)
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    r2 = chunkmill("--input", str(corpus / "**"), run_id="r2")
    output = r1.dir.parents[1]
    # Publishing read no chunks/ back: each run's store file is the one written beside them.
    assert not [p for p in read if "/chunks/" in p]
    for run in (r1, r2):
        index = textstore.read_index(str(output), run.dir.name)
        own = {f"text/{run.dir.name}/part-00000-of-00001.parquet"}
        assert own <= index.named() and index.dead is None
        # The store's columns of its file: the run's chunks/ file, named again.
        text = output / next(iter(own))
        rows = pq.read_table(text, columns=textstore.TEXT_SCHEMA.names).to_pylist()
        chunks = run.dir / "chunks" / "part-00000-of-00001.parquet"
        assert text.read_bytes() == chunks.read_bytes()
        assert sorted(rows, key=lambda r: r["chunk_hash"]) == sorted(
            (
                {k: r[k] for k in ("chunk_hash", "text", "text_with_context")}
                for r in run.rows("chunks")
            ),
            key=lambda r: r["chunk_hash"],
        )
    hashes, dead = store_hashes(output, "r2")
    assert sorted(hashes) == sorted(manifest_hashes(r2)) and not dead


def test_a_refused_run_leaves_no_text_in_the_store(chunkmill, corpus, capsys):
    argv = ["run", "--input", str(corpus / "**"), "--output", str(corpus.parent / "out")]
    # The corpus has a document that fails: more than none of them is refused.
    assert main([*argv, "--run-id", "r1", "--max-error-ratio", "0"]) == 2
    assert "--max-error-ratio" in capsys.readouterr().err
    assert (corpus.parent / "out" / "runs" / "r1").exists()
    assert not list((corpus.parent / "out").glob("text/r1/*"))


def test_a_revived_hash_is_live_again_not_written_twice(chunkmill, corpus):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    faq = corpus / "guides" / "faq.md"
    text = faq.read_text()
    faq.unlink()
    r2 = chunkmill("--input", str(corpus / "**"), run_id="r2")
    faq.write_text(text)  # back: its hashes are dead in the store, now live again
    r3 = chunkmill("--input", str(corpus / "**"), run_id="r3")
    output = r1.dir.parents[1]
    assert r3.counts["chunks_to_embed"] > 0
    hashes, dead = store_hashes(output, "r3")
    assert len(hashes) == len(set(hashes)) and not dead
    assert set(hashes) == manifest_hashes(r3) == manifest_hashes(r1)
    # Every hash of r3's chunks/ was dead in the store: the text it wrote where it decided
    # its rows is neither named nor left behind, and nothing is written in its place.
    assert not {f for f in textstore.read_index(str(output), "r3").named() if "/r3/" in f}
    assert not list((output / "text" / "r3").glob("*.parquet"))
    _, dead2 = store_hashes(output, "r2")
    assert dead2 == manifest_hashes(r1) - manifest_hashes(r2)


def test_gc_keep_0_lets_old_runs_go_and_keeps_all_live_text(chunkmill, corpus, capsys):
    r1, r2, r3 = three_nights(chunkmill, corpus)
    output = r1.dir.parents[1]
    before = exported(output, capsys)
    assert gc(output) == 0
    out = capsys.readouterr().out
    assert "deleted  r1" in out and "deleted  r2" in out and "holds the only text" not in out
    assert sorted(p.name for p in (output / "runs").iterdir()) == ["r3"]
    after = exported(output, capsys)
    assert sorted(after, key=lambda r: r["chunk_id"]) == sorted(before, key=lambda r: r["chunk_id"])
    assert {r["chunk_id"] for r in after} == {r["chunk_id"] for r in r3.rows("manifest")}
    state = list(read_chunks(str(output)))
    assert [r["chunk_id"] for r in state] == [
        r["chunk_id"] for r in sorted(after, key=lambda r: (r["source_uri"], r["chunk_index"]))
    ]


def test_gc_compacts_dead_text_away_and_live_text_stays(chunkmill, corpus, capsys):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    for name in ("guides/faq.md", "notes.txt", "tool.py"):
        (corpus / name).unlink()
    r2 = chunkmill("--input", str(corpus / "**"), "--max-removed-ratio", "1", run_id="r2")
    hashes, dead = store_hashes(output, "r2")
    assert len(dead) / len(hashes) > textstore.COMPACT_DEAD_SHARE
    before = exported(output, capsys)
    files = store_files(output)
    assert gc(output, "--dry-run") == 0
    assert "would compact the text of r2" in capsys.readouterr().out
    assert store_files(output) == files and (output / "runs" / "r1").exists()
    assert gc(output) == 0
    assert "compacted the text of r2" in capsys.readouterr().out
    hashes, dead = store_hashes(output, "r2")
    assert set(hashes) == manifest_hashes(r2) and len(hashes) == len(set(hashes)) and not dead
    # Every file left under text/ is one the index names: the dead text is gone from disk.
    index = textstore.read_index(str(output), "r2")
    assert index is not None and store_files(output) == index.named()
    on_disk = {
        h for f in store_files(output) for h in pq.read_table(output / f)["chunk_hash"].to_pylist()
    }
    assert on_disk == manifest_hashes(r2)
    assert sorted(exported(output, capsys), key=lambda r: r["chunk_id"]) == sorted(
        before, key=lambda r: r["chunk_id"]
    )
    # The next night adds to the compacted store.
    (corpus / "new.md").write_text("# New\n\n" + prose("new", 2))
    r3 = chunkmill("--input", str(corpus / "**"), run_id="r3")
    hashes, dead = store_hashes(output, "r3")
    assert set(hashes) == manifest_hashes(r3) and not dead


_GC_STOPPED_AT = """
import sys
import time
from chunkmill.pipeline.cli import main
from chunkmill.transforms import parquet_io, textstore

step = sys.argv[2]
real = {"compact": textstore.compact, "write_index": textstore.write_index,
        "sweep": textstore.sweep}


def dies(name):
    def stop(*args, **kwargs):
        if name == "write_index":  # dies after the compacted files are written
            raise SystemExit(9)
        if name == "sweep":  # dies after the index is swapped, before anything is deleted
            raise SystemExit(9)
        return real[name](*args, **kwargs)
    return stop


setattr(textstore, step, dies(step))
sys.exit(main(["runs", "gc", "--output", sys.argv[1], "--keep", "0"]))
"""


@pytest.mark.parametrize("step", ["write_index", "sweep"])
def test_gc_killed_between_its_steps_loses_nothing_and_the_next_gc_finishes(
    chunkmill, corpus, capsys, tmp_path, step
):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    for name in ("guides/faq.md", "notes.txt", "tool.py"):
        (corpus / name).unlink()
    r2 = chunkmill("--input", str(corpus / "**"), "--max-removed-ratio", "1", run_id="r2")
    before = exported(output, capsys)
    script = tmp_path / "gc_dies.py"
    script.write_text(_GC_STOPPED_AT)
    env_path = f"{ROOT}"
    died = subprocess.run(
        [sys.executable, str(script), str(output), step],
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert died.returncode == 9, died.stderr
    # LATEST still reads whole.
    assert (output / "LATEST").read_text().strip() == "r2"
    state = sorted(read_chunks(str(output)), key=lambda r: r["chunk_id"])
    assert [r["chunk_id"] for r in state] == sorted(r["chunk_id"] for r in before)
    assert [r["text"] for r in state] == [
        r["text"] for r in sorted(before, key=lambda r: r["chunk_id"])
    ]
    # The next gc finishes the work: no dead text left, nothing lost.
    assert gc(output) == 0
    capsys.readouterr()
    index = textstore.read_index(str(output), "r2")
    assert index is not None and store_files(output) == index.named() and index.dead is None
    assert sorted(exported(output, capsys), key=lambda r: r["chunk_id"]) == sorted(
        before, key=lambda r: r["chunk_id"]
    )
    assert {r["chunk_hash"] for r in before} == manifest_hashes(r2)


def test_gc_deletes_nothing_when_latest_s_index_is_damaged(chunkmill, corpus, capsys):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    chunkmill("--input", str(corpus / "**"), run_id="r2")
    output = r1.dir.parents[1]
    (output / "runs" / "r2" / "_TEXT").write_text("{not json")
    assert gc(output) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "deletes nothing" in err and "_TEXT" in err
    assert (output / "runs" / "r1").exists()


def test_gc_keeps_the_text_of_a_run_in_flight(chunkmill, corpus, capsys):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    # A run in flight: claimed, its text written, not yet published (its process alive).
    folder = output / "text" / "r9"
    folder.mkdir(parents=True)
    (folder / "text-0.parquet").write_bytes(
        (output / "runs" / "r1" / "chunks").glob("*").__next__().read_bytes()
    )
    claim = {
        "run_id": "r9",
        "started_at": "2099-01-01T00:00:00.000000Z",
        "prior_run_id": "r1",
        "prior_manifest": None,
    }
    (output / "runs" / "r9").mkdir()
    (output / "runs" / "r9" / "_CLAIM").write_text(json.dumps(claim))
    assert gc(output) == 0
    capsys.readouterr()
    assert (folder / "text-0.parquet").exists()  # unfinished run: its text stays
    assert gc(output, "--grace-hours", "0") == 0  # declared dead: its run and text go
    capsys.readouterr()
    assert not (folder / "text-0.parquet").exists()
    assert store_files(output) == textstore.read_index(str(output), "r1").named()


def test_the_quickstart_query_returns_every_current_chunk_after_an_unchanged_night(
    chunkmill, corpus, tmp_path
):
    r1 = chunkmill("--input", str(corpus / "**"), output=tmp_path / "chunks", run_id="r1")
    r2 = chunkmill("--input", str(corpus / "**"), output=tmp_path / "chunks", run_id="r2")
    assert r2.counts["chunks_to_embed"] == 0 and r2.table("chunks").num_rows == 0
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Reading the current state")[1].split("\n## ")[0]
    (query,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "read_state" in b]
    shown = subprocess.run(
        ["python", "-c", query],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert shown.returncode == 0, shown.stderr
    rows = sorted(r1.rows("manifest"), key=lambda r: (r["source_uri"], r["chunk_index"]))
    assert f"{len(rows)} current chunks" in shown.stdout
    assert rows[0]["source_uri"] in shown.stdout


@pytest.fixture(scope="module")
def object_stores():
    from tests.e2e.stores import gcs_emulator, s3_emulator

    with gcs_emulator() as gcs, s3_emulator() as s3:
        yield {"gs": gcs, "s3": s3}


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_the_store_grows_and_compacts_on_object_stores(object_stores, corpus, capsys, scheme):
    from apache_beam.io.filesystems import FileSystems

    from tests.e2e.stores import gcs_env, read_table, s3_env, store_env

    url = object_stores[scheme]
    with store_env(gcs_env(url) if scheme == "gs" else s3_env(url)):
        if scheme == "gs":
            from google.cloud import storage as gcs_lib

            client = gcs_lib.Client()
            if client.bucket("textstore").exists():
                client.bucket("textstore").delete(force=True)
            client.create_bucket("textstore")
        else:
            import boto3

            boto3.client("s3").create_bucket(Bucket="textstore")
        output = f"{scheme}://textstore/out"

        def run(run_id: str, *args: str) -> None:
            argv = ["run", "--input", str(corpus / "**"), "--output", output, "--run-id", run_id]
            assert main([*argv, *args, "--runner=FnApiRunner"]) == 0, capsys.readouterr().err

        run("r1")
        for name in ("guides/faq.md", "notes.txt", "tool.py"):
            (corpus / name).unlink()
        run("r2", "--max-removed-ratio", "1")
        run("r3")
        assert main(["runs", "gc", "--output", output, "--keep", "0"]) == 0
        out = capsys.readouterr().out
        assert "compacted the text of r3" in out and "deleted  r1" in out
        manifest = read_table(f"{output}/runs/r3/manifest")
        state = list(read_chunks(output))
        assert sorted(r["chunk_id"] for r in state) == sorted(r["chunk_id"] for r in manifest)
        index = textstore.read_index(output, "r3")
        assert index is not None and index.dead is None
        (listed,) = FileSystems.match([f"{output}/text/**"])
        assert {m.path[len(output) + 1 :] for m in listed.metadata_list} == index.named()


def test_the_first_run_after_runs_without_a_store_starts_it_whole(chunkmill, corpus, capsys):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    (corpus / "guides" / "faq.md").unlink()
    chunkmill("--input", str(corpus / "**"), run_id="r2")
    output = corpus.parent / "out"
    shutil.rmtree(output / "text")  # as a release before the store left them
    for index in (output / "runs").glob("*/_TEXT"):
        index.unlink()
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    r3 = chunkmill("--input", str(corpus / "**"), run_id="r3")
    hashes, dead = store_hashes(output, "r3")
    assert sorted(hashes) == sorted(manifest_hashes(r3)) and not dead
    assert gc(output) == 0
    assert "deleted  r1" in capsys.readouterr().out
    assert {r["chunk_id"] for r in read_chunks(str(output))} == {
        r["chunk_id"] for r in r3.rows("manifest")
    }


def test_a_run_publishing_while_gc_compacts_its_prior_names_the_compacted_text(
    chunkmill, corpus, capsys, monkeypatch
):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    old_files = textstore.read_index(str(output), "r1").named()
    real_write_index = textstore.write_index
    compactions = []

    def gc_meanwhile(out: str, run_id: str, index: textstore.TextIndex) -> None:
        # gc compacts r1's text after r2 read it and before r2 reads it again.
        if run_id == "r2" and not compactions:
            prior = textstore.read_index(out, "r1")
            compactions.append(textstore.compact(out, "r1", prior))
        real_write_index(out, run_id, index)

    monkeypatch.setattr(textstore, "write_index", gc_meanwhile)
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    r2 = chunkmill("--input", str(corpus / "**"), run_id="r2")
    monkeypatch.undo()
    assert compactions
    index = textstore.read_index(str(output), "r2")
    assert index is not None and not index.named() & old_files
    assert compactions[0].named() <= index.named()
    assert main(["runs", "gc", "--output", str(output), "--keep", "0"]) == 0
    capsys.readouterr()
    assert not any((output / f).exists() for f in old_files)
    hashes, dead = store_hashes(output, "r2")
    assert sorted(hashes) == sorted(manifest_hashes(r2)) and not dead


@pytest.mark.parametrize("damage", ["file deleted", "index garbled"])
def test_a_run_over_a_damaged_store_is_refused_at_launch(chunkmill, corpus, capsys, damage):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    if damage == "file deleted":
        (output / "text" / "r1" / "part-00000-of-00001.parquet").unlink()
        named = "part-00000-of-00001.parquet"
    else:
        (r1.dir / textstore.INDEX).write_text('{"files": 3}')
        named = "r1"
    for command in ("run", "plan"):
        argv = [command, "--input", str(corpus / "**"), "--output", str(output), "--run-id", "r2"]
        assert main(argv) == 2, command
        err = capsys.readouterr().err
        assert "text store of the prior run r1 cannot be used" in err and named in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert (output / "LATEST").read_text().strip() == "r1"
    assert not (output / "runs" / "r2").exists()  # refused before the run claimed a folder


_GC_PAUSED_BEFORE_ITS_INDEX = """
import pathlib, sys, time
from chunkmill.pipeline.cli import main
from chunkmill.transforms import parquet_io, textstore

real = textstore.write_index
go = pathlib.Path(sys.argv[2])


def paused(*args, **kwargs):  # the compacted files are written, not yet named
    go.with_suffix(".waiting").touch()
    while not go.exists():
        time.sleep(0.05)
    return real(*args, **kwargs)


textstore.write_index = paused
sys.exit(main(["runs", "gc", "--output", sys.argv[1], "--keep", "0"]))
"""


def test_a_second_gc_while_one_compacts_is_refused_and_deletes_nothing(
    chunkmill, corpus, capsys, tmp_path
):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    for name in ("guides/faq.md", "notes.txt", "tool.py"):
        (corpus / name).unlink()
    r2 = chunkmill("--input", str(corpus / "**"), "--max-removed-ratio", "1", run_id="r2")
    before = sorted(exported(output, capsys), key=lambda r: r["chunk_id"])
    script, go = tmp_path / "gc_pauses.py", tmp_path / "go"
    script.write_text(_GC_PAUSED_BEFORE_ITS_INDEX)
    first = subprocess.Popen(
        [sys.executable, str(script), str(output), str(go)],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not go.with_suffix(".waiting").exists():
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        written = store_files(output)  # with the compaction's files, named by no index yet
        assert gc(output) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "another runs gc is running" in err[0], err
        assert store_files(output) == written and (output / "runs" / "r1").exists()
    finally:
        go.touch()
        out, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert "compacted the text of r2" in out
    assert not (output / "_GC").exists()  # released
    index = textstore.read_index(str(output), "r2")
    assert index is not None and store_files(output) == index.named()
    assert sorted(exported(output, capsys), key=lambda r: r["chunk_id"]) == before
    assert {r["chunk_hash"] for r in before} == manifest_hashes(r2)
    assert gc(output) == 0  # the lease is free again


def test_a_gc_killed_holding_its_lease_does_not_stop_the_next(chunkmill, corpus, capsys):
    r1 = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = r1.dir.parents[1]
    chunkmill("--input", str(corpus / "**"), run_id="r2")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")  # renewed: its pid is gone
    (output / "_GC").write_text(
        json.dumps({"token": "t", "host": socket.gethostname(), "pid": int(dead.stdout),
                    "started_at": now, "renewed_at": now})
    )  # fmt: skip
    assert gc(output) == 0
    assert "deleted  r1" in capsys.readouterr().out
    assert not (output / "_GC").exists()
