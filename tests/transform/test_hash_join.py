"""The join by hash bucket under TestPipeline, each composite on its own: MarkNew (which
hashes are new, which occurrences added, which hashes retired) and FinishStaged (a staged
file's rows split by their decisions, into files where they are decided)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import document, ids, schema
from chunkmill.config import Chunking
from chunkmill.items import WorkItem
from chunkmill.transforms import hash_join, prior, staging, textstore
from chunkmill.transforms.hash_join import FinishStaged, MarkNew
from tests.helpers import SMALL, paragraphs

KNOWN, NEW, GONE = "1" * 64, "2" * 64, "3" * 64  # a prior hash, a new one, a removed one
A, B, C = "a" * 32, "b" * 32, "c" * 32


def _messages(table: pa.Table, tag: int) -> list[tuple[str, tuple[int, bytes]]]:
    """``table`` by hash bucket, tagged as the step that makes it gives it."""
    return [(bucket, (tag, message)) for bucket, message in prior.by_bucket(table)]


def _decisions(element):
    """A staged file's decisions → ``(path, bucket, i, (is_new, added, chosen))`` for the
    i-th occurrence of each bucket in the staged file."""
    path, decided = element
    return [
        (path, bucket, i, tuple(bool(f & flag) for flag in FLAGS))
        for bucket, flags in decided
        for i, f in enumerate(flags)
    ]


FLAGS = (hash_join.IS_NEW, hash_join.ADDED, hash_join.CHOSEN)


def _flags_for(message: bytes, decide) -> bytes:
    """The flags ``decide(chunk_id)`` gives each occurrence of a ``staged_ids`` message, in
    its order (the order the join answers in)."""
    sent = hash_join.read_staged_ids(message)["chunk_id"].to_pylist()
    return bytes(decide(chunk_id.hex()) for chunk_id in sent)


def test_mark_new_decides_every_occurrence_and_retires_hashes_left_with_none(tmp_path):
    # Sent as a staged file's rows are: hashes and ids as bytes, by bucket, in row order.
    current = pa.table({"chunk_hash": [KNOWN, NEW, NEW], "chunk_id": [A, C, B]})
    counts = prior.hash_counts(pa.table({"chunk_hash": [KNOWN, GONE]}))
    gone = prior.hash_counts(pa.table({"chunk_hash": [GONE]}))
    persisting = pa.table({"chunk_id": [A], "chunk_hash": [KNOWN]}, schema=prior.IDS)
    with TestPipeline(runner="FnApiRunner") as p:
        out = {
            "occurrences": p
            | "Current"
            >> beam.Create(
                [
                    (b, (hash_join.CURRENT, ("staged-1", m)))
                    for b, m in hash_join.staged_ids(current)
                ]
            ),
            # The prior's hash counts cross as the place of their message in a file.
            "prior_hashes": p
            | "Prior"
            >> beam.Create(
                [
                    (bucket, (prior.HASHES_TAG, ref))
                    for bucket, ref in prior.write_by_bucket(str(tmp_path), prior.by_bucket(counts))
                ]
            ),
            "gone": p | "Gone" >> beam.Create(_messages(gone, prior.GONE_TAG)),
            "persisting": p
            | "Persisting" >> beam.Create(_messages(persisting, prior.PERSISTING_TAG)),
        } | MarkNew()
        assert_that(
            out["decided"] | beam.FlatMap(_decisions),
            equal_to(
                [
                    # A persists from the prior state: neither new nor added.
                    ("staged-1", "11", 0, (False, False, False)),
                    # NEW's smallest id (B, second in the file) stands for it in chunks/;
                    # both are added.
                    ("staged-1", "22", 0, (True, True, False)),
                    ("staged-1", "22", 1, (True, True, True)),
                ]
            ),
            label="Decided",
        )
        assert_that(
            out["retired"] | beam.FlatMap(lambda t: t["chunk_hash"].to_pylist()),
            equal_to([GONE]),
            label="Retired",
        )
        assert_that(out["counts"], equal_to([("hashes_retired", 1)]), label="Counts")


def test_finish_staged_reads_a_staged_file_once_into_the_tables(tmp_path):
    uri = "/c/a.md"
    data = paragraphs("alpha", "beta", "gamma")
    item = WorkItem(ids.doc_id(uri), uri, len(data))
    occurrences = document.process_document(item, data, Chunking(SMALL)).occurrences
    table = pa.Table.from_pylist(occurrences, schema=schema.CHUNKS)
    path = staging.write(str(tmp_path), table)
    chunk_ids = table["chunk_id"].to_pylist()
    n = len(chunk_ids)
    # The first occurrence is new and chosen for chunks/; the second added but not new.
    flags = {chunk_ids[0]: hash_join.IS_NEW | hash_join.ADDED | hash_join.CHOSEN}
    flags[chunk_ids[1]] = hash_join.ADDED
    # Decisions of one staged file come from several hash buckets, in as many elements as
    # batches of buckets decided them: here two.
    decided = [
        (bucket, _flags_for(message, lambda c: flags.get(c, 0)))
        for bucket, message in hash_join.staged_ids(table)
    ]
    assert len(decided) > 1
    messages = [(path, tuple(decided[:1])), (path, tuple(decided[1:]))]
    temp = tmp_path / "temp"
    temp.mkdir()
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(messages) | FinishStaged(str(temp), model_window=1, text=True)
        rows = {
            name: out["files"]
            | f"{name}Files" >> beam.Filter(lambda f, name=name: f[0] == name)
            | f"{name}Rows" >> beam.FlatMap(lambda f: pq.read_table(f[1]).to_pylist())
            for name in ("manifest", "chunks", "added")
        }
        # The store reads its columns of its files (the text file is chunks/'s bytes).
        rows[textstore.TEXT] = (
            out["files"]
            | "TextFiles" >> beam.Filter(lambda f: f[0] == textstore.TEXT)
            | "TextRows"
            >> beam.FlatMap(
                lambda f: pq.read_table(f[1], columns=textstore.TEXT_SCHEMA.names).to_pylist()
            )
        )
        assert_that(
            rows["manifest"] | beam.Map(lambda r: (r["chunk_id"], r["is_new"])),
            equal_to([(c, i == 0) for i, c in enumerate(chunk_ids)]),
            label="Manifest",
        )
        assert_that(
            rows["chunks"] | beam.Map(lambda r: (r["chunk_id"], r["text"])),
            equal_to([(chunk_ids[0], occurrences[0]["text"])]),
            label="Chunks",
        )
        # The text of the chunks/ rows, as the text store holds it, beside them.
        assert_that(
            rows[textstore.TEXT],
            equal_to(
                [
                    {
                        "chunk_hash": occurrences[0]["chunk_hash"],
                        "text": occurrences[0]["text"],
                        "text_with_context": occurrences[0]["text_with_context"],
                    }
                ]
            ),
            label="Text",
        )
        assert_that(
            rows["added"] | beam.Map(lambda r: r["chunk_id"]),
            equal_to(chunk_ids[:2]),
            label="Added",
        )
        assert_that(
            out["counts"] | beam.CombinePerKey(sum) | beam.combiners.ToDict(),
            equal_to(
                [
                    {
                        "chunks_total": n,
                        "chunks_new_occurrences": 1,
                        "occurrences_added": 2,
                        "chunks_to_embed": 1,
                        "tokens_to_embed": occurrences[0]["token_count"],
                        "chunks_over_model_window": int(occurrences[0]["token_count"] > 1),
                    }
                ]
            ),
            label="Counts",
        )


def _mark_bundle(mark: hash_join._MarkNew, elements) -> tuple[set, list[str]]:
    """One bundle of ``mark``: its decisions and its retired hashes."""
    decided, retired, _ = _mark_outputs(mark, elements)
    return decided, retired


def _mark_outputs(mark: hash_join._MarkNew, elements) -> tuple[set, list[str], list]:
    """One bundle of ``mark``: its decisions, its retired hashes and its decision elements."""
    mark.start_bundle()
    out = [e for element in elements for e in mark.process(element)]
    out += [
        beam.pvalue.TaggedOutput(e.tag, e.value.value)
        if isinstance(e, beam.pvalue.TaggedOutput)
        else e.value
        for e in mark.finish_bundle()
    ]
    decided = {d for e in out if not isinstance(e, beam.pvalue.TaggedOutput) for d in _decisions(e)}
    retired = [
        h
        for e in out
        if isinstance(e, beam.pvalue.TaggedOutput) and e.tag == "retired"
        for h in e.value["chunk_hash"].to_pylist()
    ]
    elements_out = [e for e in out if not isinstance(e, beam.pvalue.TaggedOutput)]
    return decided, sorted(retired), elements_out


def test_mark_new_decides_buckets_together_as_it_would_one_at_a_time(tmp_path):
    # Many buckets: hashes known to the prior, new ones shared by two files, removed ones.
    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(600)]
    known, new, gone = hashes[:200], hashes[200:400], hashes[400:]
    files = {
        f"staged-{f}": pa.table(
            {
                "chunk_hash": known[f::2] + new[:150],
                "chunk_id": [ids.chunk_id(f"doc{f}", h, 0) for h in known[f::2] + new[:150]],
            }
        )
        for f in (0, 1)
    }
    persisting = pa.table(
        {"chunk_id": files["staged-0"]["chunk_id"][:50], "chunk_hash": known[0:100:2]},
        schema=prior.IDS,
    )
    refs = prior.write_by_bucket(
        str(tmp_path), prior.by_bucket(prior.hash_counts(pa.table({"chunk_hash": known + gone})))
    )
    values: dict[str, list] = {}
    for path, table in files.items():
        for bucket, message in hash_join.staged_ids(table):
            values.setdefault(bucket, []).append((hash_join.CURRENT, (path, message)))
    for bucket, ref in refs:
        values.setdefault(bucket, []).append((prior.HASHES_TAG, ref))
    removed = prior.hash_counts(pa.table({"chunk_hash": gone + known[:10]}))
    for bucket, message in prior.by_bucket(removed):
        values.setdefault(bucket, []).append((prior.GONE_TAG, message))
    for bucket, message in prior.by_bucket(persisting):
        values.setdefault(bucket, []).append((prior.PERSISTING_TAG, message))
    elements = sorted(values.items())
    assert len(elements) > 200
    *together, sent = _mark_outputs(hash_join._MarkNew(), elements)
    alone = _mark_bundle(hash_join._MarkNew(batch_bytes=1), elements)
    assert tuple(together) == alone
    # Decided together, a staged file's buckets' decisions leave as one element.
    assert sorted(path for path, _ in sent) == sorted(files)
    decided, retired = together
    assert len(decided) == sum(t.num_rows for t in files.values())
    assert retired == sorted(gone)  # known[:10] are still in this run's files
    chosen = [d for d in decided if d[3][2]]
    assert len(chosen) == len(new[:150])  # one occurrence of each new hash
    assert sum(not d[3][1] for d in decided) == persisting.num_rows  # the rest are added


# A night's decisions in a fresh process: what of NumPy they load.
_DECIDE_A_NIGHT = """
import sys
import numpy as np
import pyarrow as pa
from apache_beam.pvalue import TaggedOutput
from chunkmill.transforms import hash_join, prior
loaded = "numpy.ma" in sys.modules
known, gone = "1" * 64, "3" * 64
counts = prior.hash_counts(pa.table({"chunk_hash": [known, gone]}))
values = {}
for bucket, ref in prior.write_by_bucket(sys.argv[1], prior.by_bucket(counts)):
    values.setdefault(bucket, []).append((prior.HASHES_TAG, ref))
