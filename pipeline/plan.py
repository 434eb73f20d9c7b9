"""``chunkmill plan``: what tonight's run would do, before it runs.

It lists the inputs exactly as ``run`` does (the same patterns, the output prefix left out, an
object matched twice counted once), compares the listing with the prior manifest from listing
metadata alone, and estimates what would go to the embedder. It reads no document and writes
nothing.

A listed document is

* **new** when the prior manifest has no row for its ``doc_id`` (this includes a document that
  failed last time: a failure keeps no rows unless it had some before);
* **unchanged** when every prior row of it carries the listing's ``source_version`` (the
  store's generation or ETag, else size and modification time) and the current config
  fingerprint: ``run`` carries it over unread (the rule of
  ``transforms.document.is_unchanged_by_listing``);
* **changed** otherwise: ``run`` reads it (a file touched without an edit is read, found
  identical by SHA-256 and carried over, so "changed" is what will be *read*).

A prior document no longer listed is **removed**. So ``new + changed`` is exactly the number of
documents ``run`` reads (its ``docs_read``).

The estimate of chunks and tokens to embed counts every chunk of every new and changed
document, so it is an upper bound: chunks whose text is unchanged keep their hash and are not
embedded again. It scales the bytes to read by the prior manifest's chunks and tokens per byte
(over the prior documents whose size the manifest records in ``source_version``), or, with no
usable prior, by the tokenizer's bytes per token and a chunk half as long as the configured
limit.

Memory: the listing (one row per listed object: URI, size, version) and a per-document summary
of the prior manifest (one row per prior document) are held as Arrow tables; the manifest
itself is read one record batch at a time with only the columns needed, so a manifest of
hundreds of millions of rows costs one row per document, not per chunk.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.options import RunSettings
from transforms import ids, storage
from transforms import io as tio
from transforms.config import ChunkingConfig
from transforms.redact import redact_uri
from transforms.types import ListingError, SourceFile

_LOG = logging.getLogger(__name__)

# Per-document partial summaries are re-aggregated once they hold this many rows.
_COMPACT_ROWS = 1_000_000
# Documents named per category in the terminal; the rest are counted.
SHOW_DOCUMENTS = 10

NEW, CHANGED, UNCHANGED, REMOVED = "new", "changed", "unchanged", "removed"
CATEGORIES = (NEW, CHANGED, UNCHANGED, REMOVED)

# Bytes per token when there is no prior manifest to learn from. chars4 is ADR-0006's
# estimate of four characters a token (a byte a character for ASCII text); an English word
# and its space are about six bytes; WordPiece/BPE tokenizers of English prose average about
# four bytes a token.
DEFAULT_BYTES_PER_TOKEN = {"chars4": 4.0, "whitespace": 6.0}
FALLBACK_BYTES_PER_TOKEN = 4.0
# With no prior, a chunk is taken to hold this fraction of its strategy's size limit: packing
# strategies fill most of it, but every document's last chunk and every short section less.
CHUNK_FILL = 0.5
# The limit assumed for a strategy whose parameters name none (paragraph-window makes one
# chunk per paragraph), in tokens.
DEFAULT_CHUNK_TOKENS = 512

# The object size in a source_version: "size=N;mtime=T" (local disk, Beam's stores) or
# "etag=E;size=N" (S3); a GCS "gen=G" records none.
_SIZE = re.compile(r"(?:^|;)size=(\d+)(?:;|$)")

# ---------------------------------------------------------------------------------------------
# Pure helpers


@dataclass(frozen=True)
class PriorDoc:
    """What the plan needs of one document's rows in the prior manifest."""

    rows: int
    # Its rows' source_version values (None for a null one); of several non-null values only
    # the smallest and largest are kept, which is enough to tell "all the same".
    versions: frozenset[str | None]
    current_config_rows: int  # rows made with the current config fingerprint
    tokens: int


def classify(version: str | None, prior: PriorDoc | None) -> str:
    """The fate of a listed document with listing version ``version`` (None when the store
    reported none): ``new``, ``unchanged`` or ``changed``; the same rule as
    ``transforms.document.is_unchanged_by_listing``."""
    if prior is None or prior.rows == 0:
        return NEW
    if (
        version is not None
        and prior.versions == {version}
        and prior.current_config_rows == prior.rows
    ):
        return UNCHANGED
    return CHANGED


def size_of_version(version: str | None) -> int | None:
    """The object size recorded in a ``source_version`` (``size=N;mtime=T`` or
    ``etag=E;size=N``), or None (a GCS ``gen=G``)."""
    m = _SIZE.search(version or "")
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Rates:
    """Chunks and tokens per byte of document, and where the figures come from."""

    chunks_per_byte: float
    tokens_per_byte: float
    basis: str  # one line for a person


def rates_from_prior(chunks: int, tokens: int, size_bytes: int, documents: int) -> Rates | None:
    """Rates learnt from prior documents of known size; None when there are none."""
    if size_bytes <= 0 or documents <= 0:
        return None
    return Rates(
        chunks / size_bytes,
        tokens / size_bytes,
        f"the prior manifest's {tokens / size_bytes:.3g} tokens and "
        f"{chunks / size_bytes * 1024:.3g} chunks per KB over {_plural(documents, 'document')}",
    )


