"""`chunkmill plan`'s comparison and estimate, on hand-made listings and prior manifests."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill import carryover, ids, prior_summary
from chunkmill.config import ChunkingConfig, Limits
from chunkmill.items import SourceFile
from chunkmill.pipeline import estimate, plan
from chunkmill.pipeline.options import RunSettings
from chunkmill.transforms import storage
from tests.helpers import SMALL, manifest_rows, paragraphs, summarise

FP = SMALL.fingerprint
V1, V2 = "size=100;mtime=1.0", "size=120;mtime=2.0"


def listing(*docs: tuple[str, int, str | None]) -> pa.Table:
    return pa.table(
        {
            "uri": [u for u, _, _ in docs],
            "doc_id": [ids.doc_id(u) for u, _, _ in docs],
            "size": [s for _, s, _ in docs],
            "version": [v for _, _, v in docs],
        },
        schema=plan._LISTING,
    )


def prior_rows(
    uri: str,
    n: int,
    version: str | None,
    fp: str = FP,
    tokens: int = 10,
    fmt: str = "markdown",
    new: int = 0,
):
    """``n`` rows of one prior document, its first ``new`` rows new in the prior run."""
    return [
        {
            "doc_id": ids.doc_id(uri),
            "source_uri": uri,
            "source_version": version,
            "config_fingerprint": fp,
            "content_sha256": "c" * 64,
            "token_count": tokens,
            "is_new": i < new,
            "doc_format": fmt,
        }
        for i in range(n)
    ]


def prior_table(rows: list[dict], batch: int = 1000) -> list[pa.Table]:
    schema = pa.schema(
        [
            ("doc_id", pa.string()),
            ("source_uri", pa.string()),
            ("source_version", pa.string()),
            ("config_fingerprint", pa.string()),
            ("content_sha256", pa.string()),
            ("token_count", pa.int32()),
            ("is_new", pa.bool_()),
            ("doc_format", pa.string()),
        ]
    )
    return [pa.Table.from_pylist(rows[i : i + batch], schema) for i in range(0, len(rows), batch)]


def _doc(rows: int, versions: set, current: bool = True, tokens: int = 30) -> estimate.PriorDoc:
    version = next(iter(versions)) if len(versions) == 1 else None
    state = carryover.PriorState(rows, version, FP if current else None)
    return estimate.PriorDoc(state, current, tokens)


@pytest.mark.parametrize(
    ("version", "prior", "expected"),
    [
        (V1, None, plan.NEW),
        (V1, _doc(3, {V1}), plan.UNCHANGED),
        (V2, _doc(3, {V1}), plan.CHANGED),  # edited
        (V1, _doc(3, {V1}, current=False), plan.CHANGED),  # a row of another config
        (V1, _doc(3, {V1, None}), plan.CHANGED),  # a row unversioned
        (V1, _doc(3, {V1, V2}), plan.CHANGED),
        (None, _doc(3, {None}), plan.CHANGED),  # store gave no mtime
    ],
)
def test_the_plan_classifies_by_the_carry_over_rule(version, prior, expected):
    got = plan.compare(
        listing(("/c/a.md", 100, version)),
        plan.EMPTY_SUMMARY if prior is None else _summary_of(prior),
        SMALL,
    )
    assert got.counts[expected] == 1 and sum(got.counts.values()) == 1


def _summary_of(prior: estimate.PriorDoc) -> pa.Table:
    """The summary of the rows ``prior`` describes, made by the plan's own summariser."""
    fp = FP if prior.current else "other"
    versions = [prior.state.version] * prior.rows
    if prior.state.version is None and prior.rows > 1:
        versions = [V1, None] + [V1] * (prior.rows - 2)
    rows = [
        {**r, "source_version": v}
        for r, v in zip(prior_rows("/c/a.md", prior.rows, None, fp=fp), versions, strict=True)
    ]
    return plan.summarise_prior(prior_table(rows))


_versions = st.sampled_from([V1, V2, None])


