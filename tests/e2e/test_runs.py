"""The CLI end to end on real files: first run, no-op re-run, edit, delete, corrupt PDF."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunkmill import ids, schema
from tests.e2e.conftest import assert_schemas, prose

pytestmark = pytest.mark.slow


def test_first_run_writes_every_table_and_publishes(chunkmill, corpus, tmp_path):
    run = chunkmill("--input", str(corpus / "**"), run_id="r1")
    assert_schemas(run)
    c = run.counts
    assert (c["docs_listed"], c["docs_processed"], c["docs_failed"]) == (6, 5, 1)
    assert c["docs_carried_over"] == 0 and c["chunks_removed"] == 0
    assert c["failed_by_reason"] == {"corrupt": 1}
    assert (tmp_path / "out" / "LATEST").read_text().strip() == "r1"
    assert run.report["prior"] == {
        "mode": "auto",
        "run_id": None,
        "manifest": None,
        "errors": [],
        "after": None,  # the first run of its chain
    }

    (error,) = run.rows("errors")
    assert error["source_uri"].endswith("broken.pdf") and error["reason"] == "corrupt"

    manifest, chunks = run.rows("manifest"), run.rows("chunks")
    assert all(r["is_new"] for r in manifest)
    assert len(chunks) == len({r["chunk_hash"] for r in manifest}) == c["chunks_to_embed"]
    assert c["tokens_to_embed"] == sum(r["token_count"] for r in chunks)
    # The offset contract, against the source text.
    for r in chunks:
        if r["doc_format"] != "pdf":
            text = Path(r["source_uri"]).read_text()
            assert text[r["char_start"] : r["char_end"]] == r["text"]
        assert ids.chunk_hash(r["text"]) == r["chunk_hash"]
    pdf = [r for r in manifest if r["source_uri"].endswith("report.pdf")]
    assert {r["page_start"] for r in pdf} >= {1} and max(r["page_end"] for r in pdf) == 2
    assert all(r["page_start"] is None for r in manifest if r["doc_format"] != "pdf")


def test_rerun_without_change_embeds_nothing_and_carries_everything(chunkmill, corpus):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    c = second.counts
    assert c["docs_carried_over"] == 5 and c["docs_processed"] == 0
    # The corrupt PDF failed last night and is unchanged: it fails again, unread.
    assert c["docs_failed"] == 1 and c["docs_failed_not_retried"] == 1
    # The listing's size and mtime are unchanged: nothing is read.
    assert c["docs_read"] == 0
    assert c["chunks_to_embed"] == 0 and second.table("chunks").num_rows == 0
    assert c["chunks_removed"] == 0
    assert second.report["prior"]["run_id"] == "r1"
    strip = [{k: v for k, v in r.items() if k != "is_new"} for r in first.rows("manifest")]
    assert [{k: v for k, v in r.items() if k != "is_new"} for r in second.rows("manifest")] == strip
    assert not any(r["is_new"] for r in second.rows("manifest"))


def test_touched_file_is_read_once_then_skipped_again(chunkmill, corpus):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    notes = corpus / "notes.txt"
    st = notes.stat()
    os.utime(notes, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # same bytes
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    assert second.counts["docs_read"] == 1  # notes.txt (the failed PDF is unchanged)
    assert second.counts["docs_carried_over"] == 5 and second.counts["chunks_to_embed"] == 0
    versions = {
        r["source_version"] for r in second.rows("manifest") if r["source_uri"] == str(notes)
    }
    assert versions == {f"size={st.st_size};mtime={notes.stat().st_mtime!r}"}
    third = chunkmill("--input", str(corpus / "**"), run_id="r3")
    assert third.counts["docs_read"] == 0


def test_edit_rechunks_only_that_file_and_only_changed_chunks_are_new(chunkmill, corpus):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    start = corpus / "guides" / "start.md"
    text = start.read_text()
    # Same length, so greedy packing after the edit is unchanged whatever the strategy.
    start.write_text(text.replace("start paragraph 5:", "start paragraph V:"))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    c = second.counts
    assert (c["docs_processed"], c["docs_carried_over"]) == (1, 4)
    new = [r for r in second.rows("manifest") if r["is_new"]]
    assert new and all(r["source_uri"] == str(start) for r in new)
    assert len(new) < len([r for r in first.rows("manifest") if r["source_uri"] == str(start)])
    assert {r["chunk_hash"] for r in second.rows("chunks")} == {r["chunk_hash"] for r in new}
    removed = second.rows("removed")
    assert removed and {r["removed_reason"] for r in removed} == {schema.DOCUMENT_CHANGED}
    assert {r["source_uri"] for r in removed} == {str(start)}


def test_deleted_file_yields_its_removed_rows(chunkmill, corpus):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    faq = corpus / "guides" / "faq.md"
    faq.unlink()
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    gone = sorted(r["chunk_id"] for r in first.rows("manifest") if r["source_uri"] == str(faq))
    removed = second.rows("removed")
    assert sorted(r["chunk_id"] for r in removed) == gone
    assert {r["removed_reason"] for r in removed} == {schema.DOCUMENT_REMOVED}
    assert second.counts["docs_removed"] == 1 and second.counts["docs_listed"] == 5


def test_failure_after_success_keeps_prior_rows(chunkmill, corpus):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    report = corpus / "report.pdf"
    before = report.read_bytes()
    report.write_bytes(before[:100])
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    assert second.counts["failed_by_reason"] == {"corrupt": 2}
    kept = [r for r in second.rows("manifest") if r["source_uri"] == str(report)]
    assert kept and all(r["content_sha256"] == ids.sha256_hex(before) for r in kept)
    assert second.table("removed").num_rows == 0


def test_runs_are_identical_across_modes_and_bundle_repeats(chunkmill, corpus, tmp_path):
    # Adds a document that makes many chunks, so bundles really split.
    (corpus / "long.md").write_text(prose("long", 80))
    modes = {
        "default": [],
        "multi": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
        "repeat": ["--runner=FnApiRunner", "--direct_runner_bundle_repeat=2"],
    }
    runs = {
        name: chunkmill("--input", str(corpus / "**"), *args, output=tmp_path / name, run_id="r")
        for name, args in modes.items()
    }
    for table in schema.TABLES:
        expected = runs["default"].rows(table)
        assert expected or table in ("removed", "retired")  # a first run removes nothing
        for name in ("multi", "repeat"):
            assert runs[name].rows(table) == expected, (name, table)
    assert runs["multi"].counts == runs["default"].counts == runs["repeat"].counts


def test_prior_manifest_none_and_path(chunkmill, corpus, tmp_path):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    fresh = chunkmill("--input", str(corpus / "**"), "--prior-manifest", "none", run_id="r2")
    assert fresh.counts["docs_carried_over"] == 0 and fresh.report["prior"]["mode"] == "none"
    # Diffing against an explicit run folder equals diffing against LATEST.
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "out" / "runs" / "r1", moved)
    explicit = chunkmill("--input", str(corpus / "**"), "--prior-manifest", str(moved), run_id="r3")
    assert explicit.counts["docs_carried_over"] == 5
    assert explicit.report["prior"]["mode"] == "path"


def test_a_run_that_breaks_publishes_nothing(chunkmill, corpus, tmp_path, monkeypatch, capsys):
    from chunkmill import document
    from chunkmill.pipeline.cli import main

    chunkmill("--input", str(corpus / "**"), run_id="r1")
    (corpus / "notes.txt").write_text("changed, so it is processed again")
    real = document.process_document

    def explode(item, *args):
        if item.uri.endswith("notes.txt"):
            raise RuntimeError("a bug, not a bad document")
        return real(item, *args)

    # FnApiRunner runs DoFns in this process, so the patch reaches them.
    monkeypatch.setattr(document, "process_document", explode)
    out = tmp_path / "out"
    argv = ["run", "--input", str(corpus / "**"), "--output", str(out), "--run-id", "r2"]
    assert main([*argv, "--runner=FnApiRunner"]) == 1
    err = capsys.readouterr().err
    assert "run r2 failed before publishing; LATEST names r1" in err
    assert (out / "LATEST").read_text().strip() == "r1"
    assert not (out / "runs" / "r2" / "_SUCCESS").exists()


def test_gc_leaves_the_text_of_every_chunk_latest_lists_without_a_text_store(
    chunkmill, corpus, capsys
):
    """Three nights of edits, a deletion and an addition by a release before the text store
    (no _TEXT, no text/), then ``runs gc --keep 0``: the chunks/ tables left hold the text of
    every chunk the current manifest lists."""
    import shutil

    from chunkmill.pipeline.cli import main

    chunkmill("--input", str(corpus / "**"), run_id="r1")
    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    (corpus / "guides" / "faq.md").unlink()
    chunkmill("--input", str(corpus / "**"), run_id="r2")
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    last = chunkmill("--input", str(corpus / "**"), run_id="r3")
    output = last.dir.parents[1]
    shutil.rmtree(output / "text")
    for index in (output / "runs").glob("*/_TEXT"):
        index.unlink()
    assert main(["runs", "gc", "--output", str(output), "--keep", "0"]) == 0
    printed = capsys.readouterr().out
    # r1 first chunked what r2 and r3 carried over; r2 holds start.md's edited chunks.
    assert "kept  r1  (holds the only text of" in printed
    assert "kept  r2  (holds the only text of" in printed
    texts = {
        row["chunk_hash"]
        for path in (output / "runs").glob("*/chunks/*.parquet")
        for row in pq.read_table(path, columns=["chunk_hash"]).to_pylist()
    }
    assert {r["chunk_hash"] for r in last.rows("manifest")} <= texts
