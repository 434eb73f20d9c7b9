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
from collections.abc import Callable
from dataclasses import dataclass, field
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
    occurrences: list[dict[str, Any]] = field(default_factory=list)  # new chunk rows, with text
    error: dict[str, Any] | None = None
    # Carried over after reading: the same bytes under new listing metadata, so its kept rows
    # record this version and the next run can skip reading it.
    new_version: str | None = None
    # Processed, and found to hold no text: no chunk, every prior row removed.
    emptied: bool = False

    def verdict(self, doc_id: str) -> Verdict:
        """What becomes of the document's prior rows: an emptied document's are all removed
        (``document_emptied``); a processed document's are replaced by its occurrences (those
        whose chunk_id is gone are removed); otherwise they are kept."""
        if self.emptied:
            return Verdict(doc_id, EMPTIED)
        if self.status == PROCESSED:
            return Verdict(
                doc_id, REPLACE, current_ids=tuple(o["chunk_id"] for o in self.occurrences)
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

    occurrences = _chunk_rows(
        item, doc, spans, chunk_tokens, sha, chunking, strategy, chunker.max_embed_tokens
    )
    return DocOutcome(PROCESSED, occurrences=occurrences)


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


def _chunk_rows(
    item: WorkItem,
    doc: Extracted,
    spans: list[Span],
    chunk_tokens: list[int] | None,
    sha: str,
    chunking: Chunking,
    strategy: str,
    max_embed_tokens: int,
) -> list[dict[str, Any]]:
    """One row per span, in order. This loop runs once per chunk of every changed document:
    what is the same for the whole document is computed once, outside it. ``chunk_tokens``
    are the chunks' token counts where the chunker counted them already."""
    texts = [doc.text[span.start : span.end] for span in spans]
    # Context windows narrowed to the embedding limit, with their token counts.
    windows = chunking.context_windows(texts, max_embed_tokens)
    count_tokens = chunking.count_tokens
    doc_id = item.doc_id
    has_pages = doc.page_starts is not None
    constant: dict[str, object] = {
        "doc_id": doc_id,
        "source_uri": redact_uri(item.uri),  # the document's identity; the read used item.uri
        "strategy": strategy,
        "config_fingerprint": chunking.config.fingerprint,
        "content_sha256": sha,
        "doc_format": doc.format,
        "page_start": None,
        "page_end": None,
        "has_prev_context": None,
        "has_next_context": None,
        "text_with_context": None,
        "source_version": item.version,
        "decode_lossy": doc.lossy,
        "extracted_by": None,
    }
    paths = _heading_paths(doc, spans) if chunking.config.heading_context else None
    has_outline = doc.outline is not None
    chunk_hash, chunk_id = ids.chunk_hash, ids.chunk_id
    seen: dict[str, int] = {}
    rows: list[dict[str, object]] = []
    for index, span in enumerate(spans):
        text = texts[index]
        row = constant.copy()
        if windows is None:
            embed_text = text
            tokens = count_tokens(text) if chunk_tokens is None else chunk_tokens[index]
        else:
            window, tokens = windows[index]
            embed_text = window.text
            row["text_with_context"] = embed_text
            row["has_prev_context"] = window.has_prev
            row["has_next_context"] = window.has_next
        path = () if paths is None else paths[index]
        if path and text.startswith("#"):  # the chunk opens with its innermost heading
            path = path[:-1]
        if path:
            headed = with_heading(path, embed_text, count_tokens, max_embed_tokens)
            if headed is not None:
                embed_text, tokens = headed
                row["text_with_context"] = embed_text
        h = chunk_hash(embed_text)
        occurrence = seen.get(h, 0)
        seen[h] = occurrence + 1
        if has_pages:
            pages = doc.pages_of(span.start, span.end)
            if pages is not None:
                row["page_start"], row["page_end"] = pages
            row["extracted_by"] = doc.extracted_by_of(span.start, span.end)
        row["chunk_id"] = chunk_id(doc_id, h, occurrence)
        row["chunk_hash"] = h
        row["chunk_index"] = index
        row["char_start"] = span.start
        row["char_end"] = span.end
        row["token_count"] = tokens
        if span.section_path is not None:
            row["section_path"] = list(span.section_path)
        elif has_outline:  # a PDF's bookmarks, where it has them
            outline_path = doc.section_at(span.start)
            row["section_path"] = None if outline_path is None else list(outline_path)
        else:
            row["section_path"] = None
        row["section_anchor"] = span.section_anchor
        row["section_chunk_index"] = span.section_chunk_index
        row["paragraph_index"] = span.paragraph_index
        row["total_paragraphs"] = span.total_paragraphs
        row["text"] = text
        rows.append(row)
    return rows


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
