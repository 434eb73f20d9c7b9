"""Shared test helpers: prior manifests built by the code under test from real content."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chunkmill import document, ids, schema
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.items import PriorPart, PriorSummary, WorkItem
from chunkmill.transforms import prior

# Runs a command as an unprivileged user with every capability dropped: tests run as root,
# which reads through any permission, so a permission test needs this prefix.
AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all")

# Small limits so a few short paragraphs make several chunks.
SMALL = ChunkingConfig.create("paragraph", max_tokens=20, overlap_tokens=0)


def paragraphs(*words: str, n: int = 1) -> bytes:
    """A Markdown-ish document: one paragraph per word, each about 40 characters."""
    return "\n\n".join(f"{w} " * 8 for w in words for _ in range(n)).encode()


def make_pdf(pages: list[str]) -> bytes:
    """A real PDF with one page per string (fpdf2, core font)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def manifest_rows(uri: str, data: bytes, config: ChunkingConfig = SMALL) -> list[dict[str, Any]]:
    """The manifest rows a run would write for ``uri`` with content ``data``."""
    item = WorkItem(ids.doc_id(uri), uri, len(data))
    outcome = document.process_document(item, data, Chunking(config))
    assert outcome.status == document.PROCESSED, outcome.error
    return [{**occurrence_fields(r), "is_new": True} for r in outcome.occurrences]


def occurrence_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The columns every occurrence table shares, taken from any of their rows."""
    return {k: row[k] for k in schema.OCCURRENCE_FIELDS}


def manifest_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Manifest rows as the Arrow table a prior part would read back."""
    return pa.Table.from_pylist(rows, schema=schema.MANIFEST)


def summarise(rows: list[dict[str, Any]], per_part: int | None = None) -> tuple[PriorSummary, ...]:
    """The summaries the pipeline makes of one document's prior rows (``prior.summaries``),
    its rows split into parts of ``per_part`` rows (default: one part). Columns the rows
    lack are null."""
    names = ["doc_id", "source_version", "config_fingerprint", "content_sha256", "source_uri"]
    per_part = per_part or max(len(rows), 1)
    out: list[PriorSummary] = []
    for i in range(0, len(rows), per_part):
        part = rows[i : i + per_part]
        table = pa.table({n: pa.array([r.get(n) for r in part], pa.string()) for n in names})
        out += [s for _, s in prior.summaries(table, f"{i}:/prior/part.parquet")]
    return tuple(out)


def write_prior(
    rows: list[dict[str, Any]], directory: str, *, row_group_rows: int | None = None
) -> list[PriorPart]:
    """Writes ``rows`` as a prior manifest file in ``directory`` (row groups of
    ``row_group_rows``, so one document's rows can span parts) and returns its parts."""
    if not rows:
        return []
    path = os.path.join(directory, "part-00000.parquet")
    pq.write_table(manifest_table(rows), path, row_group_size=row_group_rows or len(rows))
    return list(prior.list_parts(path))


def table_rows(tables: list[pa.Table]) -> list[dict[str, Any]]:
    """The rows of a ChunkCorpus output collected as Arrow tables."""
    return [row for t in tables for row in t.to_pylist()]


def whole_tables(out: dict[str, Any], name: str) -> Any:
    """ChunkCorpus's table ``name`` as one PCollection of Arrow tables: its own and those of
    the files of its rows written where they were decided (``table_files``), read back as
    ``WriteTables`` would publish them."""
    import apache_beam as beam

    if "table_files" not in out:
        return out[name]
    files = (
        out["table_files"]
        | f"{name}Files" >> beam.Filter(lambda f: f[0] == name)
        | f"Read{name}Files" >> beam.Map(lambda f: pq.read_table(f[1]))
    )
    return (out[name], files) | f"Whole{name}" >> beam.Flatten()


def write_finished_run(
    output: str | os.PathLike[str],
    run_id: str,
    manifest: list[pa.Table],
    *,
    latest: bool = True,
    errors: pa.Table | None = None,
) -> str:
    """A finished run written by hand, as a reader expects one: each of ``manifest`` as one
    manifest file (``part-0000i-of-0000n.parquet``), ``errors`` (default: none) as its errors
    file, one empty file for each other table, and a ``_SUCCESS`` listing every file with its
    rows and bytes; ``LATEST`` names the run unless ``latest`` is False. Returns the run
    folder."""
    import json

    base = os.path.join(output, "runs", run_id)
    tables: dict[str, list[dict[str, Any]]] = {}
    for name, table_schema in schema.TABLES.items():
        parts = manifest if name == "manifest" else [table_schema.empty_table()]
        if name == "errors" and errors is not None:
            parts = [errors]
        os.makedirs(os.path.join(base, name))
        tables[name] = []
        for i, table in enumerate(parts):
            rel = f"{name}/part-{i:05d}-of-{len(parts):05d}.parquet"
            pq.write_table(
                table, os.path.join(base, rel), compression="none", write_page_checksum=True
            )
            size = os.path.getsize(os.path.join(base, rel))
            tables[name].append({"path": rel, "rows": table.num_rows, "bytes": size})
    report = {"run_id": run_id, "started_at": "2026-11-20T01:00:00Z", "counts": {}}
    with open(os.path.join(base, "_SUCCESS"), "w") as f:
        json.dump({**report, "tables": tables}, f)
    if latest:
        with open(os.path.join(output, "LATEST"), "w") as f:
            f.write(run_id + "\n")
    return base