@given(
    listed=_versions,
    rows=st.lists(st.tuples(_versions, st.booleans()), min_size=0, max_size=6),
    split=st.integers(1, 4),
)
def test_summary_then_classify_is_the_runs_rule(listed, rows, split):
    """Whatever the rows and however they are batched, the plan calls a document unchanged
    exactly when the run would carry it over unread."""
    uri = "/c/a.md"
    full = [
        {**r, "source_version": v, "config_fingerprint": FP if same else "other"}
        for r, (v, same) in zip(prior_rows(uri, len(rows), None), rows, strict=True)
    ]
    # The plan summarises the rows batch by batch; the run, part by part (prior.summaries).
    summary = plan.summarise_prior(prior_table(full, batch=split))
    got = plan.compare(listing((uri, 100, listed)), summary, SMALL)
    state = carryover.PriorState.of_parts(summarise(full, split))
    expected = carryover.before_reading(listed, state, FP)
    assert got.counts[expected] == 1 and sum(got.counts.values()) == 1


def test_compare_counts_every_category_and_reads_only_new_and_changed():
    summary = plan.summarise_prior(
        prior_table(
            prior_rows("/c/same.md", 2, V1)
            + prior_rows("/c/edited.md", 3, V1)
            + prior_rows("/c/gone.md", 4, V1),
            batch=2,  # every document's rows spread over batches
        ),
    )
    assert summary.num_rows == 3
    listed = listing(("/c/same.md", 100, V1), ("/c/edited.md", 120, V2), ("/c/new.md", 50, V1))
    got = plan.compare(listed, summary, SMALL)
    assert got.counts == {
        "new": 1,
        "changed": 1,
        "unchanged": 1,
        "removed": 1,
        plan.KNOWN_FAILED: 0,
    }
    assert got.examples["new"] == ["/c/new.md"]
    assert got.examples["changed"] == ["/c/edited.md"]
    assert got.examples["removed"] == ["/c/gone.md"]
    assert got.listed == 3
    assert got.estimate.bytes_to_read == 170  # edited (120) + new (50); same.md is not read


def test_a_config_change_makes_every_listed_prior_document_changed():
    other = ChunkingConfig.create("paragraph", max_tokens=50, overlap_tokens=5)
    # The prior rows were made with SMALL.
    summary = plan.summarise_prior(
        prior_table(prior_rows("/c/a.md", 2, V1) + prior_rows("/c/b.md", 2, V2)),
    )
    got = plan.compare(listing(("/c/a.md", 100, V1), ("/c/b.md", 120, V2)), summary, other)
    assert got.counts["changed"] == 2 and got.counts["unchanged"] == 0


def test_compaction_keeps_per_document_sums(monkeypatch):
    monkeypatch.setattr(plan, "_COMPACT_ROWS", 2)
    rows = [r for i in range(5) for r in prior_rows(f"/c/{i}.md", 3, V1, tokens=i + 1)]
    summary = plan.summarise_prior(prior_table(rows, batch=4))
    got = {r["source_uri_min"]: (r["rows"], r["tokens"]) for r in summary.to_pylist()}
    assert got == {f"/c/{i}.md": (3, 3 * (i + 1)) for i in range(5)}


def test_new_documents_are_priced_by_the_prior_rate_of_their_format():
    # Markdown: 100 + 300 bytes made 8 chunks of 10 tokens; PDF: 10,000 bytes made 2 chunks
    # of 10 tokens (most of a PDF's bytes are not text).
    rows = (
        prior_rows("/c/a.md", 2, "size=100;mtime=1.0")
        + prior_rows("/c/b.md", 6, "size=300;mtime=1.0")
        + prior_rows("/c/r.pdf", 2, "size=10000;mtime=1.0", fmt="pdf")
    )
    summary = plan.summarise_prior(prior_table(rows))
    listed = listing(
        ("/c/a.md", 100, "size=100;mtime=1.0"), ("/c/new.md", 1000, V1), ("/c/n.pdf", 5000, V1)
    )
    e = plan.compare(listed, summary, SMALL).estimate
    # 1000 B x 0.2 tokens/B + 5000 B x 0.002 tokens/B; the same per chunk.
    assert (e.bytes_to_read, e.tokens, e.chunks) == (6000, 210, 21)
    assert "markdown from 2 prior documents" in e.basis  # b.md is removed but still teaches
    assert "pdf from 1 prior document" in e.basis and not e.rough
    assert e.low < e.tokens < e.high


