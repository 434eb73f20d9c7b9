"""The Python API makes exactly the chunks a run makes: ``chunk_text(extract_text(...))`` on
sample documents against the ``chunks/`` rows of ``chunkmill run`` on the same files, and the
README's Beam example (``chunkmill.ChunkCorpus`` in a pipeline of one's own) against both."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest

import chunkmill as api
from chunkmill.pipeline.options import SAMPLE_CORPUS

pytestmark = pytest.mark.slow

SAMPLES = ["design/retries.md", "notes/multilingual-utf8.txt", "pdfs/memo.pdf", "code/debounce.js"]
FIELDS = ("start", "end", "token_count", "chunk_hash", "section_path", "page_start", "page_end")


def _as_api(row: dict) -> tuple:
    path = row["section_path"]
    return (
        row["char_start"],
        row["char_end"],
        row["token_count"],
        row["chunk_hash"],
        None if path is None else tuple(path),
        row["page_start"],
        row["page_end"],
    )


def test_the_api_and_a_run_make_the_same_chunks(tmp_path: Path, chunkmill):
    docs = tmp_path / "docs"
    for name in SAMPLES:
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE_CORPUS / name, docs / name)
    run = chunkmill("--input", f"{docs}/**", "--prior-manifest", "none", run_id="r1")
    manifest = run.table("manifest").to_pylist()
    texts = {r["chunk_hash"]: r["text"] for r in run.table("chunks").to_pylist()}
    for name in SAMPLES:
        uri = str(docs / name)
        rows = sorted(
            (r for r in manifest if r["source_uri"] == uri), key=lambda r: r["chunk_index"]
        )
        assert rows, name
        made = api.chunk_text(api.extract_text((docs / name).read_bytes(), uri), name=uri)
        assert [tuple(getattr(c, f) for f in FIELDS) for c in made] == [_as_api(r) for r in rows]
        assert [c.text for c in made] == [texts[r["chunk_hash"]] for r in rows]

    # The documented example of ChunkCorpus inside a pipeline of one's own, on the same files:
    # its function (the page then runs it on a corpus of its own).
    page = (Path(__file__).parents[2] / "docs" / "python-api.md").read_text()
    example = re.findall(r"```python\n(.*?)```", page.split("## Chunking and extracting")[1], re.S)[
        1
    ]
    scope: dict = {}
    exec(compile(example.split("\nwith beam.Pipeline()")[0], "python-api.md", "exec"), scope)
    with beam.Pipeline() as p:
        scope["chunk_folder"](p, f"{docs}/**", str(tmp_path / "own"), "mine")
    own = pq.read_table(tmp_path / "own" / "runs" / "mine" / "chunks").to_pylist()
    # The staged occurrences went with the run's temporary folder.
    assert not list((tmp_path / "own" / "runs" / "mine").glob(".temp-*"))
    expected = {
        c.chunk_hash
        for name in SAMPLES
        for c in api.chunk_text(
            api.extract_text((docs / name).read_bytes(), str(docs / name)),
            "paragraph",
            name=str(docs / name),
            max_tokens=400,
        )
    }
    assert {r["chunk_hash"] for r in own} == expected
