"""Per-document work as a pure function: bytes and prior manifest rows in, rows out.

``process_document`` decides one of three fates for a listed document (docs/design.md):

* ``carried_over`` — bytes and chunking config are unchanged since the prior run: its prior
  manifest rows carry over and it is not extracted;
* ``processed`` — extracted and chunked; prior chunks its new version lacks are removed. A
  processed document may be *emptied* (``DocOutcome.emptied``): it holds no text now, so it
  has no chunk and every prior row of it is removed (``document_emptied``);
* ``failed`` — one errors/ row; its prior rows carry over (a transient failure must not delete
  embeddings downstream) and nothing is removed.

Emptied, not failed: a document whose bytes are empty (a file truncated to 0 bytes), one of a
text format (text, Markdown, reStructuredText, code, HTML, JSON, JSONL, CSV) whose text is
empty or whitespace only, and one whose text the strategy makes no chunk of. Its bytes were
read whole and say there is nothing to serve: keeping its old chunks would serve a text that
no longer exists. A PDF or DOCX in which no text is found stays a failure (``no_text``): a
scan or an image holds text a later release (OCR) may read, so its prior rows stay.

A document's prior rows are known here only by their summaries (``WorkItem.prior``); the
outcome's ``verdict`` says what becomes of them, and ``chunkmill.transforms.prior`` applies it where
the rows lie.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chunkmill import carryover, ids
from chunkmill.chunking import Span
from chunkmill.chunking.base import TokenCounter
from chunkmill.chunking.structure import heading_paths
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.extract import (
    Extracted,
    ExtractionError,
    detect_format,
    extract,
    one_line,
    uses_parser,
)
from chunkmill.items import EMPTIED, KEEP, REPLACE, PriorError, Verdict, WorkItem
from chunkmill.redact import redact_text, redact_uri
from chunkmill.versions import library_versions

PROCESSED = "processed"
CARRIED_OVER = "carried_over"
FAILED = "failed"


@dataclass
class DocOutcome:
    status: str
    # The new chunk rows, with their text, column by column: a list per column of
    # ``schema.CHUNKS``, in its order, or None when there is none. Columns, not a dict per
    # row: the rows become an Arrow table, which is built from lists of values several times
    # faster.
    chunks: dict[str, Sequence[Any]] | None = None
    error: dict[str, Any] | None = None
    # Carried over after reading: the same bytes under new listing metadata, so its kept rows
    # record this version and the next run can skip reading it.
    new_version: str | None = None
    # Processed, and found to hold no text: no chunk, every prior row removed.
    emptied: bool = False

    @property
    def occurrences(self) -> list[dict[str, Any]]:
        """The new chunk rows, a dict each (``chunks`` row by row)."""
        if not self.chunks:
            return []
        names = list(self.chunks)
        return [
            dict(zip(names, row, strict=True)) for row in zip(*self.chunks.values(), strict=True)
        ]

    def verdict(self, doc_id: str) -> Verdict:
        """What becomes of the document's prior rows: an emptied document's are all removed
        (``document_emptied``); a processed document's are replaced by its occurrences (those
        whose chunk_id is gone are removed); otherwise they are kept."""
        if self.emptied:
            return Verdict(doc_id, EMPTIED)
        if self.status == PROCESSED:
            return Verdict(
                doc_id, REPLACE, current_ids=tuple(self.chunks["chunk_id"] if self.chunks else ())
            )
        return Verdict(doc_id, KEEP, version=self.new_version)


def error_row(
    item: WorkItem,
    stage: str,
    reason: str,
    message: str,
    content_sha256: str | None = None,
    *,
    attempted: bool = True,
) -> dict[str, Any]:
    """The errors/ row of ``item``, failed at the listing version it was listed with. The URI,
    and any URI the message quotes (an exception's text often does), are redacted: a signed
    URL's signature never reaches a table. ``attempt_key`` is left null: the DoFn that tried
    the document sets it."""
    return {
        "doc_id": item.doc_id,
        "source_uri": redact_uri(item.uri),
        "stage": stage,
        "reason": reason,
        "message": one_line(redact_text(message)),
        "size_bytes": item.size_bytes,
        "content_sha256": content_sha256,
        "versions": library_versions(),
        "source_version": item.version,
        "attempt_key": None,
        "attempted": attempted,
    }


def attempt_key(config: ChunkingConfig) -> str:
    """Everything besides the document's bytes that decides whether it fails: the chunking
    config (its fingerprint holds the PDF engine, the OCR mode and the extractor's version),
    every limit, the PDF password's variable (its name and whether it is set, never its
    value: setting it tries the ``encrypted`` documents again), and the versions of chunkmill and
    its parsers, the OCR engine included (``unknown`` while it is not installed, so a
    ``no_text`` failure is tried again once it is). A failure is remembered under this key; a
    new limit (``too_large``, ``timeout`` and ``memory`` depend on them), config or release
    tries the document again. Limits are in the key for every reason, not only those three:
    changing one is rare, and retrying once then costs little."""
    return ids.fingerprint(
        {
            "config": config.fingerprint,
            "limits": dataclasses.asdict(config.limits),
            "libraries": library_versions(),
            **_password_state(config),
        }
    )


def _password_state(config: ChunkingConfig) -> dict[str, Any]:
    name = config.pdf_password_env
    if name is None:
        return {}
    return {"pdf_password_env": name, "pdf_password_set": bool(os.environ.get(name))}


def repeat_failure(item: WorkItem, error: PriorError, key: str) -> DocOutcome:
    """The prior run's failure of ``item`` repeated without reading it (``carryover``'s
    ``KNOWN_FAILED``): its errors row again, ``attempted`` false; its prior rows are kept like
    any failure's."""
    row = error_row(
        item, error.stage, error.reason, error.message, error.content_sha256, attempted=False
    )
    row["attempt_key"] = key
    return DocOutcome(FAILED, error=row)


