"""The edge composites (transforms/sources.py, sinks.py, publish.py) under TestPipeline, on
hand-written inputs: ListFiles, ReadManifest, ReadPriorErrors, WriteTables and PublishRun,
each on its own."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import ids, schema
from chunkmill.items import ListedDocs, PriorError, PriorPart, Skipped, SourceFile
from chunkmill.refusal import RunRefused
from chunkmill.transforms import prior, publish, sinks, sources

H1, H2 = "a" * 64, "b" * 64


def manifest_row(doc: str, index: int, chunk_hash: str) -> dict:
    """One manifest row written out by hand: literal values only."""
    return {
        "chunk_id": f"{doc[0]}{index}".ljust(32, "0"),
        "chunk_hash": chunk_hash,
        "doc_id": doc.ljust(32, "0"),
        "source_uri": f"/c/{doc}.md",
        "chunk_index": index,
        "char_start": 10 * index,
        "char_end": 10 * index + 9,
        "token_count": 3,
        "strategy": "paragraph",
        "config_fingerprint": "f" * 32,
        "content_sha256": "c" * 64,
        "doc_format": "markdown",
        "is_new": True,
    }


def pipeline() -> TestPipeline:
    return TestPipeline(runner="FnApiRunner")


# -- ListFiles -----------------------------------------------------------------------------


def _listed_files(element: object) -> list[tuple[str, int]]:
    """The documents of one ``ListedDocs`` as (uri, size); nothing for another element."""
    if not isinstance(element, ListedDocs):
        return []
    rows = prior.from_ipc(element.message, sources.LISTING).to_pylist()
    assert {prior.doc_bucket(r["doc_id"]) for r in rows} == {element.bucket}
    assert all(r["doc_id"] == ids.doc_id(r["uri"]) for r in rows)
    return [(r["uri"], r["size_bytes"]) for r in rows]


def test_list_files_finds_documents_and_skips_what_is_not_text_or_is_excluded(tmp_path: Path):
    # A folder it cannot list is an errors/ row: tests/e2e/test_listing.py drops the
    # permission (the tests run as root, who lists anything).
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# a")
    (docs / "sub" / "b.txt").write_text("b")
    (docs / "logo.png").write_bytes(b"\x89PNG")
    (docs / "drafts").mkdir()
    (docs / "drafts" / "c.md").write_text("c")
    with pipeline() as p:
        listed = p | sources.ListFiles([f"{docs}/**"], exclude=["drafts/**"])
        assert_that(
            listed | beam.FlatMap(_listed_files),
            equal_to([(f"{docs}/a.md", 3), (f"{docs}/sub/b.txt", 1)]),
            label="files",
        )
        assert_that(
            listed | beam.Filter(lambda x: isinstance(x, SourceFile)),
            equal_to([]),  # documents leave the listing as Arrow rows only
            label="no element per document",
        )
        skipped = listed | beam.Filter(lambda x: isinstance(x, Skipped))
        assert_that(
            skipped | beam.Map(lambda s: s.uri),
            equal_to([f"{docs}/logo.png", f"{docs}/drafts/c.md"]),  # not text; --exclude
            label="skipped",
        )


def test_list_files_finds_an_object_two_patterns_match_under_each(tmp_path: Path):
    (tmp_path / "a.md").write_text("a")
    with pipeline() as p:
        listed = p | sources.ListFiles([f"{tmp_path}/*.md", f"{tmp_path}/**"])
        # Listed by both patterns; ChunkCorpus joins them into one document by doc_id.
        assert_that(
            listed | beam.FlatMap(_listed_files),
            equal_to([(f"{tmp_path}/a.md", 1), (f"{tmp_path}/a.md", 1)]),
        )


def test_a_listing_hold_sends_its_documents_by_bucket_when_full(monkeypatch):
    monkeypatch.setattr(sources, "LISTING_HOLD", 3)
    hold = sources.ListingHold()
    files = [SourceFile(f"/c/{i}.md", i, f"v{i}") for i in range(7)]
    sent = [docs for f in files for docs in hold.add(f)]
    assert sum(len(_listed_files(d)) for d in sent) == 6  # two full holds
    sent += hold.release()
    assert hold.release() == []
    assert sorted(row for d in sent for row in _listed_files(d)) == sorted(
        (f.uri, f.size_bytes) for f in files
    )
    # One message per bucket of each hold: a bucket's documents travel together.
    assert len(sent) == sum(
        len({prior.doc_bucket(ids.doc_id(f.uri)) for f in files[i : i + 3]}) for i in (0, 3, 6)
    )


# -- ReadManifest --------------------------------------------------------------------------


def test_read_manifest_yields_every_row_group_of_exactly_the_files_given(tmp_path: Path):
    rows = [manifest_row("d1", i, H1 if i % 2 else H2) for i in range(5)]
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.MANIFEST), path, row_group_size=2)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.MANIFEST), tmp_path / "stray.parquet")
    with pipeline() as p:
        parts = p | sources.ReadManifest([str(path)])
        assert_that(parts, equal_to([PriorPart(str(path), g) for g in range(3)]))


def test_read_manifest_of_one_part_yields_it_without_a_grouping(tmp_path: Path):
    rows = [manifest_row("d1", i, H1) for i in range(3)]
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.MANIFEST), path)
    with pipeline() as p:
        parts = p | "ReadManifest" >> sources.ReadManifest([str(path)])
        assert_that(parts, equal_to([PriorPart(str(path), 0)]))
        steps = [
            type(applied.transform).__name__
            for applied in p.transforms_stack[0].parts
            if applied.full_label == "ReadManifest"
            for applied in applied.parts
        ]
    assert "GroupByKey" not in steps and steps, steps


def test_read_manifest_of_no_files_is_empty_and_of_a_damaged_file_refuses_the_run(
    tmp_path: Path,
):
    with pipeline() as p:
        assert_that(p | sources.ReadManifest([]), equal_to([]))
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(b"PAR1 cut short")
    with pytest.raises(Exception) as raised, pipeline() as p:
        _ = p | sources.ReadManifest([str(cut)])
    assert "cut.parquet" in str(raised.value)
    assert isinstance(raised.value, RunRefused) or "RunRefused" in str(raised.value)


# -- ReadPriorErrors -----------------------------------------------------------------------


def test_read_prior_errors_yields_one_prior_error_per_row(tmp_path: Path):
    path = tmp_path / "errors.parquet"
    rows = [
        {
            "doc_id": "d1",
            "source_uri": "/c/d1.pdf",
            "stage": "extract",
            "reason": "corrupt",
            "message": "bad xref",
            "size_bytes": 10,
            "content_sha256": "c" * 64,
            "versions": "chunkmill 0",
            "source_version": "gen=7",
            "attempt_key": "k" * 32,
            "attempted": True,
        }
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.ERRORS), path)
    with pipeline() as p:
        errors = p | sources.ReadPriorErrors([str(path)])
        expected = PriorError("gen=7", "k" * 32, "extract", "corrupt", "bad xref", "c" * 64)
        assert_that(errors, equal_to([("d1", expected)]))


# -- WriteTables ---------------------------------------------------------------------------


def test_write_tables_writes_each_table_with_its_schema_and_checksums(tmp_path: Path):
    manifest = pa.Table.from_pylist([manifest_row("d1", i, H1) for i in range(3)], schema.MANIFEST)
    out = tmp_path / "out"
    with pipeline() as p:
        inputs = {
            name: p | f"Rows{name}" >> beam.Create([manifest] if name == "manifest" else [])
            for name in schema.TABLES
        }
        written = inputs | sinks.WriteTables(str(out), "r1")
        assert_that(
            written | beam.Map(lambda paths: sorted(Path(p).parent.name for p in paths)),
            equal_to([sorted(schema.TABLES)]),
        )
    run = out / "runs" / "r1"
    assert sorted(p.name for p in run.iterdir()) == sorted(schema.TABLES)
    (path,) = (run / "manifest").iterdir()
    read = pq.ParquetFile(path, page_checksum_verification=True)
    assert read.schema_arrow.equals(schema.MANIFEST, check_metadata=True)
    assert read.read().to_pylist() == manifest.to_pylist()


# -- PublishRun ----------------------------------------------------------------------------


def _publish(out: Path, run_id: str, counts: dict, report: dict, policy=None) -> None:
    run = out / "runs" / run_id / "manifest"
    run.mkdir(parents=True)
    path = run / "part-00000-of-00001.parquet"
    manifest = pa.Table.from_pylist([manifest_row("d1", 0, H1)], schema.MANIFEST)
    pq.write_table(manifest, path)
    with pipeline() as p:
        inputs = {
            "counts": p | "Counts" >> beam.Create([counts]),
            "written": p | "Written" >> beam.Create([[str(path)]]),
        }
        _ = inputs | publish.PublishRun(str(out), run_id, report, policy or publish.PublishPolicy())


def test_publish_run_writes_success_with_every_file_then_latest(tmp_path: Path):
    counts = {"docs_listed": 1, "docs_failed": 0}
    report = {"run_id": "r1", "started_at": "2026-11-23T00:00:00Z"}
    _publish(tmp_path, "r1", counts, report)
    success = json.loads((tmp_path / "runs" / "r1" / "_SUCCESS").read_text())
    assert success["counts"] == counts
    (entry,) = success["tables"]["manifest"]
    assert entry["path"] == "manifest/part-00000-of-00001.parquet" and entry["rows"] == 1
    assert (tmp_path / "LATEST").read_text().strip() == "r1"


def test_publish_run_refuses_a_night_over_the_error_ratio_and_publishes_nothing(tmp_path: Path):
    counts = {"docs_listed": 4, "docs_failed": 3}
    report = {"run_id": "r1", "started_at": "2026-11-23T00:00:00Z"}
    with pytest.raises(Exception, match="--max-error-ratio"):
        _publish(tmp_path, "r1", counts, report, publish.PublishPolicy(max_error_ratio=0.5))
    assert not (tmp_path / "runs" / "r1" / "_SUCCESS").exists()
    assert not (tmp_path / "LATEST").exists()
