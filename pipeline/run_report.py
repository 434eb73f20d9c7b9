"""``chunkmill report``: one finished run as a self-contained HTML page beside it
(``OUTPUT/runs/RUN_ID/report.html``, drawn by ``chunkmill.pipeline.report_html``) and as a
few lines in the terminal.

Everything is read through Beam's FileSystems, so a ``gs://`` output works as for ``run``,
and the tables are read one record batch at a time with only the columns needed: a manifest
can hold hundreds of millions of rows. What is kept is small and bounded by the data's
variety, not its size (token counts per strategy, rows per format, three examples per error
reason), except the new-chunk count per document behind the top-10 list, which grows with
the number of documents that got new chunks; it is kept as Arrow tables, re-aggregated as
it grows, not as Python objects.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from chunkmill.pipeline import report as run_summary
from chunkmill.redact import redact_text, redact_uri
from chunkmill.transforms import parquet_io, runstate

REPORT_FILE = "report.html"
TOP_DOCUMENTS = 10
ERROR_EXAMPLES = 3
# A histogram wider than this is hard to read at the page's width; fewer bins hide the shape.
MAX_BINS = 20
# Partial per-document counts are re-aggregated once they hold this many rows, or twice the
# rows of the last re-aggregation if more (so the work stays linear when there are millions
# of documents): a document whose rows are spread over many batches then costs one row, not
# one per batch.
_COMPACT_ROWS = 1_000_000
# An error message is one line for a person; a longer one is cut for the page.
_MESSAGE_CHARS = 300


@dataclass
class FormatStats:
    documents: int = 0  # manifest documents: rows with chunk_index 0, one per document
    chunks: int = 0  # manifest rows (occurrences)
    new_chunks: int = 0  # manifest rows with is_new


@dataclass
class ErrorStats:
    documents: int = 0
    # (source_uri, stage, message), the first ERROR_EXAMPLES by source_uri: deterministic
    # whatever order the files were written in.
    examples: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class TopDocument:
    source_uri: str
    new_chunks: int
    new_tokens: int


@dataclass
class RunStats:
    """What the page and the terminal summary show, gathered from one run."""

    report: dict[str, Any]  # the run report, as in _SUCCESS
    # strategy -> token_count -> manifest rows with that count
    tokens: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    # strategy -> [rows, tokens] in chunks/ (what the embedder gets)
    to_embed: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    formats: dict[str, FormatStats] = field(default_factory=lambda: defaultdict(FormatStats))
    errors: dict[str, ErrorStats] = field(default_factory=lambda: defaultdict(ErrorStats))
    removed: Counter[str] = field(default_factory=Counter)  # removed_reason -> rows
    top_new: list[TopDocument] = field(default_factory=list)


@dataclass(frozen=True)
class Bin:
    start: int  # token counts in [start, end)
    end: int
    count: int


# ---------------------------------------------------------------------------------------------
# Pure helpers: quantiles and histogram bins over a {value: occurrences} mapping.


def quantile(counts: Mapping[int, int], q: float) -> int:
    """The nearest-rank ``q`` quantile (0 < q <= 1): the smallest value with at least
    ``ceil(q * n)`` of the ``n`` occurrences at or below it. Raises ``ValueError`` if empty."""
    n = sum(counts.values())
    if n == 0:
        raise ValueError("quantile of no values")
    rank = max(1, math.ceil(q * n))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    raise AssertionError("unreachable")


def _nice_width(raw: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is >= raw."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= raw:
                return step * m
        step *= 10


def histogram(counts: Mapping[int, int], max_bins: int = MAX_BINS) -> list[Bin]:
    """Equal-width bins of round width (1, 2, 5 x 10^k) covering min..max, at most
    ``max_bins`` of them, empty bins included; the bin counts sum to the occurrences."""
    present = [v for v, n in counts.items() if n]
    if not present:
        return []
    lo, hi = min(present), max(present)
    width = _nice_width(math.ceil((hi - lo + 1) / max_bins))
    start = (lo // width) * width
    nbins = (hi - start) // width + 1
    if nbins > max_bins:  # the rounded-down start can add one bin
        width = _nice_width(width + 1)
        start = (lo // width) * width
        nbins = (hi - start) // width + 1
    tally = [0] * nbins
    for value in present:
        tally[(value - start) // width] += counts[value]
    return [Bin(start + i * width, start + (i + 1) * width, n) for i, n in enumerate(tally)]


# ---------------------------------------------------------------------------------------------
# Reading a run.


# Per-document new chunks and tokens, the partials behind the top-documents list.
_PER_DOC = pa.schema(
    [("source_uri", pa.string()), ("new_chunks", pa.int64()), ("new_tokens", pa.int64())]
)


def _table_files(report: dict[str, Any], base: str, table: str) -> list[str]:
    # _SUCCESS lists the files the run wrote; a glob would also pick up stray files. Runs
    # before row counts were recorded listed bare paths.
    listed = (report.get("tables") or {}).get(table)
    if listed is not None:
        return [
            FileSystems.join(base, entry["path"] if isinstance(entry, dict) else entry)
            for entry in listed
        ]
    matches = FileSystems.match([FileSystems.join(base, table, "*.parquet")])[0].metadata_list
    return sorted(m.path for m in matches)


def _per_doc(t: pa.Table, chunks: str, tokens: str) -> pa.Table:
    # Selected by name: the column order of group_by's result differs between pyarrow versions.
    return pa.table(
        [t["source_uri"], pc.cast(t[chunks], pa.int64()), pc.cast(t[tokens], pa.int64())],
        schema=_PER_DOC,
    )


def _compact(parts: list[pa.Table]) -> pa.Table:
    """Per-document partials summed into one row per document."""
    g = (
        pa.concat_tables(parts)
        .group_by("source_uri")
        .aggregate([("new_chunks", "sum"), ("new_tokens", "sum")])
    )
    return _per_doc(g, "new_chunks_sum", "new_tokens_sum")


def _read_manifest(stats: RunStats, paths: Sequence[str]) -> None:
    columns = ["source_uri", "chunk_index", "token_count", "strategy", "doc_format", "is_new"]
    parts: list[pa.Table] = []
    part_rows, compact_at = 0, _COMPACT_ROWS
    for t in parquet_io.read_parquet_batches(paths, columns):
        by_size = t.group_by(["strategy", "token_count"]).aggregate([("token_count", "count")])
        for row in by_size.to_pylist():
            stats.tokens[row["strategy"]][row["token_count"]] += row["token_count_count"]

        flags = pa.table(
            {
                "doc_format": t["doc_format"],
                "first": pc.cast(pc.equal(t["chunk_index"], 0), pa.int64()),
                "new": pc.cast(t["is_new"], pa.int64()),
            }
        )
        by_format = flags.group_by("doc_format").aggregate(
            [("first", "sum"), ("new", "sum"), ("first", "count")]
        )
        for row in by_format.to_pylist():
            f = stats.formats[row["doc_format"]]
            f.documents += row["first_sum"]
            f.new_chunks += row["new_sum"]
            f.chunks += row["first_count"]

        new = t.filter(t["is_new"])
        if new.num_rows:
            g = new.group_by("source_uri").aggregate(
                [("token_count", "count"), ("token_count", "sum")]
            )
            parts.append(_per_doc(g, "token_count_count", "token_count_sum"))
            part_rows += g.num_rows
            if part_rows > compact_at:
                parts = [_compact(parts)]
                part_rows = parts[0].num_rows
                compact_at = max(_COMPACT_ROWS, 2 * part_rows)
    if parts:
        top = _compact(parts).sort_by([("new_chunks", "descending"), ("source_uri", "ascending")])
        stats.top_new = [
            TopDocument(redact_uri(r["source_uri"]), r["new_chunks"], r["new_tokens"])
            for r in top.slice(0, TOP_DOCUMENTS).to_pylist()
        ]


def _read_chunks(stats: RunStats, paths: Sequence[str]) -> None:
    for t in parquet_io.read_parquet_batches(paths, ["strategy", "token_count"]):
        g = t.group_by("strategy").aggregate([("token_count", "count"), ("token_count", "sum")])
        for row in g.to_pylist():
            acc = stats.to_embed[row["strategy"]]
            acc[0] += row["token_count_count"]
            acc[1] += row["token_count_sum"]


def _read_errors(stats: RunStats, paths: Sequence[str]) -> None:
    for t in parquet_io.read_parquet_batches(paths, ["source_uri", "stage", "reason", "message"]):
        for row in t.to_pylist():
            e = stats.errors[row["reason"]]
            e.documents += 1
            # Redacted again: tables written before redaction existed may quote a signed URL.
            message = " ".join(redact_text(row["message"]).split())
            if len(message) > _MESSAGE_CHARS:
                message = message[: _MESSAGE_CHARS - 1] + "…"
            e.examples.append((redact_uri(row["source_uri"]), row["stage"], message))
            e.examples = sorted(e.examples)[:ERROR_EXAMPLES]


def _read_removed(stats: RunStats, paths: Sequence[str]) -> None:
    for t in parquet_io.read_parquet_batches(paths, ["removed_reason"]):
        counts = pc.value_counts(t["removed_reason"])
        for item in counts.to_pylist():
            stats.removed[item["values"]] += item["counts"]


def read_run(output: str, run_id: str) -> RunStats:
    """Reads ``_SUCCESS`` and the four tables of a finished run."""
    base = runstate.run_dir(output, run_id)
    report = json.loads(runstate.read_text(FileSystems.join(base, runstate.SUCCESS)))
    stats = RunStats(report)
    _read_manifest(stats, _table_files(report, base, "manifest"))
    _read_chunks(stats, _table_files(report, base, "chunks"))
    _read_errors(stats, _table_files(report, base, "errors"))
    _read_removed(stats, _table_files(report, base, "removed"))
    return stats


# ---------------------------------------------------------------------------------------------
# The terminal.


def _printable(text: str) -> str:
    # A file name can hold control characters; keep them from driving the terminal.
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def terminal_summary(stats: RunStats, page: str) -> str:
    """The run's summary lines (as ``chunkmill run`` prints them), then formats, sizes,
    errors, the documents with most new chunks and where the page is."""
    lines = [run_summary.summary(stats.report, None)]
    if stats.formats:
        lines.append(
            "formats    "
            + "  ".join(
                f"{_printable(name)} {f.documents}"
                for name, f in sorted(
                    stats.formats.items(), key=lambda kv: (-kv[1].documents, kv[0])
                )
            )
        )
    for strategy in sorted(stats.tokens):
        counts = stats.tokens[strategy]
        lines.append(
            f"tokens     {_printable(strategy)}: {sum(counts.values())} chunks, median "
            f"{quantile(counts, 0.5)}, p95 {quantile(counts, 0.95)}, max {max(counts)}"
        )
    for reason, e in sorted(stats.errors.items(), key=lambda kv: (-kv[1].documents, kv[0])):
        uri, _, message = e.examples[0]
        lines.append(
            f"errors     {_printable(reason)} {e.documents}, e.g. {_printable(uri)}: "
            + _printable(message)
        )
    if stats.top_new:
        lines.append("most new chunks")
        lines += [f"  {d.new_chunks:>6}  {_printable(d.source_uri)}" for d in stats.top_new[:5]]
    lines.append(f"report     {page}")
    return "\n".join(lines)


def write_report(output: str, run_id: str) -> tuple[RunStats, str]:
    """Reads the run and writes ``OUTPUT/runs/RUN_ID/report.html`` (replacing an earlier
    one); returns the stats and the page's path."""
    from chunkmill.pipeline.report_html import render_html

    stats = read_run(output, run_id)
    page = FileSystems.join(runstate.run_dir(output, run_id), REPORT_FILE)
    runstate.write_text(page, render_html(stats))
    return stats, page
