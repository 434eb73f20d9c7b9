"""``chunkmill plan``: what tonight's run would do, before it runs.

It lists the inputs exactly as ``run`` does, sorts each listed document into unchanged,
failed before, new or changed with the rules ``run`` uses (``chunkmill.document``), counts
the prior documents no longer listed as removed, and estimates the tokens to embed. It writes
nothing and reads no document but a small sample of PDFs when nothing else prices them. How
the estimate is made and what it holds in memory: the "chunkmill plan" section of
docs/design.md.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import carryover, ids, prior_summary
from chunkmill.carryover import PriorState
from chunkmill.config import ChunkingConfig
from chunkmill.document import attempt_key
from chunkmill.extract import format_by_name
from chunkmill.items import ListingError, PriorError, SourceFile, SourceVersion
from chunkmill.pipeline.options import RunSettings
from chunkmill.redact import redact_uri
from chunkmill.transforms import storage, tables

_LOG = logging.getLogger(__name__)

# Per-document partial summaries are re-aggregated once they hold this many rows.
_COMPACT_ROWS = 1_000_000
# Documents named per category in the terminal; the rest are counted.
SHOW_DOCUMENTS = 10

# What a listed document will be (carryover.before_reading), or a prior one no longer listed.
NEW, CHANGED, UNCHANGED, KNOWN_FAILED = (
    carryover.NEW,
    carryover.CHANGED,
    carryover.UNCHANGED,
    carryover.KNOWN_FAILED,
)
REMOVED = "removed"
CATEGORIES = (NEW, CHANGED, UNCHANGED, KNOWN_FAILED, REMOVED)

# Tokens and chunks per byte of file, per format, when the prior manifest has no document of
# that format to learn from: measured with the default config (`auto`, chars4, no context
# window) by `python -m benchmarks.plan_rates`. Markdown, text and code: the bundled sample
# corpus (14, 6 and 8 documents) and 600 documents of benchmarks/mixed_corpus.py (280, 153,
# 114) agree within 10% on tokens (0.25-0.27; chunks per KB differ with document sizes, the
# rate is between the two). PDF bytes are mostly not text, and how much is varies by two
# orders of magnitude: 0.10-0.27 tokens per byte in generated text-only PDFs (the sample
# corpus's 3, mixed_corpus's 53, 20 of tests/helpers.make_pdf), 0.073 in two real typeset
# manuals (403 KB: Debian's libtasn1 and shared-mime-info PDFs, given to the script), 0.0061
# in a user's 31 real PDFs (8.0 MB that embedded 49,076 tokens). The default is the
# manuals' rate; the likely range of an estimate spans them all (PDF_RANGE).
DEFAULT_RATES: dict[str, tuple[float, float]] = {
    # format: (tokens per byte, chunks per KB)
    "markdown": (0.250, 1.5),
    "text": (0.260, 0.6),
    "code": (0.257, 1.7),
    "pdf": (0.073, 0.14),
}
# Formats measured on no corpus (rst, html, docx, json, jsonl, csv, and names only their
# bytes can tell): a byte of text a character, the tokenizer's bytes per token, and chunks
# like prose's.
UNMEASURED_RATE = (0.25, 0.6)
# The likely range of a default rate, as factors of it: text formats' rates vary little
# between the corpora above (tokens are characters / 4 by construction), so within 2x; a PDF
# without a prior from 0.0061 to 0.27 tokens per byte (see DEFAULT_RATES).
TEXT_RANGE = (0.5, 2.0)
PDF_RANGE = (0.0061 / 0.073, 0.27 / 0.073)
# A rate learnt from this many prior documents of a format or more is taken to hold within
# LEARNT_RANGE; from fewer, within TEXT_RANGE.
LEARNT_FROM = 10
LEARNT_RANGE = (0.67, 1.5)
# Bytes per token of each tokenizer relative to chars4's 4, which the defaults were measured
# with: an English word and its space are about six bytes; WordPiece/BPE tokenizers of
# English prose average about four bytes a token.
DEFAULT_BYTES_PER_TOKEN = {"chars4": 4.0, "whitespace": 6.0}
FALLBACK_BYTES_PER_TOKEN = 4.0
# Share of an edited document's tokens embedded again (its chunks whose text changed), when
# the prior holds no edited document to learn it from: measured by benchmarks/plan_rates.py
# on the sample corpus's 28 text documents, each edited three ways (a word inserted in the
# middle, a paragraph appended, a paragraph inserted): 36%, 27% and 38% of the tokens (5%
# to 100% a document, small documents being a chunk or two). Its likely range runs from one
# chunk of the document to all of it.
EDIT_SHARE = 0.35
# Prior documents with new and old chunks both (edited in the prior run) needed to learn the
# edit share from the prior manifest instead.
EDITS_TO_LEARN = 3
# Formats whose text per byte varies too much between corpora for any default to be within
# 2x (PDF: 0.0061 to 0.27 tokens per byte, see DEFAULT_RATES). When the prior teaches no rate
# for one, plan reads a sample of its documents to read and measures their text instead.
SAMPLED_FORMATS = frozenset({"pdf"})
# The sample: the documents of the format with the smallest doc_id (a hash of the URI, so the
# choice is the same every time and unrelated to names, folders or sizes), at most
# SAMPLE_DOCUMENTS of them (each costs a parse, up to --timeout-seconds: a hostile document
# costs a timeout, never the plan) and SAMPLE_BYTES in all (a plan reads megabytes, not the
# corpus); a document larger than SAMPLE_BYTES alone is never sampled.
SAMPLE_DOCUMENTS = 8
SAMPLE_BYTES = 64 * 1024 * 1024

# ---------------------------------------------------------------------------------------------
# Pure helpers


@dataclass(frozen=True)
class PriorDoc:
    """What the plan needs of one document's rows in the prior manifest: the carry-over
    rule's view of them (``state``) and what prices its work."""

    state: PriorState
    current: bool  # every row made with the current config
    tokens: int
    new_rows: int = 0  # rows whose chunk was new in the prior run (``is_new``)
    new_tokens: int = 0
    doc_format: str | None = None

    @property
    def rows(self) -> int:
        return self.state.rows

    @property
    def size(self) -> int | None:
        """The document's size when its rows were made, if the version they share records it."""
        return size_of_version(self.state.version)


