"""The one summariser of prior rows: a document's prior manifest rows folded into one row per
``doc_id`` (their count, each shared column's range and nulls, per-document sums), from which
the carry-over rule (``chunkmill.carryover``) judges its fate. A run's prior read
(``transforms.prior``) and ``chunkmill plan`` both build their summaries here.

Apart from the rule so that the rule, and the per-document code that calls it, import no
pyarrow: the parser child that chunks long documents stays light.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill.carryover import SHARED_COLUMNS, PriorState


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


def doc_states(parts: pa.Table) -> pa.Table:
    """One row per ``doc_id`` of ``parts`` (summaries of parts, one row per document and
    part, with ``rows`` and the ``SHARED_COLUMNS``' shared values): the document's ``rows``
    in all, and the value each shared column has in every part (null where they differ or
    any is null), as ``PriorState.of_parts`` says."""
    if pc.count_distinct(parts["doc_id"]).as_py() == parts.num_rows:
        # Each document in one part (the common case): its part's summary is its state.
        return parts.select(["doc_id", "rows", *SHARED_COLUMNS])
    g = summarise(parts, sums={"prior_rows": parts["rows"]})
    return pa.table(
        {
            "doc_id": g["doc_id"],
            "rows": g["prior_rows"],
            **{name: shared(g, name) for name in SHARED_COLUMNS},
        }
    )


def unchanged_by_listing(
    versions: pa.Array | pa.ChunkedArray,
    rows: pa.Array | pa.ChunkedArray,
    prior_versions: pa.Array | pa.ChunkedArray,
    prior_fingerprints: pa.Array | pa.ChunkedArray,
    fingerprint: str,
) -> pa.Array | pa.ChunkedArray:
    """``carryover.unchanged_by_listing`` over aligned arrays (one element per listed
    document; ``rows``, ``prior_versions`` and ``prior_fingerprints`` null where it has no
    prior rows): true where every prior row was made from this very listed version with
    this config."""
    same = pc.and_(
        pc.and_(pc.greater(rows, 0), pc.equal(prior_versions, versions)),
        pc.equal(prior_fingerprints, pa.scalar(fingerprint, pa.string())),
    )
    return pc.fill_null(same, False)
