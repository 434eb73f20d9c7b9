"""The Python API: chunkmill's extraction and chunking on one text or file, for notebooks and
other programs, through the very code a pipeline run uses for each document."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from chunkmill import ids
from chunkmill.config import AUTO, Chunking, ChunkingConfig
from chunkmill.document import PROCESSED, chunk_extracted
from chunkmill.extract import Extracted, ExtractionError, extract, format_by_name
from chunkmill.items import WorkItem

__all__ = [
    "Chunk",
    "Extracted",
    "ExtractionError",
    "RunNotFound",
    "chunk_text",
    "extract_text",
    "read_chunks",
    "read_state",
]


@dataclass(frozen=True)
class Chunk:
    """One chunk, as a row of a run's ``chunks/`` table describes it.

    ``text`` is ``source[start:end]`` of the text chunked; ``token_count`` counts the tokens
    of what the embedder receives (``text_with_context`` when a context window is configured,
    else ``text``), and ``chunk_hash`` is the SHA-256 of exactly that. ``section_path`` is
    the heading path (outermost first) where the strategy or a PDF's bookmarks know one;
    pages are 1-based and only known for PDFs.
    """

    text: str
    start: int
    end: int
    token_count: int
    chunk_hash: str
    section_path: tuple[str, ...] | None = None
    page_start: int | None = None
    page_end: int | None = None
    text_with_context: str | None = None


def extract_text(
    data: bytes,
    name: str,
    *,
    pdf_engine: str = "pypdf",
    max_pdf_pages: int | None = None,
    ocr: str = "auto",
    pdf_password: str | None = None,
) -> Extracted:
    """The text of a document's bytes, as a run extracts it (format by ``name``'s extension
    and content, decoding, clean-up; ``ocr`` and ``pdf_password`` as ``--ocr`` and the
    variable of ``--pdf-password-env``); raises ``ExtractionError`` (with a ``reason``) for
    a document a run would record in ``errors/``. Runs in this process, without the time and
    memory budgets a run puts around parsers."""
    return extract(
        name,
        data,
        pdf_engine=pdf_engine,
        max_pdf_pages=max_pdf_pages,
        ocr=ocr,
        pdf_password=pdf_password,
    )


class RunNotFound(LookupError):
    """``read_chunks`` found no finished run of that id (or none at all) in the output."""


def read_chunks(
    output: str, run: str | None = None, *, state: bool = True
) -> Iterator[dict[str, Any]]:
    """The chunks a run wrote under ``output`` (a local folder, ``gs://``, ``s3://``), as
    dicts with the columns of the ``chunks/`` table (``text`` and ``text_with_context``
    among them). ``run``: a run id, default the run ``LATEST`` names.

    ``state=True``: the whole current state after that run (``read_state``), every
    occurrence of its manifest (sorted by ``source_uri``, then ``chunk_index``) with the
    text of its hash from the text store. ``state=False``: only the run's own ``chunks/``
    rows, the hashes new in it (what to embed), in file order. Raises ``RunNotFound``.
    """
    if state:
        yield from read_state(output, run).to_pylist()
        return
    from chunkmill.pipeline.options import UsageError
    from chunkmill.pipeline.runs import list_runs, state_files
    from chunkmill.schema import CHUNKS
    from chunkmill.transforms import parquet_io, runstate

    try:
        files = state_files(output, run)
    except (UsageError, runstate.BadLatest) as e:
        raise RunNotFound(str(e)) from None
    info = next(r for r in list_runs(output) if r.run_id == files.run_id)
    base = runstate.run_dir(output, files.run_id)
    own = [f"{base}/{f['path']}" for f in (info.tables or {}).get("chunks", [])]
    for batch in parquet_io.read_parquet_batches(own, CHUNKS.names):
        yield from batch.to_pylist()


def read_state(output: str, run: str | None = None) -> pa.Table:
    """The whole current state after ``run`` (default: LATEST's) as one Arrow table with the
    columns of the ``chunks/`` table: every occurrence of its manifest, sorted by
    ``source_uri`` then ``chunk_index``, with the text of its hash from the files its
    ``_TEXT`` names (docs/text-store.md; for a run without one, from the ``chunks/`` of the
    runs that first chunked each hash). Held in memory: for a notebook or a corpus of modest
    size (``chunkmill export`` writes a state of any size). Raises ``RunNotFound``."""
    from chunkmill.pipeline.options import UsageError
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import parquet_io, runstate

    for attempt in range(2):
        try:
            files = state_files(output, run)
        except (UsageError, runstate.BadLatest) as e:
            raise RunNotFound(str(e)) from None
        try:
            return _join_text(files.run_id, files.manifest, files.chunks)
        except parquet_io.UnreadableTable:
            # runs gc compacted the store under the reader: its index names new files.
            if not files.from_store or attempt:
                raise
    raise AssertionError("unreachable")


def _join_text(run_id: str, manifest: list[str], texts: list[str]) -> pa.Table:
    import pyarrow.compute as pc

    from chunkmill.schema import CHUNKS, OCCURRENCE_FIELDS
    from chunkmill.transforms import parquet_io

    occurrences = pa.concat_tables(
        [
            b.select(list(OCCURRENCE_FIELDS))
            for b in parquet_io.read_parquet_batches(manifest, OCCURRENCE_FIELDS)
        ]
        or [CHUNKS.empty_table().select(list(OCCURRENCE_FIELDS))],
        promote_options="permissive",
    ).cast(pa.schema([CHUNKS.field(n) for n in OCCURRENCE_FIELDS]))
    needed = pc.unique(occurrences["chunk_hash"])
    columns = ["chunk_hash", "text", "text_with_context"]
    found = [
        b.filter(pc.is_in(b["chunk_hash"], value_set=needed))
        for b in parquet_io.read_parquet_batches(texts, columns)
    ]
    text = pa.concat_tables(
        found or [CHUNKS.empty_table().select(columns)], promote_options="permissive"
    )
    at = pc.index_in(occurrences["chunk_hash"], value_set=text["chunk_hash"])
    if pc.any(pc.is_null(at)).as_py():
        missing = pc.sum(pc.is_null(at)).as_py()
        raise RunNotFound(
            f"{missing} chunks of run {run_id} have no text in the text store or any run's "
            "chunks/ (a file was deleted by hand?)"
        )
    joined = {name: occurrences[name] for name in OCCURRENCE_FIELDS}
    joined["text"] = pc.take(text["text"], at)
    joined["text_with_context"] = pc.take(text["text_with_context"], at)
    table = pa.table(joined, schema=CHUNKS)
    return table.sort_by([("source_uri", "ascending"), ("chunk_index", "ascending")])


def chunk_text(
    text: str | Extracted,
    strategy: str = AUTO,
    *,
    name: str = "text.md",
    tokenizer: str = "chars4",
    **parameters: Any,
) -> list[Chunk]:
    """The chunks a run makes of ``text`` with ``strategy`` and its ``parameters``: those of
    ``chunkmill run --strategy``, and its chunking flags with underscores, e.g.
    ``max_tokens=400`` for ``--max-tokens 400``, ``context_prev_chars``, ``max_embed_tokens``.

    ``text`` is a string, chunked as given: ``text[c.start:c.end] == c.text`` for every
    chunk ``c``, whatever it holds ("\\r\\n", a byte-order mark, NULs, any character but a
    lone surrogate, which has no UTF-8 form to hash: ``ValueError`` naming its offset). It is
    not extracted: ``name`` only decides its format, as a file name does in a run (``.md``
    is Markdown; ``auto`` picks the strategy by format), and markup stays as it is. Or
    ``text`` is what ``extract_text`` returned, for the chunks a run makes of a file (pages
    and bookmarks are then kept, and offsets are into its ``text``). Raises ``ValueError``
    for an unknown strategy or a bad parameter, naming it."""
    if isinstance(text, Extracted):
        doc = text
    else:
        doc = Extracted(text, format=format_by_name(name) or "text")
    try:
        sha = ids.sha256_hex(doc.text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ValueError(
            f"text holds a lone surrogate (U+{ord(doc.text[e.start]):04X}) at offset "
            f"{e.start}: chunk hashes are of UTF-8 text, which cannot hold one"
        ) from None
    chunking = Chunking(ChunkingConfig.create(strategy, tokenizer=tokenizer, **parameters))
    item = WorkItem(doc_id=ids.doc_id(name), uri=name, size_bytes=len(doc.text))
    outcome = chunk_extracted(item, doc, sha, chunking)
    if outcome.status != PROCESSED:
        error = outcome.error or {}
        raise RuntimeError(f"{error.get('reason')}: {error.get('message')}")
    return [
        Chunk(
            text=row["text"],
            start=row["char_start"],
            end=row["char_end"],
            token_count=row["token_count"],
            chunk_hash=row["chunk_hash"],
            section_path=None if row["section_path"] is None else tuple(row["section_path"]),
            page_start=row["page_start"],
            page_end=row["page_end"],
            text_with_context=row["text_with_context"],
        )
        for row in outcome.occurrences
    ]
