"""``chunkmill plan``: what tonight's run would do, before it runs.

It lists the inputs exactly as ``run`` does, sorts each listed document into unchanged,
failed before, new or changed with the rules ``run`` uses (``chunkmill.document``), counts
the prior documents no longer listed as removed, and estimates the tokens to embed
(``chunkmill.pipeline.estimate``). It writes nothing, proves the prior manifest as ``run``
does, and reads no document but a sample of a format the prior teaches no rate of. How the
estimate is made and what it holds in memory: the "chunkmill plan" section of
docs/design.md. The command itself: ``chunkmill.pipeline.commands.plan``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import carryover, ids, prior_summary, schema
from chunkmill.config import ChunkingConfig
from chunkmill.document import attempt_key
from chunkmill.items import ListingError, PriorError, SourceFile
from chunkmill.pipeline.estimate import (
    SAMPLE_BYTES,
    Estimate,
    KnownHashes,
    Measure,
    PriorDoc,
    Work,
    estimate,
    measure_sample,
    plural,
    prior_hashes,
)
from chunkmill.pipeline.options import RunSettings, UsageError
from chunkmill.redact import redact_uri
from chunkmill.refusal import RunRefused
from chunkmill.transforms import prior as prior_parts
from chunkmill.transforms import sources, storage

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
    same code as ``sources.ListFiles`` (``storage.plan`` then ``storage.list_shard``, so
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
    work = Work(sample_max_bytes=min(SAMPLE_BYTES, config.limits.max_document_bytes))
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
        estimate=estimate(bytes_to_read, work, config, measure, known),
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


def _keep_first(kept: list[str], uri: str) -> None:
    """Keeps the SHOW_DOCUMENTS smallest URIs seen, sorted (the terminal names a few)."""
    if len(kept) < SHOW_DOCUMENTS or uri < kept[-1]:
        kept.append(uri)
        kept.sort()
        del kept[SHOW_DOCUMENTS:]


def read_failures(paths: Sequence[str]) -> pa.Table:
    """The prior run's errors files as a table of ``_FAILURES``: one row per failed document,
    read like the run reads them (``chunkmill.transforms.sources.prior_errors``)."""
    rows = [
        (doc, e.source_version, e.attempt_key, e.reason)
        for path in sorted(paths)
        for doc, e in sources.prior_errors(path)
    ]
    return pa.table([list(col) for col in zip(*rows, strict=True)] or [[]] * 4, schema=_FAILURES)


_PROVEN_COLUMNS = list(dict.fromkeys([*schema.OCCURRENCE_FIELDS, *_PRIOR_COLUMNS]))


def proven_prior(paths: Sequence[str], columns: Sequence[str]) -> Iterator[pa.Table]:
    """The prior manifest files' rows, part by part, read by the run's own
    ``transforms.prior.read_part`` (page checksums verified, ids and hashes validated) with
    every column the run reads of them, so a prior the run refuses is refused here with the
    same line (``RunRefused``); ``columns`` of them."""
    for path in paths:
        for part in prior_parts.list_parts(path):
            yield prior_parts.read_part(part, _PROVEN_COLUMNS).select(list(columns))


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
                plural(prior.num_rows, "document"),
                plural(len(paths), "file"),
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


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def removal_warning(removed: int, prior_docs: int, settings: RunSettings) -> str | None:
    """The warning line when ``run`` would refuse to publish these removals
    (``--max-removed-ratio``, ``chunkmill.transforms.publish.check_removed_ratio``), else None."""
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
        f"to read    {plural(c[NEW] + c[CHANGED], 'document')}, {human_bytes(e.bytes_to_read)} "
        "(new and changed; the rest are not read)",
        f"estimate   ~{_about(e.tokens)} tokens in ~{_about(e.chunks)} chunks to embed ({sure})"
        if e.bytes_to_read
        else "estimate   0 tokens to embed (nothing to read)",
    ]
    if e.bytes_to_read:
        lines.append(f"           rates: {e.basis}")
    if c[KNOWN_FAILED]:
        lines.append(
            f"not read   {plural(c[KNOWN_FAILED], 'document')} failed before and did not "
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
            f"{plural(e.documents_read, 'document')} read for the estimate; nothing was written"
        )
    else:
        lines.append("no document was read; nothing was written")
    return "\n".join(lines)