def size_of_version(version: str | None) -> int | None:
    """The object size recorded in a ``source_version`` (``size=N;mtime=T`` or
    ``etag=E;size=N``), or None (a GCS ``gen=G``)."""
    parsed = SourceVersion.parse(version)
    return None if parsed is None else parsed.size


def format_of(uri: str) -> str:
    """The format a document will be chunked as, by its name (``chunkmill.extract``'s
    mapping); ``unknown`` where only its bytes can tell."""
    return format_by_name(uri) or UNKNOWN


UNKNOWN = "unknown"


@dataclass(frozen=True)
class Rate:
    """Tokens and chunks per byte of file of one format, and how sure they are."""

    tokens_per_byte: float
    chunks_per_byte: float
    low: float  # the likely range, as factors of the rate
    high: float
    documents: int  # prior documents it was learnt from; 0 for a default

    def scaled(self, factor: float) -> Rate:
        return dataclasses.replace(self, tokens_per_byte=self.tokens_per_byte * factor)


@dataclass
class _Learnt:
    """Sums over prior documents: what rates and the edit share are learnt from."""

    docs: int = 0
    size: int = 0
    tokens: int = 0
    chunks: int = 0

    def add(self, size: int, tokens: int, chunks: int) -> None:
        self.docs += 1
        self.size += size
        self.tokens += tokens
        self.chunks += chunks


