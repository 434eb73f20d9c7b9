"""The prior manifest's two composites under TestPipeline, each on its own: SummarisePrior
(a summary per document and part, and the part's hash counts) and ApplyPriorVerdicts (each
part's rows kept or removed by the verdicts on its documents)."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import ids, schema
from chunkmill.items import REMOVE, SourceFile
from chunkmill.transforms import prior, runstate, sinks
from chunkmill.transforms.core import ChunkCorpus
from tests.helpers import SMALL, manifest_rows, paragraphs, write_prior

OLD = {"/c/kept.md": paragraphs("keep", "these"), "/c/gone.md": paragraphs("gone", "keep")}


def _prior(tmp_path):
    rows = [r for uri, data in sorted(OLD.items()) for r in manifest_rows(uri, data)]
    return rows, write_prior(rows, str(tmp_path))  # one part


def test_summarise_prior_gives_each_document_its_rows_and_each_hash_its_count(tmp_path):
    rows, parts = _prior(tmp_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(parts) | prior.SummarisePrior(temp=str(temp))
        assert_that(
            out["summaries"] | "Tags" >> beam.Map(lambda e: e[1][0]) | beam.Distinct(),
            equal_to([prior.SUMMARY_TAG]),  # as the join by doc-id bucket takes them
            label="Tagged",
        )
        assert_that(
            out["summaries"]
            | "Docs"
            >> beam.FlatMap(
                lambda e: prior.summaries_table([prior.summary_message(e[1][1])]).to_pylist()
            )
            | beam.Map(lambda s: (s["doc_id"], s["part"], s["rows"])),
            equal_to(
                [
                    (ids.doc_id(u), parts[0].key, sum(r["source_uri"] == u for r in rows))
                    for u in OLD
                ]
            ),
            label="Summaries",
        )
        hashes = [r["chunk_hash"] for r in rows]
        # Tagged for the hash join; the counts wait in a file under temp, only their place
        # crosses.
        assert_that(
            out["hashes"] | "HashTags" >> beam.Map(lambda e: e[1][0]) | "One" >> beam.Distinct(),
            equal_to([prior.HASHES_TAG]),
            label="HashesTagged",
        )
        assert_that(
            out["hashes"] | "InTemp" >> beam.Map(lambda e: e[1][1][0].startswith(str(temp))),
            equal_to([True] * len({prior.hash_bucket(h) for h in hashes})),
            label="InTemp",
        )
        assert_that(
            out["hashes"]
            | "Hashes"
            >> beam.FlatMap(
                lambda e: prior.from_ipc(prior.read_message(e[1][1]), prior.HASH_COUNTS).to_pylist()
            )
            | beam.Map(lambda h: (h["chunk_hash"].hex(), h["rows"])),
            equal_to([(h, hashes.count(h)) for h in set(hashes)]),
            label="HashCounts",
        )


def test_apply_prior_verdicts_keeps_and_removes_rows_where_they_lie(tmp_path):
    rows, parts = _prior(tmp_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    (part,) = parts
    kept_doc = {"doc_id": ids.doc_id("/c/kept.md")}  # carried over: decided in the plan
    keep = prior.to_ipc(pa.RecordBatch.from_pylist([kept_doc], schema=prior.KEPT_DOCS))
    remove = ((ids.doc_id("/c/gone.md"), REMOVE, None, ()),)
    gone_rows = [r for r in rows if r["source_uri"] == "/c/gone.md"]
    kept_hashes = {r["chunk_hash"] for r in rows if r["source_uri"] == "/c/kept.md"}
    with TestPipeline(runner="FnApiRunner") as p:
        # From two steps, as the plan and the processing give them.
        out = (
            p | "FromPlan" >> beam.Create([(part.key, keep)]),
            p | "FromProcessing" >> beam.Create([(part.key, remove)]),
        ) | prior.ApplyPriorVerdicts(str(temp))
        # The rows are written where they are decided; only the files' names come out.
        assert_that(
            out["files"]
            | "Read"
            >> beam.FlatMap(
                lambda f: [
                    (f[0], r)
                    for r in pq.read_table(f[1], columns=["chunk_id"])["chunk_id"].to_pylist()
                ]
            ),
            equal_to(
                [("manifest", r["chunk_id"]) for r in rows if r["source_uri"] == "/c/kept.md"]
                + [("removed", r["chunk_id"]) for r in gone_rows]
            ),
            label="Files",
        )
        # The removed rows' hashes go to the hash join, counted and tagged as it takes them;
        # "keep" is still current.
        assert_that(
            out["gone"] | "GoneTags" >> beam.Map(lambda e: e[1][0]) | beam.Distinct(),
            equal_to([prior.GONE_TAG]),
            label="GoneTagged",
        )
        assert_that(
            out["gone"]
            | "Gone"
            >> beam.FlatMap(lambda e: prior.from_ipc(e[1][1], prior.HASH_COUNTS).to_pylist())
            | beam.Map(
                lambda h: (h["chunk_hash"].hex(), h["rows"], h["chunk_hash"].hex() in kept_hashes)
            ),
            equal_to([(r["chunk_hash"], 1, r["chunk_hash"] in kept_hashes) for r in gone_rows]),
            label="Gone",
        )
        assert_that(
            out["counts"] | beam.CombinePerKey(sum),
            equal_to(
                [("chunks_total", len(rows) - len(gone_rows)), ("chunks_removed", len(gone_rows))]
            ),
            label="Counts",
        )


def _many_parts(tmp_path, docs: int = 12):
    """A prior of ``docs`` documents in parts of two rows (documents span parts)."""
    store = {f"/c/{i:02d}.md": paragraphs(f"doc{i}", "body", "tail") for i in range(docs)}
    rows = [r for uri, data in sorted(store.items()) for r in manifest_rows(uri, data)]
    return store, rows, write_prior(rows, str(tmp_path), row_group_rows=2)


def _verdicts(rows, parts, gone: str):
    """Every part's verdicts: ``gone`` removed, every other document kept as it is."""
    docs_of = {}
    reader = pq.ParquetFile(parts[0].path)
    for part in parts:
        ids_ = reader.read_row_group(part.row_group, columns=["doc_id"])["doc_id"].to_pylist()
        docs_of[part.key] = sorted(set(ids_))
    out = []
    for key, docs in docs_of.items():
        kept = [{"doc_id": d} for d in docs if d != gone]
        out.append((key, prior.to_ipc(pa.RecordBatch.from_pylist(kept, schema=prior.KEPT_DOCS))))
        if gone in docs:
            out.append((key, ((gone, REMOVE, None, ()),)))
    return out


