"""``chunkmill plan``: what tonight's run would do, before it runs.

It lists the inputs exactly as ``run`` does, sorts each listed document into unchanged,
failed before, new or changed with the rules ``run`` uses (``chunkmill.document``), counts
the prior documents no longer listed as removed, and estimates the tokens to embed. It writes
nothing, proves the prior manifest as ``run`` does, and reads no document but a sample of a
format the prior teaches no rate of. How the estimate is made and what it holds in memory:
the "chunkmill plan" section of docs/design.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import carryover, ids, prior_summary, schema
from chunkmill.carryover import PriorState
from chunkmill.config import ChunkingConfig
from chunkmill.document import attempt_key
from chunkmill.extract import format_by_name
from chunkmill.items import ListingError, PriorError, SourceFile, SourceVersion, WorkItem
from chunkmill.pipeline.options import RunSettings, UsageError
from chunkmill.redact import redact_uri
from chunkmill.refusal import RunRefused
from chunkmill.transforms import prior as prior_parts
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
# An edited document (listed under a new version, its prior rows made with the current
# config) embeds the chunks whose text changed: priced from its own prior rows as one chunk
# (the chunk the edit falls in) plus the share of its bytes that changed, |new size - prior
# size| / prior size, of its tokens; at most all of them.
#
# Any other document to read (new, or re-chunked under another config or PDF engine) is
# priced like a first run: by the rate of its format learnt from the prior's documents of the
# current config, else by a sample of those documents read, extracted and chunked as the run
# does them (``measure_sample``), its tokens counted only for chunks whose text the prior does
# not hold already (a re-chunked Markdown file whose chunks did not change embeds nothing).
#
# The sample of a format: strata by folder and size class (a factor of 4 in bytes); every
# folder is sampled before a second document of one, every size class of a folder before a
# second of one (``choose_sample``), and within a stratum in the order of
# SHA-256(SAMPLE_SEED + doc_id), so the same listing gives the same sample every time and
# neither names nor ids decide it; at most SAMPLE_DOCUMENTS a format (each costs a parse, up
# to --doc-timeout-seconds: a hostile document costs a timeout, never the plan) and
# SAMPLE_BYTES in all; a document larger than SAMPLE_BYTES alone is never sampled. Each
# stratum's bytes to read at its sampled tokens and chunks per byte (else its folder's, its
# size class's, the whole sample's) is the format's estimate (``sampled_rates``).
SAMPLE_DOCUMENTS = 16
SAMPLE_BYTES = 64 * 1024 * 1024
SAMPLE_SEED = "chunkmill plan sample 1"
# Strata a format keeps candidates of, SAMPLE_DOCUMENTS each at most (memory: a corpus in
# more folders than this pools the rest in one stratum per size class).
MAX_STRATA = 10_000

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


def size_class(size: int) -> int:
    """The size class of a document: sizes within a factor of 4 share one."""
    return max(size, 1).bit_length() // 2


def folder_of(uri: str) -> str:
    return uri.rsplit("/", 1)[0] if "/" in uri else ""


@dataclass(frozen=True, order=True)
class SampleDoc:
    """A document to read that a sample may measure (ordered by ``rank``, its place in the
    seeded order)."""

    rank: str
    doc_id: str
    uri: str
    version: str | None
    size: int

    @classmethod
    def of(cls, doc_id: str, uri: str, version: str | None, size: int) -> SampleDoc:
        rank = hashlib.sha256(f"{SAMPLE_SEED}{doc_id}".encode()).hexdigest()
        return cls(rank, doc_id, uri, version, size)


@dataclass(frozen=True)
class Measured:
    """What the run would make of one sampled document: its bytes, and the tokens of each
    distinct chunk text (by ``chunk_hash``) it would chunk it into (none when it fails)."""

    size: int
    chunks: dict[str, int]  # chunk_hash -> token_count


# Measures sampled documents (``measure_sample``): one ``Measured`` each, in order.
Measure = Callable[[Sequence[SampleDoc]], Sequence[Measured]]
# Of the given chunk hashes, those the prior manifest holds (``prior_hashes``).
KnownHashes = Callable[[set[str]], set[str]]


@dataclass
class _Strata:
    """The documents of one format priced by a sample: bytes per stratum (folder, size
    class) and per size class, and per stratum its first SAMPLE_DOCUMENTS candidates by
    rank."""

    bytes_by_stratum: Counter[tuple[str, int]] = field(default_factory=Counter)
    bytes_by_class: Counter[int] = field(default_factory=Counter)
    candidates: dict[tuple[str, int], list[SampleDoc]] = field(default_factory=dict)

    def stratum(self, doc: SampleDoc) -> tuple[str, int]:
        key = (folder_of(doc.uri), size_class(doc.size))
        if key not in self.bytes_by_stratum and len(self.bytes_by_stratum) >= MAX_STRATA:
            return ("", key[1])
        return key

    def add(self, doc: SampleDoc, max_bytes: int) -> None:
        key = self.stratum(doc)
        self.bytes_by_stratum[key] += doc.size
        self.bytes_by_class[key[1]] += doc.size
        if doc.size > max_bytes:
            return
        kept = self.candidates.setdefault(key, [])
        if len(kept) < SAMPLE_DOCUMENTS or doc < kept[-1]:
            kept.append(doc)
            kept.sort()
            del kept[SAMPLE_DOCUMENTS:]


def choose_sample(strata: _Strata, max_bytes: int = SAMPLE_BYTES) -> list[SampleDoc]:
    """Up to SAMPLE_DOCUMENTS documents within ``max_bytes``, one at a time from the stratum
    whose folder, then size class, has been sampled least so far (the stratum of most bytes
    first among equals; within a stratum by rank): every folder before a second document of
    one, every size class of a folder before a second of one. A document that would pass
    ``max_bytes`` is skipped."""
    left = {key: list(kept) for key, kept in strata.candidates.items()}
    folders: Counter[str] = Counter()
    classes: Counter[tuple[str, int]] = Counter()
    chosen: list[SampleDoc] = []
    total = 0
    while len(chosen) < SAMPLE_DOCUMENTS and left:
        key = min(
            left,
            key=lambda k: (folders[k[0]], classes[k], -strata.bytes_by_stratum[k], k),
        )
        doc = left[key].pop(0)
        if not left[key]:
            del left[key]
        if total + doc.size > max_bytes:
            continue
        chosen.append(doc)
        total += doc.size
        folders[key[0]] += 1
        classes[key] += 1
    return chosen


def sampled_rates(
    strata: _Strata, sample: Sequence[SampleDoc], measured: Sequence[tuple[int, int, int]]
) -> tuple[float, float, float, float]:
    """(tokens, chunks, low, high) of a format's documents to read, extrapolated from its
    sampled documents' ``(bytes, new tokens, new chunks)``: each stratum's bytes at its own
    sampled tokens and chunks per byte; a stratum without a sampled document at its folder's,
    else its size class's, else the whole sample's. The likely range spans the sampled
    documents' own rates (at least ``TEXT_RANGE``)."""
    by_stratum: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    by_folder: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    by_class: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    overall = [0, 0, 0]
    for doc, got in zip(sample, measured, strict=True):
        key = (folder_of(doc.uri), size_class(doc.size))
        if key not in strata.bytes_by_stratum:
            key = ("", key[1])
        for sums in (by_stratum[key], by_folder[key[0]], by_class[key[1]], overall):
            for i in range(3):
                sums[i] += got[i]
    if overall[0] <= 0:
        return 0.0, 0.0, 0.0, 0.0
    tokens = chunks = 0.0
    for (folder, cls), size in strata.bytes_by_stratum.items():
        nearest = (by_stratum.get((folder, cls)), by_folder.get(folder), by_class.get(cls))
        sums = next((s for s in nearest if s and s[0]), overall)
        tokens += size * sums[1] / sums[0]
        chunks += size * sums[2] / sums[0]
    rate = overall[1] / overall[0]
    each = [t / b for b, t, _ in measured if b > 0]
    low, high = TEXT_RANGE
    if rate > 0:
        low, high = min(low, min(each) / rate), max(high, max(each) / rate)
    else:
        low, high = 0.0, 0.0
    return tokens, chunks, tokens * low, tokens * high


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
    documents_read: int = 0  # documents read to measure a sample (formats no prior teaches)


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
    strata: dict[str, _Strata] = field(default_factory=lambda: defaultdict(_Strata))
    sample_max_bytes: int = SAMPLE_BYTES
    edited_docs: int = 0
    edited_tokens: float = 0.0  # edited documents' priced tokens (one chunk + bytes changed)
    edited_chunks: float = 0.0
    edited_one_chunk: float = 0.0  # the tokens of one chunk of each edited document
    edited_all: float = 0.0  # every token of each edited document, scaled to its size
    learnt: dict[str, _Learnt] = field(default_factory=lambda: defaultdict(_Learnt))
    all_learnt: _Learnt = field(default_factory=_Learnt)

    def read(
        self,
        uri: str,
        size: int,
        prior: PriorDoc | None = None,
        doc_id: str = "",
        version: str | None = None,
    ) -> None:
        """A new or changed document of ``size`` bytes: a document edited under the current
        config is priced from its own prior rows and the bytes changed; any other by the
        rate of its format (or a sample's)."""
        if prior is None or not prior.current or prior.tokens <= 0:
            fmt = format_of(uri)
            self.by_rate[fmt] += size
            self.docs_by_rate[fmt] += 1
            self.strata[fmt].add(SampleDoc.of(doc_id, uri, version, size), self.sample_max_bytes)
            return
        prior_size = prior.size
        changed = abs(size - prior_size) / prior_size if prior_size else 1.0
        scale = size / prior_size if prior_size else 1.0
        tokens, rows = prior.tokens * scale, max(prior.rows * scale, 1.0)
        one_chunk = prior.tokens / prior.rows
        self.edited_docs += 1
        self.edited_tokens += min(tokens, one_chunk + changed * tokens)
        self.edited_chunks += min(rows, 1 + changed * rows)
        self.edited_one_chunk += min(tokens, one_chunk)
        self.edited_all += tokens

    def learn(self, prior: PriorDoc) -> None:
        """Rates per format from prior documents made with the current config whose size is
        known."""
        size = prior.size
        if not prior.current or not size:
            return
        fmt = prior.doc_format or UNKNOWN
        self.learnt[fmt].add(size, prior.tokens, prior.rows)
        self.all_learnt.add(size, prior.tokens, prior.rows)