def default_rate(fmt: str, config: ChunkingConfig) -> Rate:
    """The rate of a format no prior document teaches (``DEFAULT_RATES``), its tokens scaled
    to the config's tokenizer."""
    tokens, chunks_per_kb = DEFAULT_RATES.get(fmt, UNMEASURED_RATE)
    low, high = PDF_RANGE if fmt == "pdf" else TEXT_RANGE
    bytes_per_token = DEFAULT_BYTES_PER_TOKEN.get(config.tokenizer, FALLBACK_BYTES_PER_TOKEN)
    return Rate(tokens * 4.0 / bytes_per_token, chunks_per_kb / 1024, low, high, 0)


def sampled_rate(pairs: Sequence[tuple[int, int]], fmt: str, config: ChunkingConfig) -> Rate | None:
    """The rate of ``fmt`` measured on a sample: ``pairs`` are the sampled documents'
    (bytes, tokens of their extracted text), failed documents left out. Tokens per byte is
    sum(tokens) / sum(bytes); chunks per byte follows from it at the default's tokens per
    chunk (``DEFAULT_RATES``: the strategy's chunk size does not depend on the corpus). The
    likely range spans the sampled documents' own rates, and at least ``TEXT_RANGE`` (the
    documents not sampled may be further out). None when no document has bytes."""
    size = sum(b for b, _ in pairs)
    if size <= 0:
        return None
    tokens = sum(t for _, t in pairs)
    rate = tokens / size
    default = default_rate(fmt, config)
    chunks_per_token = default.chunks_per_byte / default.tokens_per_byte
    each = [t / b for b, t in pairs if b > 0]
    low, high = TEXT_RANGE
    if rate > 0:
        low, high = min(low, min(each) / rate), max(high, max(each) / rate)
    return Rate(rate, rate * chunks_per_token, low, high, 0)


@dataclass(frozen=True, order=True)
class SampleDoc:
    """A document to read that a sample may measure (ordered by ``doc_id``)."""

    doc_id: str
    uri: str
    version: str | None
    size: int


# Measures sampled documents: for each, (bytes read, tokens of its extracted text), or None
# when it could not be read or extracted.
Measure = Callable[[Sequence[SampleDoc]], Sequence[tuple[int, int] | None]]


def choose_sample(
    candidates: Iterable[SampleDoc], max_bytes: int = SAMPLE_BYTES
) -> list[SampleDoc]:
    """The sample: candidates in ``doc_id`` order, each taken while the total stays within
    ``max_bytes`` (one that would pass it is skipped), at most ``SAMPLE_DOCUMENTS``."""
    chosen: list[SampleDoc] = []
    total = 0
    for doc in sorted(candidates):
        if len(chosen) == SAMPLE_DOCUMENTS:
            break
        if total + doc.size <= max_bytes:
            chosen.append(doc)
            total += doc.size
    return chosen


def learnt_rate(learnt: _Learnt) -> Rate | None:
    if learnt.docs == 0 or learnt.size <= 0:
        return None
    low, high = LEARNT_RANGE if learnt.docs >= LEARNT_FROM else TEXT_RANGE
    return Rate(learnt.tokens / learnt.size, learnt.chunks / learnt.size, low, high, learnt.docs)


@dataclass(frozen=True)
class Estimate:
    """Tokens and chunks the run would embed, with a likely range of tokens."""

    bytes_to_read: int
    chunks: int
    tokens: int
    low: int
    high: int
    basis: str  # where the figures come from, for a person
    rough: bool  # some figure rests on a default, not on the prior
    documents_read: int = 0  # documents read to measure a sample (SAMPLED_FORMATS)


def _ceil(x: float) -> int:
    n = int(x)
    return n + 1 if x > n else n


# ---------------------------------------------------------------------------------------------
# Listing and the prior manifest, as Arrow tables

_LISTING = pa.schema(
    [("uri", pa.string()), ("doc_id", pa.string()), ("size", pa.int64()), ("version", pa.string())]
)