def failed(item: WorkItem, stage: str, reason: str, message: str, sha: str | None = None):
    return DocOutcome(FAILED, error=error_row(item, stage, reason, message, sha))


def too_large(item: WorkItem, max_document_bytes: int | None) -> DocOutcome | None:
    """The ``too_large`` failure of a document whose listed size is over the limit (decided
    from the listing, before a byte is read), else ``None``."""
    if max_document_bytes is None or item.size_bytes <= max_document_bytes:
        return None
    return failed(
        item,
        "read",
        "too_large",
        f"{item.size_bytes} bytes, over the --max-document-bytes limit of {max_document_bytes}",
    )


# A document whose text is longer than this (in characters; in bytes before decoding) is
# decoded and chunked in the parser child, under the time and memory budgets of ``Limits``;
# a shorter one in the worker. Chunking costs up to ~2 KB of rows per chunk and a chunk can
# be as short as a 4-byte heading ("# h\n"), so a document of N bytes can need ~500 N
# bytes: 128 MB at this size, which a worker affords, 8 GB at 16 MB, which it does not.
# Measured (python -m benchmarks.isolation --chunking, Markdown prose): sending the bytes
# over and the rows back costs ~3 ms on 16 KB (8x the work itself) but ~20-50% from 256 KB
# up, so the most common, short documents stay in the worker.
CHUNK_IN_CHILD_ABOVE = 256 * 1024

# ``chunk_in_child(item, data, content_sha256, extracted)``: see ``ChunkInChild``.
ChunkIsolated = Callable[[WorkItem, bytes, str, "Extracted | None"], "DocOutcome"]


def process_document(
    item: WorkItem,
    data: bytes,
    chunking: Chunking,
    extract_text: Callable[[str, bytes], Extracted] | None = None,
    chunk_in_child: ChunkIsolated | None = None,
) -> DocOutcome:
    """Decide the fate of one document; never raises for bad input.

    ``extract_text(uri, data)`` turns the bytes into text (default: ``extract`` in this
    process, with the config's ``extract_options``); the pipeline passes a
    ``chunkmill.isolation.Extractor``, which adds the time and memory budgets.
    ``chunk_in_child`` (the pipeline passes a ``ChunkInChild``) decodes and chunks a document
    over ``CHUNK_IN_CHILD_ABOVE`` under the same budgets; without it, everything runs here."""
    config = chunking.config
    sha = ids.sha256_hex(data)
    if carryover.unchanged_by_content(
        sha, carryover.PriorState.of_parts(item.prior), config.fingerprint
    ):
        return DocOutcome(CARRIED_OVER, new_version=item.version)
    if (
        chunk_in_child is not None
        and len(data) > CHUNK_IN_CHILD_ABOVE
        and not uses_parser(item.uri, data)
    ):
        # Decoding and chunking both in the child: the bytes cross once, the text never.
        return chunk_in_child(item, data, sha, None)
    try:
        if extract_text is None:
            doc = extract(
                item.uri,
                data,
                max_pdf_pages=config.limits.max_pdf_pages,
                **config.extract_options(),
            )
        else:
            doc = extract_text(item.uri, data)
    except ExtractionError as e:
        if e.reason == "empty":
            return no_text(item, data, e.message, sha)
        return failed(item, "extract", e.reason, e.message, sha)
    except MemoryError:
        raise  # in a child, the memory budget's ``memory`` error
    except Exception as e:  # a parser bug must cost one document, not the run
        return failed(item, "extract", "corrupt", f"{type(e).__name__}: {e}", sha)
    if chunk_in_child is not None and len(doc.text) > CHUNK_IN_CHILD_ABOVE:
        return chunk_in_child(item, b"", sha, doc)
    return chunk_extracted(item, doc, sha, chunking)


