"""A run proves its state before it publishes: damage the prior run's files, or remove most
of the corpus, and the next run exits 2 with one line, publishing nothing (no ``_SUCCESS``,
``LATEST`` unchanged), through the CLI as a user runs it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunkmill.pipeline.cli import main
from tests.e2e.conftest import prose

# Two workers: the first run writes its manifest as more than one file, so one can go missing
# while the others still read.
TWO_FILES = ("--direct_num_workers=2", "--direct_running_mode=multi_threading")


def refuse(out: Path, corpus: Path, capsys, *args: str) -> str:
    """Runs r2 against ``out`` and returns its one line; asserts exit 2 and nothing published."""
    latest = (out / "LATEST").read_text()
    argv = ["run", "--input", str(corpus / "**"), "--output", str(out), "--run-id", "r2", *args]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("chunkmill: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert not (out / "runs" / "r2" / "_SUCCESS").exists()
    assert (out / "LATEST").read_text() == latest
    return lines[0]


def _flip_a_middle_hash(path: Path) -> None:
    """One hex digit of a chunk_hash changed inside the page data: same size, still hex. The
    same digit wherever the file holds the hash (a page header's or the footer's min/max
    statistics may hold it too, before the page data), so the page data is changed."""
    hashes = sorted(pq.read_table(path, columns=["chunk_hash"])["chunk_hash"].to_pylist())
    victim = hashes[len(hashes) // 2].encode()
    data = bytearray(path.read_bytes())
    at = data.find(victim)
    assert at >= 0
    while at >= 0:
        data[at + 5] = ord("0") if data[at + 5] != ord("0") else ord("1")
        at = data.find(victim, at + 1)
    path.write_bytes(bytes(data))


def _cut_success(run: Path) -> None:
    text = (run / "_SUCCESS").read_text()
    (run / "_SUCCESS").write_text(text[: len(text) // 2])


def _cut_file(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


# name: (damage to the first run's folder, arguments of the second run, words of the line)
DAMAGES: dict[str, tuple[Callable[[Path], None], tuple[str, ...], tuple[str, ...]]] = {
    "missing manifest file": (
        lambda r1: (r1 / "manifest" / "part-00001-of-00002.parquet").unlink(),
        (),
        ("prior run r1 is missing manifest/part-00001-of-00002.parquet", "--prior-manifest"),
    ),
    "truncated manifest file": (
        # The second file: only the first one's footer was ever looked at before.
        lambda r1: _cut_file(r1 / "manifest" / "part-00001-of-00002.parquet"),
        (),
        ("manifest/part-00001-of-00002.parquet has", "bytes but its _SUCCESS records"),
    ),
    "truncated _SUCCESS": (_cut_success, (), ("prior run r1 did not finish", "_SUCCESS")),
    "no _SUCCESS": (
        lambda r1: (r1 / "_SUCCESS").unlink(),
        (),
        ("prior run r1 did not finish (it has no _SUCCESS)",),
    ),
    "chunks folder as prior": (
        lambda r1: None,
        ("--prior-manifest", "{r1}/chunks"),
        ("--prior-manifest", "is the chunks table of run", "not a manifest"),
    ),
    "flipped bytes": (
        lambda r1: _flip_a_middle_hash(r1 / "manifest" / "part-00000-of-00002.parquet"),
        (),
        ("part-00000-of-00002.parquet cannot be used", "nothing was published", "none"),
    ),
}


@pytest.mark.slow
def test_a_damaged_prior_run_is_refused_in_one_line_and_nothing_is_published(
    chunkmill, corpus, tmp_path, capsys
):
    first = chunkmill("--input", str(corpus / "**"), *TWO_FILES, run_id="r1")
    listed = [e["path"] for e in first.report["tables"]["manifest"]]
    assert listed == [
        "manifest/part-00000-of-00002.parquet",
        "manifest/part-00001-of-00002.parquet",
    ]
    for name, (damage, args, words) in DAMAGES.items():
        out = tmp_path / name.replace(" ", "-")
        shutil.copytree(tmp_path / "out", out)
        r1 = out / "runs" / "r1"
        damage(r1)
        line = refuse(out, corpus, capsys, *(a.format(r1=r1) for a in args))
        for word in words:
            assert word in line, (name, line)

    # A stray file beside the listed ones (a copy left by hand) is not part of the manifest:
    # a glob would carry its rows over twice.
    out = tmp_path / "stray"
    shutil.copytree(tmp_path / "out", out)
    manifest = out / "runs" / "r1" / "manifest"
    shutil.copy(manifest / "part-00000-of-00002.parquet", manifest / "copy.parquet")
    second = chunkmill("--input", str(corpus / "**"), output=out, run_id="r2")
    assert second.counts["chunks_total"] == first.counts["chunks_total"]
    assert len(second.table("manifest")) == len(first.table("manifest"))


@pytest.mark.slow
def test_a_run_removing_most_documents_is_refused_unless_told(chunkmill, tmp_path, capsys):
    corpus = tmp_path / "many"
    corpus.mkdir()
    for i in range(20):
        (corpus / f"note-{i:02d}.txt").write_text(prose(f"note{i}", 2))
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    for i in range(2, 20):  # what a glob that now matches a tenth of the corpus looks like
        (corpus / f"note-{i:02d}.txt").unlink()
    out = tmp_path / "out"

    plan = main(["plan", "--input", str(corpus / "**"), "--output", str(out)])
    printed = capsys.readouterr().out
    assert plan == 0
    assert "removes 18 of 20 documents" in printed and "--max-removed-ratio 0.5" in printed

    line = refuse(out, corpus, capsys)
    assert line == (
        "chunkmill: run r2 failed: the run removes 18 of 20 documents of the prior run (90.0%), "
        "more than --max-removed-ratio 0.5; nothing was published. If this is intended, re-run "
        "with --max-removed-ratio 1"
    )
    told = chunkmill("--input", str(corpus / "**"), "--max-removed-ratio", "1", run_id="r3")
    assert told.counts["docs_removed"] == 18 and told.counts["docs_prior"] == 20
    assert told.report["limits"]["max_removed_ratio"] == 1
    assert (out / "LATEST").read_text().strip() == "r3"
    assert json.loads((out / "runs" / "r3" / "_SUCCESS").read_text())["counts"]["docs_listed"] == 2