def list_inputs(
    patterns: Sequence[str],
    exclude_prefix: str | None,
    billing_project: str | None = None,
    rules: storage.ListingRules | None = None,
) -> pa.Table:
    """One row per listed object (``uri``, ``doc_id``, ``size``, ``version``), listed by the
    same code as ``tables.ListFiles`` (``storage.plan`` then ``storage.list_shard``, so
    the versions are the store's own: GCS generation, S3 ETag, else size and mtime; directory
    markers skipped) under the same ``rules`` (skipped objects and listing errors are not
    rows): objects under ``exclude_prefix`` left out, an object matched by two patterns
    once."""
    if rules is None:
        rules = storage.ListingRules(output=exclude_prefix)
    parts = []
    for pattern in patterns:
        # One pattern's listing is turned into Arrow columns at once, so no Python object per
        # file outlives its pattern.
        found = []
        for item in storage.plan(pattern, billing_project, rules):
            for f in storage.list_shard(item, rules):
                if isinstance(f, SourceFile):
                    found.append(f)
                elif isinstance(f, ListingError):
                    # run keeps the prior rows of documents under such a folder; this plan
                    # counts them as removed.
                    _LOG.warning("%s: %s (%s)", f.uri, f.reason, f.message)
        # Documents as a run knows them: by their redacted URI (transforms.redact).
        uris = [redact_uri(f.uri) for f in found]
        parts.append(
            pa.table(
                [
                    uris,
                    [ids.doc_id(u) for u in uris],
                    [f.size_bytes for f in found],
                    [f.version for f in found],
                ],
                schema=_LISTING,
            )
        )
    listing = pa.concat_tables(parts) if parts else _LISTING.empty_table()
    once = listing.group_by("uri").aggregate(
        [("doc_id", "max"), ("size", "max"), ("version", "max")]
    )
    return pa.table(
        [once["uri"], once["doc_id_max"], once["size_max"], once["version_max"]], schema=_LISTING
    )


_PRIOR_COLUMNS = [
    "doc_id",
    *carryover.SHARED_COLUMNS,
    "token_count",
    "is_new",
    "doc_format",
]


def summarise_prior(batches: Iterable[pa.Table]) -> pa.Table:
    """One row per prior document (``prior_summary.summarise``, with the token and new-chunk
    sums pricing needs) from manifest batches with the columns ``_PRIOR_COLUMNS``; a
    document's rows may be spread over any number of batches."""
    parts: list[pa.Table] = []
    part_rows, compact_at = 0, _COMPACT_ROWS
    for t in batches:
        tokens = pc.cast(t["token_count"], pa.int64())
        sums = {
            "tokens": tokens,
            "new_rows": pc.cast(t["is_new"], pa.int64()),
            "new_tokens": pc.if_else(t["is_new"], tokens, 0),
        }
        parts.append(prior_summary.summarise(t, sums=sums, firsts=["doc_format"]))
        part_rows += parts[-1].num_rows
        if part_rows >= compact_at:
            parts = [prior_summary.merge(parts)]
            part_rows = parts[0].num_rows
            compact_at = max(_COMPACT_ROWS, 2 * part_rows)
    return prior_summary.merge(parts) if parts else EMPTY_SUMMARY


def _empty_summary() -> pa.Table:
    """The summary of a prior manifest without rows."""
    types = {"token_count": pa.int32(), "is_new": pa.bool_()}
    empty = pa.table({c: pa.array([], types.get(c, pa.string())) for c in _PRIOR_COLUMNS})
    return summarise_prior([empty])


EMPTY_SUMMARY = _empty_summary()


def _prior_docs(summary: pa.Table, fingerprint: str) -> dict[str, PriorDoc]:
    """The ``PriorDoc`` of every document of ``summary``, by doc_id."""
    states = prior_summary.states(summary)
    return {
        doc: PriorDoc(state, state.fingerprint == fingerprint, tokens, new_rows, new_tokens, fmt)
        for doc, state, tokens, new_rows, new_tokens, fmt in zip(
            summary["doc_id"].to_pylist(),
            states,
            summary["tokens"].to_pylist(),
            summary["new_rows"].to_pylist(),
            summary["new_tokens"].to_pylist(),
            summary["doc_format"].to_pylist(),
            strict=True,
        )
    }


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass
class Plan:
    counts: dict[str, int]  # category -> documents
    examples: dict[str, list[str]]  # category -> up to SHOW_DOCUMENTS URIs, sorted
    estimate: Estimate
    listed: int = 0


