"""ChunkCorpus's read stage with a store that pins versions: the listed version reaches the
reader, and an object gone or overwritten since the listing is an errors/ row with its own
reason code that keeps the document's prior rows, never a failed job."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import stores
from chunkmill.items import SourceFile
from chunkmill.transforms.core import ChunkCorpus
from tests.helpers import SMALL, manifest_rows, paragraphs, whole_tables, write_prior

DATA = paragraphs("steady", "text")


class PinningStore:
    """Answers like an object store whose objects moved on after the listing: each uri maps
    to the version it holds now (None: deleted); reads of another version fail as
    ``storage.read_object`` does."""

    def __init__(self, now: dict[str, str | None]) -> None:
        self.now = now

    def __call__(self, uri: str, version: str | None = None, max_bytes=None) -> bytes:
        current = self.now[uri]
        if current is None:
            raise stores.SourceVanished(f"{uri} no longer exists")
        if version != current:
            raise stores.SourceChanged(f"{uri} was overwritten after {version} was listed")
        return DATA


def test_vanished_and_changed_objects_are_errors_that_keep_their_prior_rows(tmp_path):
    listed = {"/c/same.md": "gen=1", "/c/gone.md": "gen=1", "/c/moved.md": "gen=1"}
    now = {"/c/same.md": "gen=1", "/c/gone.md": None, "/c/moved.md": "gen=2"}
    # Prior rows of another version, so every document is read.
    prior = [
        {**r, "source_version": "gen=0"}
        for uri in ("/c/gone.md", "/c/moved.md")
        for r in manifest_rows(uri, paragraphs("older", "text"))
    ]
    parts = write_prior(prior, str(tmp_path), row_group_rows=2)
    with TestPipeline(runner="FnApiRunner") as p:
        files = p | "Files" >> beam.Create([SourceFile(u, len(DATA), v) for u, v in listed.items()])
        out = {"files": files, "prior": p | "Prior" >> beam.Create(parts)} | ChunkCorpus(
            config=SMALL, read_bytes=PinningStore(now)
        )
        assert_that(
            out["errors"]
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Map(lambda r: (r["source_uri"], r["stage"], r["reason"])),
            equal_to([("/c/gone.md", "read", "vanished"), ("/c/moved.md", "read", "changed")]),
        )
        assert_that(
            out["counts"]
            | beam.Map(lambda c: (c["docs_processed"], c["docs_failed"], c["failed_by_reason"])),
            equal_to([(1, 2, {"changed": 1, "vanished": 1})]),
            label="Counts",
        )
        # A failure never removes anything: the prior rows of both stay in the manifest.
        assert_that(whole_tables(out, "removed"), equal_to([]), label="NothingRemoved")
        assert_that(
            whole_tables(out, "manifest")
            | beam.FlatMap(lambda t: t.to_pylist())
            | beam.Filter(lambda r: r["source_uri"] != "/c/same.md")
            | beam.Map(lambda r: r["chunk_id"]),
            equal_to([r["chunk_id"] for r in prior]),
            label="PriorKept",
        )