class _FailsOnce:
    """``read_part`` that fails the first read of one part: a bundle's first attempt dies
    after it has written some rows."""

    def __init__(self, failing: str) -> None:
        self._failing = failing
        self.failed = False

    def __call__(self, part, columns):
        if part.key == self._failing and not self.failed:
            self.failed = True
            raise OSError("worker lost")
        return prior.read_part(part, columns)


def test_a_retried_bundle_publishes_its_rows_once(tmp_path):
    """Beam re-runs a failed bundle: the first attempt's files stay unnamed, and only the
    committed attempt's reach the run's tables."""
    _, rows, parts = _many_parts(tmp_path)
    gone = ids.doc_id("/c/03.md")
    elements = [
        (key, [batch for k, batch in _verdicts(rows, parts, gone) if k == key])
        for key in dict.fromkeys(k for k, _ in _verdicts(rows, parts, gone))
    ]
    run = tmp_path / "run"
    temp = run / ".temp-x"
    temp.mkdir(parents=True)
    read = _FailsOnce(parts[len(parts) // 2].key)
    # A row group per part: the first attempt has written rows to its file when it dies.
    apply = prior.ApplyVerdicts(str(temp), read, row_group_bytes=1)

    apply.start_bundle()
    with pytest.raises(OSError, match="worker lost"):
        for element in elements:
            list(apply.process(element))
    assert read.failed and list(temp.iterdir())  # the failed attempt's files, unnamed

    apply.start_bundle()
    for element in elements:
        list(apply.process(element))
    written = [w.value for w in apply.finish_bundle()]
    assert sorted(name for name, _ in written) == ["manifest", "removed"]

    final = {name: str(run / name) for name in schema.TABLES}
    named = list(sinks.name_table_files(written, temp=str(temp), final=final))
    manifest = pq.read_table([p for p in named if "/manifest/" in p])
    removed = pq.read_table([p for p in named if "/removed/" in p])
    assert sorted(manifest["chunk_id"].to_pylist()) == sorted(
        r["chunk_id"] for r in rows if r["doc_id"] != gone
    )
    assert sorted(removed["chunk_id"].to_pylist()) == sorted(
        r["chunk_id"] for r in rows if r["doc_id"] == gone
    )
    assert not temp.exists()


class _Store:
    """Documents by URI (picklable)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def __call__(self, uri: str, version=None, max_bytes=None) -> bytes:
        return self.objects[uri]


@pytest.mark.parametrize("repeat", [0, 2])
def test_a_night_of_many_parts_publishes_each_kept_row_once(tmp_path, repeat):
    """ChunkCorpus and WriteTables on a prior of many parts, bundles run once or repeated
    (``--direct_runner_bundle_repeat``, as a runner retries them): every kept and removed
    row is in the run's tables exactly once."""
    store, rows, parts = _many_parts(tmp_path)
    rows = [{**r, "source_version": "v1"} for r in rows]
    parts = write_prior(rows, str(tmp_path), row_group_rows=2)
    gone, edited = "/c/03.md", "/c/07.md"
    store = {u: d for u, d in store.items() if u != gone} | {edited: paragraphs("doc7", "new")}
    listed = [SourceFile(u, len(d), "v2" if u == edited else "v1") for u, d in store.items()]
    output = str(tmp_path / "out")
    options = PipelineOptions([f"--direct_runner_bundle_repeat={repeat}"])
    with TestPipeline(runner="FnApiRunner", options=options) as p:
        out = {
            "files": p | "Files" >> beam.Create(listed),
            "prior": p | "Prior" >> beam.Create(parts),
        } | ChunkCorpus(config=SMALL, read_bytes=_Store(store), staged_folder=str(tmp_path / "s"))
        _ = out | sinks.WriteTables(output, "r1", temp=str(tmp_path / "s"))

    def read(name: str) -> list[dict]:
        return pq.read_table(runstate.table_dir(output, "r1", name)).to_pylist()

    manifest, removed = read("manifest"), read("removed")
    expected = sorted(
        [r["chunk_id"] for r in rows if r["source_uri"] not in (gone, edited)]
        + [r["chunk_id"] for r in manifest_rows(edited, store[edited])]
    )
    assert sorted(r["chunk_id"] for r in manifest) == expected
    changed = {r["chunk_id"] for r in manifest_rows(edited, store[edited])}
    assert sorted(r["chunk_id"] for r in removed) == sorted(
        r["chunk_id"]
        for r in rows
        if r["source_uri"] == gone or (r["source_uri"] == edited and r["chunk_id"] not in changed)
    )
    kept = [r for r in manifest if r["source_uri"] not in (gone, edited)]
    assert kept and not any(r["is_new"] for r in kept)
    assert len(parts) > 10 and not (tmp_path / "s").exists()


@pytest.mark.parametrize("gap", [prior.READ_GAP_BYTES, 0])  # one read, or one a message
@pytest.mark.parametrize("chunk", [prior.WRITE_BYTES, 300])  # one write, or several
def test_prior_hash_counts_are_read_back_from_their_file_as_written_or_not_at_all(
    tmp_path, monkeypatch, gap, chunk
):
    monkeypatch.setattr(prior, "READ_GAP_BYTES", gap)
    monkeypatch.setattr(prior, "WRITE_BYTES", chunk)
    hashes = [f"{i:02x}" * 32 for i in range(0, 256, 17)]
    messages = prior.by_bucket(prior.hash_counts(pa.table({"chunk_hash": hashes + hashes[:3]})))
    refs = prior.write_by_bucket(str(tmp_path), messages)
    # One file for every bucket, each message read back by its place alone.
    assert len({ref[0] for _, ref in refs}) == 1
    assert [(b, prior.read_message(ref)) for b, ref in refs] == messages
    # Several at once, in the order asked for.
    backwards = [ref for _, ref in refs][::-2]
    assert prior.read_messages(backwards) == [m for _, m in messages][::-2]
    path, offset, length, _ = refs[3][1]
    with open(path, "r+b") as f:
        f.seek(offset + length - 1)
        last = f.read(1)
        f.seek(offset + length - 1)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(RuntimeError, match="are not those written"):
        prior.read_message(refs[3][1])
    with pytest.raises(RuntimeError, match="are not those written"):
        prior.read_messages([refs[2][1], refs[3][1]])
    assert prior.read_message(refs[2][1]) == messages[2][1]