# Formats whose images may hold the text (scans, pictures of pages): a document of them in
# which no text is found is a ``no_text`` failure, not emptied.
_TEXT_IN_IMAGES = frozenset({"pdf", "docx"})


def no_text(item: WorkItem, data: bytes, message: str, sha: str) -> DocOutcome:
    """The outcome of a document read whole in which extraction found no text: emptied,
    unless it has bytes of a format whose images may hold its text (``_TEXT_IN_IMAGES``)."""
    if data and _format(item.uri, data) in _TEXT_IN_IMAGES:
        return failed(item, "extract", "no_text", message, sha)
    return DocOutcome(PROCESSED, emptied=True)


def _format(uri: str, data: bytes) -> str | None:
    try:
        return detect_format(uri, data)
    except ExtractionError:
        return None


def chunk_extracted(item: WorkItem, doc: Extracted, sha: str, chunking: Chunking) -> DocOutcome:
    """The ``processed`` outcome of an extracted document, or its ``chunk`` failure."""
    strategy = chunking.strategy_for(doc.format)
    try:
        chunker = chunking.chunker_for(doc.format, item.uri)
        spans, chunk_tokens = chunker.split_counted(doc.text)
    except MemoryError:
        raise  # not the chunker's bug: in a child, the memory budget's ``memory`` error
    except Exception as e:
        return failed(item, "chunk", "chunker_error", f"{type(e).__name__}: {e}", sha)
    if not spans:  # the strategy makes no chunk of this text: there is nothing to serve
        return DocOutcome(PROCESSED, emptied=True)

    chunks = _chunk_columns(
        item, doc, spans, chunk_tokens, sha, chunking, strategy, chunker.max_embed_tokens
    )
    return DocOutcome(PROCESSED, chunks=chunks)


class ChunkInChild:
    """Decodes (when ``extracted`` is None) and chunks one document in a parser child
    (``call`` is ``chunkmill.isolation.Extractor.call``), so that a document whose chunking
    would blow the time or memory budget costs that document only: a ``timeout`` or
    ``memory`` errors/ row at stage ``chunk``, and the run goes on."""

    def __init__(self, call: Callable[..., Any], config: ChunkingConfig) -> None:
        self._call = call
        self._config = config

    def __call__(
        self, item: WorkItem, data: bytes, sha: str, extracted: Extracted | None
    ) -> DocOutcome:
        try:
            outcome: DocOutcome = self._call(
                _process_in_child,
                item.uri,
                data,
                item=item,
                config=self._config,
                sha=sha,
                extracted=extracted,
            )
        except ExtractionError as e:
            return failed(item, "chunk", e.reason, e.message, sha)
        return outcome


# The child's Chunking, built once per config (a tokenizer takes a while to load).
_CHILD_CHUNKING: dict[str, Chunking] = {}


def _process_in_child(
    path: str,
    data: bytes,
    *,
    item: WorkItem,
    config: ChunkingConfig,
    sha: str,
    extracted: Extracted | None,
) -> DocOutcome:
    """Runs in the parser child (``ChunkInChild``)."""
    chunking = _CHILD_CHUNKING.get(config.fingerprint)
    if chunking is None:
        _CHILD_CHUNKING.clear()
        chunking = _CHILD_CHUNKING[config.fingerprint] = Chunking(config)
    if extracted is None:
        return process_document(item, data, chunking)
    return chunk_extracted(item, extracted, sha, chunking)


