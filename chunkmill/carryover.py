"""The carry-over rule: what becomes of a listed document before it is read, judged on one
summary of its prior rows. A run (``transforms.core``, ``transforms.prior``) and
``chunkmill plan`` both call these functions, so the plan predicts the run by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill.items import PriorError, PriorSummary

# A listed document's fate before it is read, in the order the rule tries them.
UNCHANGED = "unchanged"  # every prior row made from this listed version with this config
KNOWN_FAILED = "failed before"  # failed at this version under this attempt key: not retried
NEW = "new"  # no prior row
CHANGED = "changed"  # to read (a touched but identical file is then found unchanged)

# Failures that say nothing about the document's bytes (the store or the network failed, the
# object moved under the read, or a symlink's target or the file's type changed, which its
# listed version need not show): always tried again.
TRANSIENT_REASONS = frozenset(
    {
        "read_failed",
        "vanished",
        "changed",
        "list_failed",
        "link_target_missing",
        "not_regular_file",
        "symlink_outside_input",
    }
)

# The columns of a document's prior rows the rule reads: their shared value, or none.
SHARED_COLUMNS = ("source_version", "config_fingerprint", "content_sha256", "source_uri")


@dataclass(frozen=True)
class PriorState:
    """A document's prior rows, as the rule sees them: how many, and the listed version,
    config fingerprint and content hash every one of them has (``None`` where they differ or
    any is null)."""

    rows: int
    version: str | None
    fingerprint: str | None
    content_sha256: str | None = None

    @classmethod
    def of_parts(cls, summaries: Sequence[PriorSummary]) -> PriorState | None:
        """The state of a document from the summaries of the parts it has rows in."""
        if not summaries:
            return None

        def shared(values: Iterable[str | None]) -> str | None:
            distinct = set(values)
            return distinct.pop() if len(distinct) == 1 else None

        return cls(
            rows=sum(s.rows for s in summaries),
            version=shared(s.source_version for s in summaries),
            fingerprint=shared(s.config_fingerprint for s in summaries),
            content_sha256=shared(s.content_sha256 for s in summaries),
        )


def unchanged_by_listing(version: str | None, prior: PriorState | None, fingerprint: str) -> bool:
    """Every prior row was made from this very listed ``version`` with this config, so the
    document need not even be read. A store that reports no version never qualifies."""
    return (
        version is not None
        and prior is not None
        and prior.rows > 0
        and prior.version == version
        and prior.fingerprint == fingerprint
    )


def unchanged_by_content(content_sha256: str, prior: PriorState | None, fingerprint: str) -> bool:
    """Every prior row was made from these very bytes with this config (decided once read)."""
    return (
        prior is not None
        and prior.rows > 0
        and prior.content_sha256 == content_sha256
        and prior.fingerprint == fingerprint
    )


def is_known_failure(prior_error: PriorError | None, version: str | None, key: str) -> bool:
    """The prior run's failure of a document will recur: it failed at this very listed
    ``version`` under this very attempt ``key``, for a reason that is not transient. A prior
    failure without a version (an older run, a store that reports none) is never trusted."""
    return (
        prior_error is not None
        and prior_error.reason not in TRANSIENT_REASONS
        and version is not None
        and prior_error.source_version == version
        and prior_error.attempt_key == key
    )


def before_reading(
    version: str | None,
    prior: PriorState | None,
    fingerprint: str,
    prior_error: PriorError | None = None,
    attempt_key: str = "",
) -> str:
    """The fate of a listed document before a byte of it is read: ``UNCHANGED`` (carried
    over unread), ``KNOWN_FAILED`` (its prior failure repeated unread), else ``NEW`` or
    ``CHANGED`` (read)."""
    if unchanged_by_listing(version, prior, fingerprint):
        return UNCHANGED
    if is_known_failure(prior_error, version, attempt_key):
        return KNOWN_FAILED
    if prior is None or prior.rows == 0:
        return NEW
    return CHANGED


# -- the one summariser of prior rows -----------------------------------------------------


def summarise(
    table: pa.Table,
    *,
    sums: Mapping[str, pa.Array | pa.ChunkedArray] | None = None,
    firsts: Sequence[str] = (),
) -> pa.Table:
    """One row per ``doc_id`` of ``table`` (manifest rows with ``doc_id`` and the
    ``SHARED_COLUMNS``): ``rows``, each shared column's ``_min``, ``_max`` and ``_nulls``
    (read with ``shared``), the per-document total of each of ``sums`` (arrays aligned with
    ``table``) and the smallest value of each column named in ``firsts``. Summaries of
    several tables combine with ``merge``."""
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "doc_id": table["doc_id"],
        "rows": pa.array([1] * table.num_rows, pa.int64()),
    }
    aggregations = [("rows", "sum")]
    for name in SHARED_COLUMNS:
        columns[f"{name}_min"] = columns[f"{name}_max"] = table[name]
        columns[f"{name}_nulls"] = pc.cast(pc.is_null(table[name]), pa.int64())
        aggregations += [(f"{name}_min", "min"), (f"{name}_max", "max"), (f"{name}_nulls", "sum")]
    for name, values in (sums or {}).items():
        columns[name] = pc.cast(values, pa.int64())
        aggregations.append((name, "sum"))
    for name in firsts:
        columns[name] = table[name]
        aggregations.append((name, "min"))
    return _aggregate(pa.table(columns), aggregations)


def merge(summaries: Sequence[pa.Table]) -> pa.Table:
    """Summaries of several tables (``summarise``) as one: a document's rows may be in any
    number of them."""
    first = summaries[0]
    aggregations = [
        (name, "min" if name.endswith("_min") else "max" if name.endswith("_max") else "sum")
        for name in first.column_names
        if name != "doc_id"
    ]
    # Columns kept by ``firsts`` take the smallest value too.
    aggregations = [
        (n, "min" if pa.types.is_string(first.schema.field(n).type) and a == "sum" else a)
        for n, a in aggregations
    ]
    return _aggregate(pa.concat_tables(summaries), aggregations)


def _aggregate(table: pa.Table, aggregations: list[tuple[str, str]]) -> pa.Table:
    grouped = table.group_by("doc_id").aggregate(aggregations)
    # By name: the column order of group_by's result differs between pyarrow versions.
    return pa.table(
        {"doc_id": grouped["doc_id"], **{n: grouped[f"{n}_{a}"] for n, a in aggregations}}
    )


def shared(summary: pa.Table, name: str) -> pa.ChunkedArray:
    """Per document of ``summary``: the value every row has in column ``name``, or null if
    they differ or any is null."""
    lo, hi, nulls = summary[f"{name}_min"], summary[f"{name}_max"], summary[f"{name}_nulls"]
    same = pc.fill_null(pc.and_(pc.equal(lo, hi), pc.equal(nulls, 0)), False)
    return pc.if_else(same, lo, pa.scalar(None, pa.string()))


def states(summary: pa.Table) -> list[PriorState]:
    """A ``PriorState`` per document of ``summary``, in its row order."""
    return [
        PriorState(rows, version, fingerprint, sha)
        for rows, version, fingerprint, sha in zip(
            summary["rows"].to_pylist(),
            shared(summary, "source_version").to_pylist(),
            shared(summary, "config_fingerprint").to_pylist(),
            shared(summary, "content_sha256").to_pylist(),
            strict=True,
        )
    ]
