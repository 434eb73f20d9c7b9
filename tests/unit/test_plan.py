"""`chunkmill plan`'s comparison and estimate, on hand-made listings and prior manifests."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill import carryover, ids, prior_summary
from chunkmill.config import ChunkingConfig
from chunkmill.isolation import Limits
from chunkmill.items import SourceFile
from chunkmill.pipeline import plan
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


def _doc(rows: int, versions: set, current: bool = True, tokens: int = 30) -> plan.PriorDoc:
    version = next(iter(versions)) if len(versions) == 1 else None
    state = carryover.PriorState(rows, version, FP if current else None)
    return plan.PriorDoc(state, current, tokens)


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


def _summary_of(prior: plan.PriorDoc) -> pa.Table:
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
    tokens_per_byte, _ = plan.DEFAULT_RATES["pdf"]
    assert e.tokens == round(100_000 * tokens_per_byte) and e.rough
    assert "pdf rough" in e.basis
    # A PDF's text per byte varies by two orders of magnitude: so does the range.
    assert e.high / e.low > 30


@pytest.mark.parametrize(("tokenizer", "factor"), [("chars4", 1.0), ("whitespace", 4 / 6)])
def test_default_rates_follow_the_tokenizer(tokenizer, factor):
    config = ChunkingConfig.create("paragraph", tokenizer=tokenizer)
    rate = plan.default_rate("markdown", config)
    assert rate.tokens_per_byte == pytest.approx(plan.DEFAULT_RATES["markdown"][0] * factor)
    assert plan.default_rate("rst", config).tokens_per_byte == pytest.approx(0.25 * factor)


def test_an_edited_document_is_priced_from_its_own_rows_and_the_edit_share():
    # 4 chunks of 10 tokens at 100 bytes; now 200 bytes: ~80 tokens, of which a share is new.
    summary = plan.summarise_prior(prior_table(prior_rows("/c/a.md", 4, V1)))
    e = plan.compare(listing(("/c/a.md", 200, V2)), summary, SMALL).estimate
    assert e.tokens == round(80 * plan.EDIT_SHARE)
    assert (e.low, e.high) == (10, 80)  # one chunk .. all of it
    assert e.rough and "rough" in e.basis


def test_the_edit_share_is_learnt_from_documents_the_prior_run_found_partly_new():
    edited = [r for i in range(3) for r in prior_rows(f"/c/e{i}.md", 10, V1, new=1)]
    summary = plan.summarise_prior(prior_table(edited + prior_rows("/c/a.md", 4, V1)))
    e = plan.compare(listing(("/c/a.md", 100, V2)), summary, SMALL).estimate
    assert e.tokens == 4  # 10% of 40 tokens
    assert "~10% of its tokens, as the 3 documents edited in the prior run did" in e.basis
    assert not e.rough


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
    assert plan.size_of_version("size=12;mtime=3.5") == 12
    assert plan.size_of_version(None) is None
    assert plan.size_of_version("something else") is None
    assert plan.size_of_version('etag="9b2cf535f27731c974343645a3985328";size=40') == 40  # S3
    assert plan.size_of_version("gen=1700000000000001") is None  # GCS records no size
    assert plan.size_of_version("size=12x;mtime=3.5") is None


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


def test_a_sampled_rate_is_the_sample_s_tokens_per_byte_with_its_spread():
    # 1,000 and 9,000 tokens in 100,000 bytes each: 0.05 tokens per byte, the documents at
    # 0.2x and 1.8x of it (the range: at least TEXT_RANGE's 2x).
    rate = plan.sampled_rate([(100_000, 1_000), (100_000, 9_000)], "pdf", SMALL)
    assert rate is not None and rate.tokens_per_byte == pytest.approx(0.05)
    default = plan.default_rate("pdf", SMALL)
    per_chunk = default.tokens_per_byte / default.chunks_per_byte
    assert rate.chunks_per_byte == pytest.approx(0.05 / per_chunk)
    assert (rate.low, rate.high) == (pytest.approx(0.2), 2.0)
    # A tight sample is still taken within at least TEXT_RANGE: the rest was not read.
    tight = plan.sampled_rate([(1000, 100), (2000, 200)], "pdf", SMALL)
    assert tight is not None and (tight.low, tight.high) == plan.TEXT_RANGE
    assert plan.sampled_rate([], "pdf", SMALL) is None
    assert plan.sampled_rate([(0, 0)], "pdf", SMALL) is None


def test_the_sample_is_the_smallest_doc_ids_within_the_byte_budget():
    docs = [plan.SampleDoc(f"{i:02d}", f"/c/{i}.pdf", V1, 10) for i in range(20)]
    assert [d.doc_id for d in plan.choose_sample(reversed(docs))] == [
        f"{i:02d}" for i in range(plan.SAMPLE_DOCUMENTS)
    ]
    big = plan.SampleDoc("00", "/c/big.pdf", V1, 95)
    # The big one leads by doc_id; the next that would pass the budget is skipped.
    chosen = plan.choose_sample([big, *docs[1:]], max_bytes=120)
    assert [d.doc_id for d in chosen] == ["00", "01", "02"]


def _pdfs(n: int, size: int = 10_000) -> pa.Table:
    return listing(*((f"/c/{i:02d}.pdf", size, V1) for i in range(n)))


def test_a_first_run_over_pdfs_is_priced_by_a_sample_it_reads():
    asked: list[list[str]] = []

    def measure(docs):
        asked.append([d.uri for d in docs])
        # Every document: 100 tokens in its 10,000 bytes (0.01 a byte), one fails.
        return [None if i == 0 else (d.size, 100) for i, d in enumerate(docs)]

    p = plan.compare(_pdfs(31), plan.EMPTY_SUMMARY, SMALL, measure=measure)
    e = p.estimate
    assert len(asked) == 1 and len(asked[0]) == plan.SAMPLE_DOCUMENTS
    by_id = sorted((ids.doc_id(f"/c/{i:02d}.pdf"), f"/c/{i:02d}.pdf") for i in range(31))
    assert asked[0] == [u for _, u in by_id[: plan.SAMPLE_DOCUMENTS]]
    assert e.tokens == 31 * 100 and e.documents_read == plan.SAMPLE_DOCUMENTS
    assert "pdf from a sample of 8 of 31 PDFs to read (read for this estimate" in e.basis
    assert "1 failed to extract, left out" in e.basis and "prior document" not in e.basis
    # Each of the 7 in 8 documents that extract is a chunk at least.
    assert e.chunks == 28
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
    assert "8 documents read for the estimate; nothing was written" in text
    assert "no document was read" not in text


def test_a_sample_that_fails_entirely_falls_back_to_the_default():
    e = plan.compare(
        _pdfs(3), plan.EMPTY_SUMMARY, SMALL, measure=lambda docs: [None] * len(docs)
    ).estimate
    tokens_per_byte, _ = plan.DEFAULT_RATES["pdf"]
    assert e.tokens == round(30_000 * tokens_per_byte) and e.rough
    assert e.documents_read == 3 and "every sampled document" in e.basis


def test_a_learnt_pdf_rate_or_text_formats_read_no_sample():
    def measure(docs):
        raise AssertionError("read a document")

    rows = prior_rows("/c/r.pdf", 2, "size=10000;mtime=1.0", fmt="pdf")
    summary = plan.summarise_prior(prior_table(rows))
    listed = listing(("/c/n.pdf", 5000, V1), ("/c/n.md", 5000, V1))
    e = plan.compare(listed, summary, SMALL, measure=measure).estimate
    assert e.documents_read == 0 and "pdf from 1 prior document" in e.basis
    # Too large to sample (over --max-document-bytes): the run would not read it either.
    small = ChunkingConfig.create("paragraph", limits=Limits(max_document_bytes=100))
    e = plan.compare(_pdfs(2), plan.EMPTY_SUMMARY, small, measure=measure).estimate
    assert e.documents_read == 0 and "pdf rough" in e.basis