staged = pa.table({"chunk_hash": [known], "chunk_id": ["a" * 32]})
for bucket, message in hash_join.staged_ids(staged):
    values.setdefault(bucket, []).append((hash_join.CURRENT, ("staged", message)))
for bucket, message in prior.by_bucket(prior.hash_counts(pa.table({"chunk_hash": [gone]}))):
    values.setdefault(bucket, []).append((prior.GONE_TAG, message))
mark = hash_join._MarkNew()
mark.start_bundle()
for element in sorted(values.items()):
    assert not list(mark.process(element))
out = list(mark.finish_bundle())
retired = [o.value.value for o in out if isinstance(o, TaggedOutput) and o.tag == "retired"]
assert [t["chunk_hash"].to_pylist() for t in retired] == [[gone]], out
flags = np.array([0, hash_join.ADDED, hash_join.IS_NEW | hash_join.ADDED], np.uint8)
assert hash_join._flag(flags, hash_join.ADDED).to_pylist() == [False, True, True]
print(loaded, "numpy.ma" in sys.modules)
"""


def test_a_night_s_decisions_load_no_numpy_ma(tmp_path):
    # pa.array of a NumPy array loads numpy.ma on a process's first such call (15-20 ms),
    # which a night would pay only when something changed: the join makes none.
    out = subprocess.run(
        [sys.executable, "-c", _DECIDE_A_NIGHT, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["False", "False"]