_FAILURES = pa.schema(
    [
        ("doc_id", pa.string()),
        ("failed_version", pa.string()),
        ("failed_key", pa.string()),
        ("failed_reason", pa.string()),
    ]
)


@dataclass
class _Work:
    """What the documents to read add up to, gathered in one pass over the listing."""

    by_rate: Counter[str] = field(default_factory=Counter)  # format -> bytes priced by rate
    docs_by_rate: Counter[str] = field(default_factory=Counter)  # format -> documents
    # SAMPLED_FORMATS -> the SAMPLE_DOCUMENTS candidates of smallest doc_id, sorted, each
    # within sample_max_bytes (the most one sample reads): enough for choose_sample.
    candidates: dict[str, list[SampleDoc]] = field(default_factory=lambda: defaultdict(list))
    sample_max_bytes: int = SAMPLE_BYTES
    edited_tokens: float = 0.0  # edited documents' tokens, scaled from their prior rows
    edited_chunks: float = 0.0
    edited_one_chunk: float = 0.0  # the tokens of one chunk of each edited document
    learnt: dict[str, _Learnt] = field(default_factory=lambda: defaultdict(_Learnt))
    all_learnt: _Learnt = field(default_factory=_Learnt)
    edited_docs: int = 0  # prior documents the prior run found partly new (edited)
    edited_prior_tokens: int = 0
    edited_prior_new_tokens: int = 0

    def read(
        self,
        uri: str,
        size: int,
        prior: PriorDoc | None,
        doc_id: str = "",
        version: str | None = None,
    ) -> None:
        """A new or changed document of ``size`` bytes: a document edited under the current
        config is priced from its own prior rows (scaled by its size); any other by the
        rate of its format."""
        prior_size = prior.size if prior is not None else None
        if prior is None or not prior.current or prior.tokens <= 0:
            fmt = format_of(uri)
            self.by_rate[fmt] += size
            self.docs_by_rate[fmt] += 1
            if fmt in SAMPLED_FORMATS and size <= self.sample_max_bytes:
                kept = self.candidates[fmt]
                if len(kept) < SAMPLE_DOCUMENTS or doc_id < kept[-1].doc_id:
                    kept.append(SampleDoc(doc_id, uri, version, size))
                    kept.sort()
                    del kept[SAMPLE_DOCUMENTS:]
            return
        scale = size / prior_size if prior_size else 1.0
        self.edited_tokens += prior.tokens * scale
        self.edited_chunks += prior.rows * scale
        self.edited_one_chunk += min(prior.tokens * scale, prior.tokens / prior.rows)

    def learn(self, prior: PriorDoc) -> None:
        """Rates per format from prior documents made with the current config whose size is
        known; the edit share from those the prior run found partly new."""
        size = prior.size
        if not prior.current or not size:
            return
        fmt = prior.doc_format or UNKNOWN
        self.learnt[fmt].add(size, prior.tokens, prior.rows)
        self.all_learnt.add(size, prior.tokens, prior.rows)
        if 0 < prior.new_rows < prior.rows:
            self.edited_docs += 1
            self.edited_prior_tokens += prior.tokens
            self.edited_prior_new_tokens += prior.new_tokens


