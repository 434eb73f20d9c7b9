"""``chunkmill export``: the whole current state with its text, even after ``runs gc``."""

from __future__ import annotations

import hashlib
import json
import shutil

import pyarrow.parquet as pq
import pytest

from chunkmill.pipeline.cli import main
from tests.e2e.conftest import prose

pytestmark = pytest.mark.slow


def test_export_after_gc_holds_every_current_chunk_with_its_text(chunkmill, corpus, capsys):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    (corpus / "guides" / "faq.md").unlink()
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    last = chunkmill("--input", str(corpus / "**"), run_id="r2")
    output = last.dir.parents[1]
    assert main(["runs", "gc", "--output", str(output), "--keep", "0"]) == 0
    destination = output.parent / "state"

    assert "deleted  r1" in capsys.readouterr().out  # its text is in the store
    assert main(["export", "--output", str(output), "--to", str(destination)]) == 0
    capsys.readouterr()
    exported = pq.read_table(destination).to_pylist()
    assert sorted(r["chunk_id"] for r in exported) == sorted(
        r["chunk_id"] for r in last.rows("manifest")
    )
    for row in exported:
        embedded = row["text_with_context"] or row["text"]
        assert hashlib.sha256(embedded.encode()).hexdigest() == row["chunk_hash"]
    marker = json.loads((destination / "_EXPORT").read_text())
    assert marker["run_id"] == "r2" and marker["rows"] == len(exported)


def test_export_replaces_its_previous_files_and_refuses_a_foreign_folder(
    chunkmill, corpus, capsys, tmp_path
):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    (corpus / "notes.txt").unlink()
    chunkmill("--input", str(corpus / "**"), run_id="r2")
    destination = tmp_path / "state"
    export = ["export", "--output", str(output), "--to", str(destination)]
    assert main([*export, "--run", "r1"]) == 0
    assert main(export) == 0
    names = sorted(p.name for p in destination.iterdir())
    assert names == ["_EXPORT", "state-r2-00000-of-00001.parquet"]

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.csv").write_text("a,b\n")
    capsys.readouterr()
    assert main(["export", "--output", str(output), "--to", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--to" in err and "not an export" in err


def test_export_refuses_a_state_whose_text_was_deleted_by_hand(chunkmill, corpus, capsys, tmp_path):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    (corpus / "added.md").write_text("# Added\n\n" + prose("added", 2))
    chunkmill("--input", str(corpus / "**"), run_id="r2")
    shutil.rmtree(output / "text" / "r1")  # r1 added the text of every chunk r2 carried
    destination = tmp_path / "state"
    assert main(["export", "--output", str(output), "--to", str(destination)]) == 1
    assert "have no text" in capsys.readouterr().err
    assert not destination.exists() or not any(destination.iterdir())