def default_rates(config: ChunkingConfig) -> Rates:
    """Rates from the config alone: the tokenizer's bytes per token, and a chunk filling
    ``CHUNK_FILL`` of the smallest size limit the config names (characters count as bytes and
    become tokens at the same bytes per token)."""
    bytes_per_token = DEFAULT_BYTES_PER_TOKEN.get(config.tokenizer, FALLBACK_BYTES_PER_TOKEN)
    limits = [
        _token_limit(params, bytes_per_token) for params in _strategy_params(config.description)
    ]
    limit = min((x for x in limits if x), default=DEFAULT_CHUNK_TOKENS)
    tokens_per_byte = 1 / bytes_per_token
    return Rates(
        tokens_per_byte / (limit * CHUNK_FILL),
        tokens_per_byte,
        f"no prior manifest to learn from: {bytes_per_token:g} bytes per token "
        f"({config.tokenizer}) and chunks {CHUNK_FILL:.0%} full of a {limit:g}-token limit",
    )


def _strategy_params(description: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "params" in description:
        yield description["params"]
    for value in description.values():
        if isinstance(value, dict) and "params" in value:
            yield value["params"]


def _token_limit(params: dict[str, Any], bytes_per_token: float) -> float | None:
    if params.get("max_tokens"):
        return float(params["max_tokens"])
    if params.get("chunk_size"):
        return params["chunk_size"] / bytes_per_token
    return None


@dataclass(frozen=True)
class Estimate:
    bytes_to_read: int
    chunks: int
    tokens: int
    rates: Rates


def estimate(bytes_to_read: int, rates: Rates) -> Estimate:
    """Chunks and tokens of ``bytes_to_read`` bytes of new and changed documents (rounded
    up: a document with any byte makes at least part of a chunk)."""
    return Estimate(
        bytes_to_read,
        _ceil(bytes_to_read * rates.chunks_per_byte),
        _ceil(bytes_to_read * rates.tokens_per_byte),
        rates,
    )


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
    same code as ``transforms.io.ListFiles`` (``storage.plan`` then ``storage.list_shard``, so
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


_PRIOR_COLUMNS = ["doc_id", "source_uri", "source_version", "config_fingerprint", "token_count"]
_SUMMARY = pa.schema(
    [
        ("doc_id", pa.string()),
        ("prior_uri", pa.string()),
        ("rows", pa.int64()),
        ("current_config_rows", pa.int64()),
        ("tokens", pa.int64()),
        ("null_versions", pa.int64()),
        ("min_version", pa.string()),
        ("max_version", pa.string()),
    ]
)


def summarise_prior(batches: Iterable[pa.Table], fingerprint: str) -> pa.Table:
    """One row per prior document (schema ``_SUMMARY``) from manifest batches with the
    columns ``_PRIOR_COLUMNS``; a document's rows may be spread over any number of batches."""
    parts: list[pa.Table] = []
    part_rows, compact_at = 0, _COMPACT_ROWS
    for t in batches:
        per_batch = pa.table(
            {
                "doc_id": t["doc_id"],
                "prior_uri": t["source_uri"],
                "rows": pa.array([1] * t.num_rows, pa.int64()),
                "current_config_rows": pc.cast(
                    pc.equal(t["config_fingerprint"], fingerprint), pa.int64()
                ),
                "tokens": pc.cast(t["token_count"], pa.int64()),
                "null_versions": pc.cast(pc.is_null(t["source_version"]), pa.int64()),
                "min_version": t["source_version"],
                "max_version": t["source_version"],
            },
            schema=_SUMMARY,
        )
        parts.append(_aggregate(per_batch))
        part_rows += parts[-1].num_rows
        if part_rows >= compact_at:
            parts = [_aggregate(pa.concat_tables(parts))]
            part_rows = parts[0].num_rows
            compact_at = max(_COMPACT_ROWS, 2 * part_rows)
    if not parts:
        return _SUMMARY.empty_table()
    return _aggregate(pa.concat_tables(parts))


def _aggregate(t: pa.Table) -> pa.Table:
    g = t.group_by("doc_id").aggregate(
        [
            ("prior_uri", "min"),
            ("rows", "sum"),
            ("current_config_rows", "sum"),
            ("tokens", "sum"),
            ("null_versions", "sum"),
            ("min_version", "min"),
            ("max_version", "max"),
        ]
    )
    # Selected by name: the column order of group_by's result differs between pyarrow versions.
    return pa.table(
        [
            g["doc_id"],
            g["prior_uri_min"],
            g["rows_sum"],
            g["current_config_rows_sum"],
            g["tokens_sum"],
            g["null_versions_sum"],
            g["min_version_min"],
            g["max_version_max"],
        ],
        schema=_SUMMARY,
    )


def _prior_doc(row: dict[str, Any]) -> PriorDoc | None:
    if row["rows"] is None:
        return None
    versions: set[str | None] = {row["min_version"], row["max_version"]} - {None}
    if row["null_versions"]:
        versions.add(None)
    return PriorDoc(row["rows"], frozenset(versions), row["current_config_rows"], row["tokens"])


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass
class Plan:
    counts: dict[str, int]  # category -> documents
    examples: dict[str, list[str]]  # category -> up to SHOW_DOCUMENTS URIs, sorted
    estimate: Estimate
    listed: int = 0


def compare(listing: pa.Table, prior: pa.Table, config: ChunkingConfig) -> Plan:
    """Classify every listed and every prior document and estimate the work (pure: tables in,
    plan out). ``listing`` has the columns of ``list_inputs``, ``prior`` those of
    ``summarise_prior`` (which counted the rows made with the current config fingerprint);
    ``config`` gives the default rates when the prior teaches none."""
    joined = listing.join(prior, "doc_id", join_type="full outer")
    counts = dict.fromkeys(CATEGORIES, 0)
    uris: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    bytes_to_read = 0
    basis_chunks = basis_tokens = basis_bytes = basis_docs = 0
    for batch in joined.to_batches():
        for row in batch.to_pylist():
            prior_doc = _prior_doc(row)
            if row["uri"] is None:
                category, uri = REMOVED, row["prior_uri"]
            else:
                category, uri = classify(row["version"], prior_doc), row["uri"]
                if category != UNCHANGED:
                    bytes_to_read += row["size"]
            counts[category] += 1
            _keep_first(uris[category], uri)
            if prior_doc is not None and len(prior_doc.versions) == 1:
                size = size_of_version(next(iter(prior_doc.versions)))
                if size:
                    basis_chunks += prior_doc.rows
                    basis_tokens += prior_doc.tokens
                    basis_bytes += size
                    basis_docs += 1
    rates = rates_from_prior(basis_chunks, basis_tokens, basis_bytes, basis_docs)
    return Plan(
        counts=counts,
        examples=uris,
        estimate=estimate(bytes_to_read, rates or default_rates(config)),
        listed=listing.num_rows,
    )


def _keep_first(kept: list[str], uri: str) -> None:
    """Keeps the SHOW_DOCUMENTS smallest URIs seen, sorted (the terminal names a few)."""
    if len(kept) < SHOW_DOCUMENTS or uri < kept[-1]:
        kept.append(uri)
        kept.sort()
        del kept[SHOW_DOCUMENTS:]


def make_plan(settings: RunSettings) -> Plan:
    """Lists the inputs and reads the prior manifest (if any): reads no document, writes
    nothing."""
    listing = list_inputs(
        settings.inputs, settings.output, settings.billing_project, settings.listing_rules()
    )
    _LOG.info("listed %d documents", listing.num_rows)
    if not settings.prior_files:
        prior = _SUMMARY.empty_table()
    else:
        paths = list(settings.prior_files)  # proven before (pipeline.preflight)
        prior = summarise_prior(
            tio.read_parquet_batches(paths, _PRIOR_COLUMNS), settings.config.fingerprint
        )
        _LOG.info(
            "prior manifest: %s in %s",
            _plural(prior.num_rows, "document"),
            _plural(len(paths), "file"),
        )
    return compare(listing, prior, settings.config)


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
    (``--max-removed-ratio``, ``transforms.io.check_removed_ratio``), else None."""
    limit = settings.max_removed_ratio
    if limit is None or prior_docs == 0 or removed / prior_docs <= limit:
        return None
    return (
        f"warning    removes {removed} of {prior_docs} documents of the prior run "
        f"({removed / prior_docs:.1%}), more than --max-removed-ratio {limit:g}: run would "
        "fail unpublished unless given a higher --max-removed-ratio"
    )


def render(plan: Plan, settings: RunSettings) -> str:
    """The plan in a few lines for the terminal."""
    c, e = plan.counts, plan.estimate
    prior = settings.prior_run_id or settings.prior_manifest or "none"
    lines = [
        f"plan for {redact_uri(settings.output)}  (prior: {prior})",
        f"documents  listed {plan.listed}  new {c[NEW]}  changed {c[CHANGED]}  "
        f"unchanged {c[UNCHANGED]}  removed {c[REMOVED]}",
        f"to read    {_plural(c[NEW] + c[CHANGED], 'document')}, {human_bytes(e.bytes_to_read)} "
        "(new and changed; unchanged ones are carried over unread)",
        f"estimate   at most ~{e.chunks} chunks, ~{e.tokens} tokens to embed",
        f"           from {e.rates.basis}; chunks whose text is unchanged are not embedded "
        "again, so a run embeds fewer",
    ]
    for category in (NEW, CHANGED, REMOVED):
        shown = plan.examples[category]
        for uri in shown:
            lines.append(f"{category:<10} {uri}")
        if c[category] > len(shown):
            lines.append(f"{'':<10} ... and {c[category] - len(shown)} more")
    removed_ratio = removal_warning(c[REMOVED], c[CHANGED] + c[UNCHANGED] + c[REMOVED], settings)
    if removed_ratio:
        lines.append(removed_ratio)
    lines.append("no document was read; nothing was written")
    return "\n".join(lines)