def _chunk_columns(
    item: WorkItem,
    doc: Extracted,
    spans: list[Span],
    chunk_tokens: list[int] | None,
    sha: str,
    chunking: Chunking,
    strategy: str,
    max_embed_tokens: int,
) -> dict[str, Sequence[Any]]:
    """The chunk rows of the spans, in order, column by column (the columns of ``schema.CHUNKS``,
    in order; this module loads no pyarrow, which every parser child would pay for). This runs
    once per changed document: what is the same for the whole document is a repeated value,
    what a span holds is its column of the spans transposed, and the loop computes only what
    depends on the text embedded (its hash, id, token count and heading). ``chunk_tokens``
    are the chunks' token counts where the chunker counted them already."""
    n = len(spans)
    starts, ends, span_paths, anchors, section_indexes, paragraphs, paragraph_totals = zip(
        *spans, strict=True
    )
    text = doc.text
    texts = [text[start:end] for start, end in zip(starts, ends, strict=True)]
    # Context windows narrowed to the embedding limit, with their token counts.
    windows = chunking.context_windows(texts, max_embed_tokens)
    count_tokens = chunking.count_tokens
    doc_id = item.doc_id
    nulls = (None,) * n
    with_context: list[Any] = [None] * n
    has_prev: Sequence[Any] = nulls
    has_next: Sequence[Any] = nulls
    if windows is None:
        embed_texts = texts
        tokens = [count_tokens(t) for t in texts] if chunk_tokens is None else list(chunk_tokens)
    else:
        embed_texts = [window.text for window, _ in windows]
        tokens = [count for _, count in windows]
        with_context = embed_texts.copy()
        has_prev = [window.has_prev for window, _ in windows]
        has_next = [window.has_next for window, _ in windows]
    paths = _heading_paths(doc, spans) if chunking.config.heading_context else None
    chunk_hash, chunk_id = ids.chunk_hash, ids.chunk_id
    hashes: list[str] = []
    chunk_ids: list[str] = []
    seen: dict[str, int] = {}
    for index in range(n):
        embed_text = embed_texts[index]
        path = () if paths is None else paths[index]
        if path and texts[index].startswith("#"):  # the chunk opens with its innermost heading
            path = path[:-1]
        if path:
            headed = with_heading(path, embed_text, count_tokens, max_embed_tokens)
            if headed is not None:
                embed_text, tokens[index] = headed
                with_context[index] = embed_text
        h = chunk_hash(embed_text)
        occurrence = seen.get(h, 0)
        seen[h] = occurrence + 1
        hashes.append(h)
        chunk_ids.append(chunk_id(doc_id, h, occurrence))
    page_start: Sequence[Any] = nulls
    page_end: Sequence[Any] = nulls
    extracted_by: Sequence[Any] = nulls
    if doc.page_starts is not None:
        pages = [doc.pages_of(start, end) for start, end in zip(starts, ends, strict=True)]
        page_start = [None if p is None else p[0] for p in pages]
        page_end = [None if p is None else p[1] for p in pages]
        extracted_by = [doc.extracted_by_of(s, e) for s, e in zip(starts, ends, strict=True)]
    section_paths: Sequence[Any] = nulls
    if doc.outline is not None or span_paths.count(None) < n:
        section_paths = [
            # the strategy's, else a PDF's bookmarks, where it has them
            list(path) if path is not None else _outline_path(doc, start)
            for path, start in zip(span_paths, starts, strict=True)
        ]
    return {
        "chunk_id": chunk_ids,
        "chunk_hash": hashes,
        "doc_id": (doc_id,) * n,
        # The document's identity; the read used item.uri.
        "source_uri": (redact_uri(item.uri),) * n,
        "chunk_index": range(n),
        "char_start": starts,
        "char_end": ends,
        "token_count": tokens,
        "page_start": page_start,
        "page_end": page_end,
        "strategy": (strategy,) * n,
        "config_fingerprint": (chunking.config.fingerprint,) * n,
        "content_sha256": (sha,) * n,
        "doc_format": (doc.format,) * n,
        "section_path": section_paths,
        "section_anchor": anchors,
        "section_chunk_index": section_indexes,
        "paragraph_index": paragraphs,
        "total_paragraphs": paragraph_totals,
        "has_prev_context": has_prev,
        "has_next_context": has_next,
        "source_version": (item.version,) * n,
        "decode_lossy": (doc.lossy,) * n,
        "extracted_by": extracted_by,
        "text": texts,
        "text_with_context": with_context,
    }


def _outline_path(doc: Extracted, start: int) -> list[str] | None:
    path = doc.section_at(start)
    return None if path is None else list(path)


# Formats whose extracted text marks headings as Markdown does (HTML and DOCX are rendered so).
_MARKDOWN_HEADINGS = frozenset({"markdown", "html", "docx"})
# Between the headings of a path, and between the path and the text, in what is embedded.
HEADING_SEPARATOR = " > "


def _heading_paths(doc: Extracted, spans: list[Span]) -> list[tuple[str, ...]]:
    """The heading path at each chunk's start: the strategy's (``section``), else the
    Markdown headings before it, else the PDF outline's; ``()`` where none is known."""
    if all(span.section_path is not None for span in spans):
        return [tuple(span.section_path or ()) for span in spans]
    if doc.format in _MARKDOWN_HEADINGS:
        return heading_paths(doc.text, [span.start for span in spans])
    return [doc.section_at(span.start) or () for span in spans]


def with_heading(
    path: tuple[str, ...], text: str, count_tokens: TokenCounter, max_tokens: int
) -> tuple[str, int] | None:
    """``text`` headed by ``path`` (``"A > B"``, a blank line, then the text) and its token
    count, dropping outer headings until it fits ``max_tokens``; None if not even the
    innermost does."""
    for first in range(len(path)):
        headed = HEADING_SEPARATOR.join(path[first:]) + "\n\n" + text
        tokens = count_tokens(headed)
        if tokens <= max_tokens:
            return headed, tokens
    return None