def test_a_format_without_a_prior_gets_the_measured_default_and_a_wide_range():
    e = plan.compare(listing(("/c/n.pdf", 100_000, V1)), plan.EMPTY_SUMMARY, SMALL).estimate
    tokens_per_byte, _ = estimate.DEFAULT_RATES["pdf"]
    assert e.tokens == round(100_000 * tokens_per_byte) and e.rough
    assert "pdf rough" in e.basis
    # A PDF's text per byte varies by two orders of magnitude: so does the range.
    assert e.high / e.low > 30


@pytest.mark.parametrize(("tokenizer", "factor"), [("chars4", 1.0), ("whitespace", 4 / 6)])
def test_default_rates_follow_the_tokenizer(tokenizer, factor):
    config = ChunkingConfig.create("paragraph", tokenizer=tokenizer)
    rate = estimate.default_rate("markdown", config)
    assert rate.tokens_per_byte == pytest.approx(estimate.DEFAULT_RATES["markdown"][0] * factor)
    assert estimate.default_rate("rst", config).tokens_per_byte == pytest.approx(0.25 * factor)


def test_an_edited_document_is_priced_as_one_chunk_plus_its_bytes_changed():
    # 4 chunks of 10 tokens at 100 bytes; now 110 bytes: 44 tokens scaled, 10% of its bytes
    # changed: one chunk (10 tokens) and 10% of 44.
    summary = plan.summarise_prior(prior_table(prior_rows("/c/a.md", 4, V1)))
    e = plan.compare(listing(("/c/a.md", 110, "size=110;mtime=2.0")), summary, SMALL).estimate
    assert (e.tokens, e.chunks) == (15, 2)  # 14.4 tokens, 1.44 chunks
    assert (e.low, e.high) == (10, 44)  # one chunk .. all of it
    assert "1 edited document from its prior rows" in e.basis and not e.rough
    # The same size (a word replaced, or only touched): one chunk.
    e = plan.compare(listing(("/c/a.md", 100, "size=100;mtime=2.0")), summary, SMALL).estimate
    assert (e.tokens, e.chunks) == (10, 1)
    # Rewritten to three times its size: all of it, no more.
    e = plan.compare(listing(("/c/a.md", 300, "size=300;mtime=2.0")), summary, SMALL).estimate
    assert (e.tokens, e.chunks) == (120, 12)


def test_a_document_that_failed_before_and_did_not_change_is_not_read():
    key = "k1"
    failures = pa.table(
        {
            "doc_id": [ids.doc_id(u) for u in ("/c/bad.pdf", "/c/fixed.pdf", "/c/flaky.md")],
            "failed_version": [V1, V1, V1],
            "failed_key": [key, key, key],
            "failed_reason": ["corrupt", "corrupt", "read_failed"],
        },
        schema=plan._FAILURES,
    )
    listed = listing(("/c/bad.pdf", 100, V1), ("/c/fixed.pdf", 120, V2), ("/c/flaky.md", 5, V1))
    got = plan.compare(listed, plan.EMPTY_SUMMARY, SMALL, failures, key)
    assert got.counts[plan.KNOWN_FAILED] == 1 and got.counts[plan.NEW] == 2
    assert got.examples[plan.KNOWN_FAILED] == ["/c/bad.pdf"]
    assert got.estimate.bytes_to_read == 125
    again = plan.compare(listed, plan.EMPTY_SUMMARY, SMALL, failures, "other key")
    assert again.counts[plan.KNOWN_FAILED] == 0 and again.counts[plan.NEW] == 3