def compare(
    listing: pa.Table,
    prior: pa.Table,
    config: ChunkingConfig,
    failures: pa.Table | None = None,
    attempt_key: str | None = None,
    measure: Measure | None = None,
) -> Plan:
    """Classify every listed and every prior document and estimate the work (pure: tables in,
    plan out). ``listing`` has the columns of ``list_inputs``, ``prior`` those of
    ``summarise_prior``,
    ``failures`` those of ``read_failures`` (the prior run's errors), judged under
    ``attempt_key`` (``chunkmill.document.attempt_key`` of ``config``). ``measure`` reads
    and measures a sample of a format in ``SAMPLED_FORMATS`` the prior teaches no rate of
    (``measure_sample``); without it such a format gets its default rate."""
    if failures is not None and failures.num_rows:
        listing = listing.join(_one_failure_per_doc(failures), "doc_id", join_type="left outer")
    priors = _prior_docs(prior, config.fingerprint)
    prior_uris = dict(
        zip(prior["doc_id"].to_pylist(), prior["source_uri_min"].to_pylist(), strict=True)
    )
    counts = dict.fromkeys(CATEGORIES, 0)
    uris: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    bytes_to_read = 0
    work = _Work(sample_max_bytes=min(SAMPLE_BYTES, config.limits.max_document_bytes))
    listed_docs: set[str] = set()
    for batch in listing.to_batches():
        for row in batch.to_pylist():
            doc, uri = row["doc_id"], row["uri"]
            listed_docs.add(doc)
            prior_doc = priors.get(doc)
            failure = None
            if row.get("failed_reason") is not None:
                failure = PriorError(
                    row["failed_version"], row["failed_key"], "", row["failed_reason"], "", None
                )
            category = carryover.before_reading(
                row["version"],
                None if prior_doc is None else prior_doc.state,
                config.fingerprint,
                failure,
                attempt_key or "",
            )
            if category in (NEW, CHANGED):
                bytes_to_read += row["size"]
                work.read(uri, row["size"], prior_doc, doc, row["version"])
            counts[category] += 1
            _keep_first(uris[category], uri)
    for doc, prior_doc in priors.items():
        if doc not in listed_docs:
            counts[REMOVED] += 1
            _keep_first(uris[REMOVED], prior_uris[doc])
        work.learn(prior_doc)
    return Plan(
        counts=counts,
        examples=uris,
        estimate=_estimate(bytes_to_read, work, config, measure),
        listed=listing.num_rows,
    )


def _one_failure_per_doc(failures: pa.Table) -> pa.Table:
    g = failures.group_by("doc_id").aggregate(
        [("failed_version", "max"), ("failed_key", "max"), ("failed_reason", "max")]
    )
    return pa.table(
        [g["doc_id"], g["failed_version_max"], g["failed_key_max"], g["failed_reason_max"]],
        schema=_FAILURES,
    )


