"""What ``chunkmill plan`` estimates: the tokens and chunks the run would embed, priced by
rates per format learnt from the prior manifest, by a sample of documents read as the run
reads them, or by default rates (the "chunkmill plan" section of docs/design.md)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill.carryover import PriorState
from chunkmill.config import ChunkingConfig
from chunkmill.extract import format_by_name
from chunkmill.items import SourceVersion, WorkItem
from chunkmill.pipeline.options import RunSettings
from chunkmill.transforms import prior as prior_parts
from chunkmill.transforms import storage

_LOG = logging.getLogger(__name__)


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


@dataclass
class Work:
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


def estimate(
    bytes_to_read: int,
    work: Work,
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
            f"{fmt} from a sample of {len(sample)} of its {plural(docs, 'document')} "
            "to read, read and chunked for this estimate"
            + (f" ({failed} failed, priced as 0)" if failed else "")
        )
    for fmt, rate in rates.items():
        if rate.documents:
            notes.append(f"{fmt} from {plural(rate.documents, 'prior document')}")
        t = work.by_rate[fmt] * rate.tokens_per_byte
        tokens += t
        chunks += work.by_rate[fmt] * rate.chunks_per_byte
        low, high = low + t * rate.low, high + t * rate.high
    rough = bool(defaults)
    if defaults:
        notes.append(f"{', '.join(defaults)} rough (no prior of the format: default rates)")
    if work.edited_docs:
        notes.append(
            f"{plural(work.edited_docs, 'edited document')} from its prior rows: one chunk "
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


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