def test_nothing_to_read_estimates_nothing():
    summary = plan.summarise_prior(prior_table(prior_rows("/c/a.md", 4, V1)))
    e = plan.compare(listing(("/c/a.md", 100, V1)), summary, SMALL).estimate
    assert (e.tokens, e.chunks, e.low, e.high) == (0, 0, 0, 0)


def test_examples_are_the_first_uris_in_order(monkeypatch):
    monkeypatch.setattr(plan, "SHOW_DOCUMENTS", 3)
    docs = [(f"/c/{i:02d}.md", 1, V1) for i in (7, 3, 9, 1, 5)]
    got = plan.compare(listing(*docs), plan.EMPTY_SUMMARY, SMALL)
    assert got.examples["new"] == ["/c/01.md", "/c/03.md", "/c/05.md"]
    assert got.counts["new"] == 5


def test_list_inputs_lists_once_and_leaves_the_output_out(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_bytes(paragraphs("alpha"))
    (tmp_path / "docs" / "out").mkdir()
    (tmp_path / "docs" / "out" / "LATEST").write_text("r1\n")
    patterns = [str(tmp_path / "docs" / "**"), str(tmp_path / "docs" / "*.md")]
    got = plan.list_inputs(patterns, str(tmp_path / "docs" / "out")).to_pylist()
    a = tmp_path / "docs" / "a.md"
    st_ = os.stat(a)
    assert got == [
        {
            "uri": str(a),
            "doc_id": ids.doc_id(str(a)),
            "size": st_.st_size,
            "version": f"size={st_.st_size};mtime={st_.st_mtime!r}",
        }
    ]


def test_size_of_version():
    assert estimate.size_of_version("size=12;mtime=3.5") == 12
    assert estimate.size_of_version(None) is None
    assert estimate.size_of_version("something else") is None
    assert estimate.size_of_version('etag="9b2cf535f27731c974343645a3985328";size=40') == 40  # S3
    assert estimate.size_of_version("gen=1700000000000001") is None  # GCS records no size
    assert estimate.size_of_version("size=12x;mtime=3.5") is None


@pytest.fixture
def memfs_docs():
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/plan-docs/a.md", paragraphs("alpha"))
    fs.pipe("/plan-docs/sub/b.md", paragraphs("beta", "gamma"))
    yield fs
    fs.rm("/plan-docs", recursive=True)


def test_list_inputs_lists_through_the_run_s_own_storage_layer(memfs_docs):
    """The listing of any store ``run`` reads (here fsspec's in-memory filesystem, which Beam's
    FileSystems does not know), with the versions ``run``'s listing records."""
    pattern = "memory://plan-docs/**"
    got = plan.list_inputs([pattern], None).to_pylist()
    expected = sorted(
        (f for item in storage.plan(pattern) for f in storage.list_shard(item)),
        key=lambda f: f.uri,
    )
    assert [(r["uri"], r["size"], r["version"]) for r in got] == [
        (f.uri, f.size_bytes, f.version) for f in expected
    ]
    assert sorted(r["uri"] for r in got) == [
        "memory:///plan-docs/a.md",
        "memory:///plan-docs/sub/b.md",
    ]


def test_summary_of_real_manifest_rows():
    """Rows as a run writes them (the code under test makes them)."""
    rows = manifest_rows("/c/a.md", paragraphs("alpha", "beta", "gamma", n=3))
    rows = [{**r, "source_version": V1} for r in rows]
    t = pa.Table.from_pylist([{k: r[k] for k in plan._PRIOR_COLUMNS} for r in rows])
    summary = plan.summarise_prior([t])
    (row,) = summary.to_pylist()
    assert row["rows"] == len(rows) > 1
    assert row["tokens"] == sum(r["token_count"] for r in rows)
    assert prior_summary.shared(summary, "config_fingerprint").to_pylist() == [FP]


def test_plan_knows_documents_by_their_redacted_uri_and_prints_no_credential(monkeypatch):
    signed = "https://h/c/a.md?X-Amz-Signature=SENTINEL{}"
    found = [
        SourceFile(signed.format(1), 10, "v1"),
        SourceFile(signed.format(2), 10, "v1"),  # the same object under another signature
    ]
    monkeypatch.setattr(storage, "plan", lambda pattern, billing_project=None, rules=None: [found])
    monkeypatch.setattr(storage, "list_shard", lambda item, rules=None: iter(item))
    got = plan.list_inputs(["https://u:SENTINEL@h/c/*"], None).to_pylist()
    redacted = "https://h/c/a.md?X-Amz-Signature=***"
    assert [(r["uri"], r["doc_id"]) for r in got] == [(redacted, ids.doc_id(redacted))]
    settings = RunSettings(
        inputs=("https://u:SENTINEL@h/c/*",),
        output="s3://key:SENTINEL@bucket/out",
        run_id="r",
        prior_mode="none",
        prior_manifest=None,
        prior_run_id=None,
        config=SMALL,
    )
    listing = plan.list_inputs(["https://u:SENTINEL@h/c/*"], None)
    printed = plan.render(plan.compare(listing, plan.EMPTY_SUMMARY, SMALL), settings)
    assert redacted in printed and "SENTINEL" not in printed


def _candidates(docs: list[tuple[str, int]]) -> estimate._Strata:
    strata = estimate._Strata()
    for uri, size in docs:
        strata.add(estimate.SampleDoc.of(ids.doc_id(uri), uri, V1, size), estimate.SAMPLE_BYTES)
    return strata


def test_the_sample_covers_every_folder_and_size_in_a_seeded_order():
    # 2 folders x 3 size classes (1 KB, 16 KB, 256 KB), 10 documents each.
    docs = [
        (f"/c/{folder}/{size}-{i}.pdf", size)
        for folder in ("a", "b")
        for size in (1_000, 16_000, 256_000)
        for i in range(10)
    ]
    chosen = estimate.choose_sample(_candidates(docs))
    strata = {(d.uri.split("/")[2], d.size) for d in chosen}
    assert len(chosen) == estimate.SAMPLE_DOCUMENTS and len(strata) == 6
    assert chosen == estimate.choose_sample(_candidates(list(reversed(docs))))  # order-free
    smallest_ids = sorted(docs, key=lambda d: ids.doc_id(d[0]))[: estimate.SAMPLE_DOCUMENTS]
    assert {d.uri for d in chosen} != {u for u, _ in smallest_ids}
    # Within the byte budget: a document that would pass it is skipped.
    budget = estimate.choose_sample(_candidates(docs), max_bytes=300_000)
    assert sum(d.size for d in budget) <= 300_000 and {d.size for d in budget} == {
        256_000, 16_000, 1_000
    }  # fmt: skip


def _pdfs(n: int, size: int = 10_000, folder: str = "c") -> pa.Table:
    return listing(*((f"/{folder}/{i:02d}-{size}.pdf", size, V1) for i in range(n)))


def _measure(asked: list[list[str]], per_doc: dict[int, int]):
    """A measure giving a document of each size its tokens per ``per_doc``, as chunks of
    10 tokens with hashes of its URI."""

    def measure(docs):
        asked.append([d.uri for d in docs])
        return [
            estimate.Measured(d.size, {f"{d.uri}#{k}": 10 for k in range(per_doc[d.size] // 10)})
            for d in docs
        ]

    return measure


def test_a_first_run_over_pdfs_is_priced_by_size_class_from_a_sample_it_reads():
    # Small PDFs are text (100 tokens in 1 KB), large ones drawings (500 tokens in 100 KB):
    # the bytes of each size class at its own rate, not at a rate pooled over the sample.
    listed = pa.concat_tables([_pdfs(20, 1_000, "text"), _pdfs(20, 100_000, "drawings")])
    asked: list[list[str]] = []
    measure = _measure(asked, {1_000: 100, 100_000: 500})
    p = plan.compare(listed, plan.EMPTY_SUMMARY, SMALL, measure=measure)
    e = p.estimate
    assert len(asked) == 1 and len(asked[0]) == estimate.SAMPLE_DOCUMENTS
    assert (e.tokens, e.chunks) == (20 * 100 + 20 * 500, 20 * 10 + 20 * 50)
    assert e.documents_read == estimate.SAMPLE_DOCUMENTS and not e.rough
    assert "pdf from a sample of 16 of its 40 documents to read, read and chunked" in e.basis
    settings = RunSettings(
        inputs=("/c/*",),
        output="/out",
        run_id="r",
        prior_mode="none",
        prior_manifest=None,
        prior_run_id=None,
        config=SMALL,
    )
    text = plan.render(p, settings)
    assert "16 documents read for the estimate; nothing was written" in text
    assert "no document was read" not in text


def test_sampled_chunks_the_prior_holds_are_not_priced():
    # Re-chunked under another config: the sampled documents make chunks of 10 tokens, one of
    # each document's two already in the prior (its text did not change).
    rows = [r for i in range(4) for r in prior_rows(f"/c/{i:02d}-1000.md", 2, V1, fp="old")]
    summary = plan.summarise_prior(prior_table(rows))
    asked: list[list[str]] = []
    held: list[set[str]] = []

    def known(hashes: set[str]) -> set[str]:
        held.append(hashes)
        return {h for h in hashes if h.endswith("#0")}

    listed = listing(*((f"/c/{i:02d}-1000.md", 1000, V1) for i in range(4)))
    measure = _measure(asked, {1000: 20})
    e = plan.compare(listed, summary, SMALL, measure=measure, known=known).estimate
    assert (e.tokens, e.chunks) == (40, 4) and len(held[0]) == 8


def test_sampled_documents_that_fail_are_priced_as_nothing():
    def measure(docs):
        return [estimate.Measured(d.size, {}) for d in docs]

    e = plan.compare(_pdfs(3), plan.EMPTY_SUMMARY, SMALL, measure=measure).estimate
    assert (e.tokens, e.chunks) == (0, 0) and e.documents_read == 3
    assert "(3 failed, priced as 0)" in e.basis


def test_a_learnt_rate_or_a_document_too_large_reads_no_sample():
    def measure(docs):
        raise AssertionError("read a document")

    rows = prior_rows("/c/r.pdf", 2, "size=10000;mtime=1.0", fmt="pdf") + prior_rows(
        "/c/a.md", 2, "size=100;mtime=1.0"
    )
    summary = plan.summarise_prior(prior_table(rows))
    listed = listing(("/c/n.pdf", 5000, V1), ("/c/n.md", 5000, V1))
    e = plan.compare(listed, summary, SMALL, measure=measure).estimate
    assert e.documents_read == 0 and "pdf from 1 prior document" in e.basis
    # Too large to sample (over --max-document-bytes): the run would not read it either.
    small = ChunkingConfig.create("paragraph", limits=Limits(max_document_bytes=100))
    e = plan.compare(_pdfs(2), plan.EMPTY_SUMMARY, small, measure=measure).estimate
    assert e.documents_read == 0 and "pdf rough" in e.basis


def test_the_prior_is_proven_by_the_run_s_own_reader_and_refused_with_its_line(tmp_path):
    from chunkmill.items import PriorPart
    from chunkmill.refusal import RunRefused
    from chunkmill.transforms import prior
    from tests.unit.test_prior_integrity import flip_a_hash, hand_rows, write

    rows = hand_rows(20)
    path = write(tmp_path / "part-0.parquet", rows)
    summary = plan.summarise_prior(plan.proven_prior([str(path)], plan._PRIOR_COLUMNS))
    assert summary["rows"].to_pylist() == [20]
    # A flipped byte in chunk_hash, a column the summary does not need: the run reads it.
    flip_a_hash(path, rows)
    with pytest.raises(RunRefused) as by_run:
        prior.read_part(PriorPart(str(path), 0), ["doc_id", "chunk_hash"])
    with pytest.raises(RunRefused) as by_plan:
        list(plan.proven_prior([str(path)], plan._PRIOR_COLUMNS))
    assert by_plan.value.line == by_run.value.line