def _estimate(
    bytes_to_read: int, work: _Work, config: ChunkingConfig, measure: Measure | None = None
) -> Estimate:
    """Tokens to embed: documents priced by rate embed every token (a first run embeds all
    but duplicates, which are not modelled); an edited document embeds a share of its tokens
    (its chunks whose text changed), learnt from the prior's edited documents or
    ``EDIT_SHARE``. A format of ``SAMPLED_FORMATS`` the prior teaches nothing of is priced
    by a sample ``measure`` reads, else by its default."""
    tokens = chunks = low = high = 0.0
    notes: list[str] = []
    defaults: list[str] = []
    documents_read = 0
    for fmt, size in sorted(work.by_rate.items()):
        fmt_chunks_at_least = 0.0
        rate = learnt_rate(work.learnt[fmt]) if fmt != UNKNOWN else None
        if rate is None and fmt == UNKNOWN:
            rate = learnt_rate(work.all_learnt)
        if rate is None and measure is not None and work.candidates.get(fmt):
            sample = choose_sample(work.candidates[fmt], work.sample_max_bytes)
            measured = list(measure(sample))
            documents_read += len(sample)
            pairs = [m for m in measured if m is not None]
            rate = sampled_rate(pairs, fmt, config) if pairs else None
            failed = len(sample) - len(pairs)
            of = f"{len(sample)} of {_plural(work.docs_by_rate[fmt], fmt.upper())} to read"
            if rate is not None:
                # A document with text is at least one chunk: a rate measured on a few
                # documents says little of chunks, which depend on each one's length.
                fmt_chunks_at_least = work.docs_by_rate[fmt] * len(pairs) / len(sample)
                notes.append(
                    f"{fmt} from a sample of {of} (read for this estimate"
                    + (f"; {failed} failed to extract, left out)" if failed else ")")
                )
            else:
                notes.append(f"{fmt} default: every sampled document of {of} failed to extract")
        if rate is None:
            rate = default_rate(fmt, config)
            defaults.append(fmt)
        elif rate.documents:
            notes.append(f"{fmt} from {_plural(rate.documents, 'prior document')}")
        t = size * rate.tokens_per_byte
        tokens += t
        chunks += max(size * rate.chunks_per_byte, fmt_chunks_at_least)
        low, high = low + t * rate.low, high + t * rate.high
    rough = bool(defaults)
    if defaults:
        notes.append(f"{', '.join(defaults)} rough (no prior of the format: default rates)")
    if work.edited_tokens:
        if work.edited_docs >= EDITS_TO_LEARN and work.edited_prior_tokens:
            share = work.edited_prior_new_tokens / work.edited_prior_tokens
            notes.append(
                f"an edited document re-embeds ~{share:.0%} of its tokens, as the "
                f"{_plural(work.edited_docs, 'document')} edited in the prior run did"
            )
        else:
            share, rough = EDIT_SHARE, True
            notes.append(
                f"an edited document re-embeds ~{share:.0%} of its tokens (rough: the prior "
                "has too few edited documents to learn from)"
            )
        tokens += share * work.edited_tokens
        chunks += share * work.edited_chunks
        low += work.edited_one_chunk
        high += work.edited_tokens
    return Estimate(
        bytes_to_read,
        _ceil(chunks),
        _ceil(tokens),
        int(low),
        _ceil(high),
        "; ".join(notes) or "nothing to read",
        rough,
        documents_read,
    )


def _keep_first(kept: list[str], uri: str) -> None:
    """Keeps the SHOW_DOCUMENTS smallest URIs seen, sorted (the terminal names a few)."""
    if len(kept) < SHOW_DOCUMENTS or uri < kept[-1]:
        kept.append(uri)
        kept.sort()
        del kept[SHOW_DOCUMENTS:]


def read_failures(paths: Sequence[str]) -> pa.Table:
    """The prior run's errors files as a table of ``_FAILURES``: one row per failed document,
    read like the run reads them (``chunkmill.transforms.tables.prior_errors``)."""
    rows = [
        (doc, e.source_version, e.attempt_key, e.reason)
        for path in sorted(paths)
        for doc, e in tables.prior_errors(path)
    ]
    return pa.table([list(col) for col in zip(*rows, strict=True)] or [[]] * 4, schema=_FAILURES)


def measure_sample(settings: RunSettings) -> Measure:
    """Measures sampled documents as the run would read them: through ``ObjectReader`` (its
    version pin, --max-document-bytes and symlink rules), extracted by the run's isolated
    ``Extractor`` (its limits and PDF engine: a hostile document costs a timeout or a
    failure, never the plan), tokens counted by the config's tokenizer."""

    def measure(docs: Sequence[SampleDoc]) -> list[tuple[int, int] | None]:
        from chunkmill.config import Chunking
        from chunkmill.isolation import Extractor

        config = settings.config
        within = None if settings.follow_symlinks else storage.local_roots(settings.inputs)
        read = storage.ObjectReader(billing_project=settings.billing_project, within=within)
        count_tokens = Chunking(config).count_tokens
        out: list[tuple[int, int] | None] = []
        extractor = Extractor(config.limits, **config.extract_options())
        try:
            for doc in docs:
                try:
                    data = read(doc.uri, doc.version, max_bytes=config.limits.max_document_bytes)
                    text = extractor(doc.uri, data).text
                except Exception as e:  # the run would record it as failed: not in the rate
                    _LOG.info("sample %s not measured: %s", doc.uri, e)
                    out.append(None)
                    continue
                out.append((len(data), count_tokens(text)))
        finally:
            extractor.close()
        return out

    return measure