def compare(
    listing: pa.Table,
    prior: pa.Table,
    config: ChunkingConfig,
    failures: pa.Table | None = None,
    attempt_key: str | None = None,
    measure: Measure | None = None,
    known: KnownHashes | None = None,
) -> Plan:
    """Classify every listed and every prior document and estimate the work (pure: tables in,
    plan out). ``listing`` has the columns of ``list_inputs``, ``prior`` those of
    ``summarise_prior``,
    ``failures`` those of ``read_failures`` (the prior run's errors), judged under
    ``attempt_key`` (``chunkmill.document.attempt_key`` of ``config``). ``measure`` reads
    and measures a sample of a format the prior teaches no rate of (``measure_sample``),
    ``known`` tells which of its chunks the prior holds (``prior_hashes``); without
    ``measure`` such a format gets its default rate."""
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
        estimate=_estimate(bytes_to_read, work, config, measure, known),
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
    bytes_to_read: int,
    work: _Work,
    config: ChunkingConfig,
    measure: Measure | None = None,
    known: KnownHashes | None = None,
) -> Estimate:
    """Tokens to embed: documents priced by a learnt rate embed every token (a first run
    embeds all but duplicates, which are not modelled); a format the prior teaches nothing of
    is priced by a sample ``measure`` reads (its chunks ``known`` to the prior left out), else
    by its default; an edited document embeds one chunk plus its bytes changed (see
    SAMPLE_DOCUMENTS). Every sample is measured in one call, and looked up in the prior in
    one pass."""
    tokens = chunks = low = high = 0.0
    notes: list[str] = []
    defaults: list[str] = []
    rates: dict[str, Rate] = {}
    samples: dict[str, list[SampleDoc]] = {}
    for fmt in sorted(work.by_rate):
        rate = learnt_rate(work.learnt[fmt] if fmt != UNKNOWN else work.all_learnt)
        if rate is not None:
            rates[fmt] = rate
        elif measure is not None and (
            sample := choose_sample(work.strata[fmt], work.sample_max_bytes)
        ):
            samples[fmt] = sample
        else:
            rates[fmt] = default_rate(fmt, config)
            defaults.append(fmt)
    everything = [doc for sample in samples.values() for doc in sample]
    measured = list(measure(everything)) if measure is not None and everything else []
    held = known(set().union(*(m.chunks for m in measured))) if known and measured else set()
    at = 0
    for fmt, sample in samples.items():
        per_doc = [
            (
                m.size,
                sum(t for h, t in m.chunks.items() if h not in held),
                sum(1 for h in m.chunks if h not in held),
            )
            for m in measured[at : at + len(sample)]
        ]
        failed = sum(1 for m in measured[at : at + len(sample)] if not m.chunks)
        at += len(sample)
        t, c, lo, hi = sampled_rates(work.strata[fmt], sample, per_doc)
        docs = work.docs_by_rate[fmt]
        # A document with new text is at least one chunk.
        c = max(c, docs * sum(1 for _, _, n in per_doc if n) / len(sample))
        tokens, chunks, low, high = tokens + t, chunks + c, low + lo, high + hi
        notes.append(
            f"{fmt} from a sample of {len(sample)} of its {_plural(docs, 'document')} "
            "to read, read and chunked for this estimate"
            + (f" ({failed} failed, priced as 0)" if failed else "")
        )
    for fmt, rate in rates.items():
        if rate.documents:
            notes.append(f"{fmt} from {_plural(rate.documents, 'prior document')}")
        t = work.by_rate[fmt] * rate.tokens_per_byte
        tokens += t
        chunks += work.by_rate[fmt] * rate.chunks_per_byte
        low, high = low + t * rate.low, high + t * rate.high
    rough = bool(defaults)
    if defaults:
        notes.append(f"{', '.join(defaults)} rough (no prior of the format: default rates)")
    if work.edited_docs:
        notes.append(
            f"{_plural(work.edited_docs, 'edited document')} from its prior rows: one chunk "
            "plus its bytes changed"
        )
        tokens += work.edited_tokens
        chunks += work.edited_chunks
        low += work.edited_one_chunk
        high += work.edited_all
    return Estimate(
        bytes_to_read,
        _ceil(chunks),
        _ceil(tokens),
        int(low),
        _ceil(high),
        "; ".join(notes) or "nothing to read",
        rough,
        len(everything),
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
    """Measures sampled documents as the run would make them: read through ``ObjectReader``
    (its version pin, --max-document-bytes and symlink rules), then
    ``document.process_document`` with the run's isolated ``Extractor`` and ``ChunkInChild``
    (its limits and PDF engine; extraction, and chunking of a long document, in the parser
    child: a hostile document costs a timeout or a failure, never the plan). A document the
    run would fail has no chunks."""

    def measure(docs: Sequence[SampleDoc]) -> list[Measured]:
        from chunkmill import document
        from chunkmill.config import Chunking
        from chunkmill.isolation import Extractor

        config = settings.config
        within = None if settings.follow_symlinks else storage.local_roots(settings.inputs)
        read = storage.ObjectReader(billing_project=settings.billing_project, within=within)
        chunking = Chunking(config)
        out: list[Measured] = []
        extractor = Extractor(config.limits, **config.extract_options())
        in_child = document.ChunkInChild(extractor.call, config)
        try:
            for doc in docs:
                item = WorkItem(doc.doc_id, doc.uri, doc.size, version=doc.version)
                try:
                    data = read(doc.uri, doc.version, max_bytes=config.limits.max_document_bytes)
                    outcome = document.process_document(item, data, chunking, extractor, in_child)
                except Exception as e:  # the run would record it as failed: no chunks
                    _LOG.info("sample %s not measured: %s", doc.uri, e)
                    out.append(Measured(doc.size, {}))
                    continue
                chunks = {r["chunk_hash"]: r["token_count"] for r in outcome.occurrences}
                out.append(Measured(len(data), chunks))
        finally:
            extractor.close()
        return out

    return measure


_PROVEN_COLUMNS = list(dict.fromkeys([*schema.OCCURRENCE_FIELDS, *_PRIOR_COLUMNS]))


def proven_prior(paths: Sequence[str], columns: Sequence[str]) -> Iterator[pa.Table]:
    """The prior manifest files' rows, part by part, read by the run's own
    ``transforms.prior.read_part`` (page checksums verified, ids and hashes validated) with
    every column the run reads of them, so a prior the run refuses is refused here with the
    same line (``RunRefused``); ``columns`` of them."""
    for path in paths:
        for part in prior_parts.list_parts(path):
            yield prior_parts.read_part(part, _PROVEN_COLUMNS).select(list(columns))


def prior_hashes(paths: Sequence[str]) -> KnownHashes:
    """Of some chunk hashes, those the prior manifest files hold (one more pass over their
    ``chunk_hash`` column)."""

    def known(hashes: set[str]) -> set[str]:
        if not hashes or not paths:
            return set()
        wanted = pa.array(sorted(hashes), pa.string())
        found: set[str] = set()
        for path in paths:
            for part in prior_parts.list_parts(path):
                column = prior_parts.read_part(part, ["chunk_hash"])["chunk_hash"]
                found.update(pc.filter(column, pc.is_in(column, value_set=wanted)).to_pylist())
        return found

    return known


def make_plan(settings: RunSettings) -> Plan:
    """Lists the inputs and reads the prior manifest (proven as the run proves it: a prior
    the run refuses is a ``UsageError`` with the run's line) and errors (if any), and a sample
    of the documents to read of a format the prior teaches no rate of; writes nothing."""
    listing = list_inputs(
        settings.inputs, settings.output, settings.billing_project, settings.listing_rules()
    )
    _LOG.info("listed %d documents", listing.num_rows)
    paths = list(settings.prior_files)  # footers and sizes proven before (pipeline.preflight)
    try:
        if not paths:
            prior = EMPTY_SUMMARY
        else:
            prior = summarise_prior(proven_prior(paths, _PRIOR_COLUMNS))
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
            prior_hashes(paths),
        )
    except RunRefused as e:
        raise UsageError(e.line) from None


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