def make_plan(settings: RunSettings) -> Plan:
    """Lists the inputs and reads the prior manifest and errors (if any), and a small sample
    of the documents to read of a format whose rate only its text can tell
    (``SAMPLED_FORMATS``, when the prior teaches none); writes nothing."""
    listing = list_inputs(
        settings.inputs, settings.output, settings.billing_project, settings.listing_rules()
    )
    _LOG.info("listed %d documents", listing.num_rows)
    if not settings.prior_files:
        prior = EMPTY_SUMMARY
    else:
        paths = list(settings.prior_files)  # proven before (pipeline.preflight)
        prior = summarise_prior(tables.read_parquet_batches(paths, _PRIOR_COLUMNS))
        _LOG.info(
            "prior manifest: %s in %s",
            _plural(prior.num_rows, "document"),
            _plural(len(paths), "file"),
        )
    failures = read_failures(settings.prior_errors)
    return compare(
        listing,
        prior,
        settings.config,
        failures,
        attempt_key(settings.config),
        measure_sample(settings),
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def removal_warning(removed: int, prior_docs: int, settings: RunSettings) -> str | None:
    """The warning line when ``run`` would refuse to publish these removals
    (``--max-removed-ratio``, ``chunkmill.transforms.tables.check_removed_ratio``), else None."""
    limit = settings.max_removed_ratio
    if limit is None or prior_docs == 0 or removed / prior_docs <= limit:
        return None
    return (
        f"warning    removes {removed} of {prior_docs} documents of the prior run "
        f"({removed / prior_docs:.1%}), more than --max-removed-ratio {limit:g}: run would "
        "fail unpublished unless given a higher --max-removed-ratio"
    )


def _about(n: int) -> str:
    """``n`` to two significant digits (an estimate claims no more), with thousands commas."""
    if n >= 100:
        digits = len(str(n)) - 2
        n = round(n, -digits)
    return f"{n:,}"


def render(plan: Plan, settings: RunSettings) -> str:
    """The plan in a few lines for the terminal."""
    c, e = plan.counts, plan.estimate
    prior = settings.prior_run_id or settings.prior_manifest or "none"
    sure = f"likely {_about(e.low)}-{_about(e.high)}" + ("; rough" if e.rough else "")
    lines = [
        f"plan for {redact_uri(settings.output)}  (prior: {prior})",
        f"documents  listed {plan.listed}  new {c[NEW]}  changed {c[CHANGED]}  "
        f"unchanged {c[UNCHANGED]}  removed {c[REMOVED]}  failed before {c[KNOWN_FAILED]}",
        f"to read    {_plural(c[NEW] + c[CHANGED], 'document')}, {human_bytes(e.bytes_to_read)} "
        "(new and changed; the rest are not read)",
        f"estimate   ~{_about(e.tokens)} tokens in ~{_about(e.chunks)} chunks to embed ({sure})"
        if e.bytes_to_read
        else "estimate   0 tokens to embed (nothing to read)",
    ]
    if e.bytes_to_read:
        lines.append(f"           rates: {e.basis}")
    if c[KNOWN_FAILED]:
        lines.append(
            f"not read   {_plural(c[KNOWN_FAILED], 'document')} failed before and did not "
            "change (--retry-failed reads them)"
        )
    for category in (NEW, CHANGED, KNOWN_FAILED, REMOVED):
        shown = plan.examples[category]
        label = "failed" if category == KNOWN_FAILED else category
        for uri in shown:
            lines.append(f"{label:<10} {uri}")
        if c[category] > len(shown):
            lines.append(f"{'':<10} ... and {c[category] - len(shown)} more")
    removed_ratio = removal_warning(c[REMOVED], c[CHANGED] + c[UNCHANGED] + c[REMOVED], settings)
    if removed_ratio:
        lines.append(removed_ratio)
    if e.documents_read:
        lines.append(
            f"{_plural(e.documents_read, 'document')} read for the estimate; nothing was written"
        )
    else:
        lines.append("no document was read; nothing was written")
    return "\n".join(lines)
