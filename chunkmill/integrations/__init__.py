"""Adapters that hand a run's chunks to retrieval frameworks: ``langchain`` (LangChain
``Document``\\ s, the ``langchain`` extra) and ``llamaindex`` (LlamaIndex ``TextNode``\\ s, the
``llamaindex`` extra). Each reads through ``chunkmill.api.read_chunks``; nothing else in
chunkmill imports them, so neither framework is needed unless one is used."""

from __future__ import annotations

from typing import Any

# The metadata every adapter gives a chunk: where it comes from and where it lies in its
# document's text (``text[char_start:char_end]``), by the names of the chunks/ table.
METADATA_FIELDS = (
    "source_uri",
    "doc_id",
    "chunk_id",
    "chunk_index",
    "char_start",
    "char_end",
    "chunk_hash",
    "section_path",
    "page_start",
    "page_end",
    "doc_format",
    "token_count",
)


def metadata(row: dict[str, Any]) -> dict[str, Any]:
    """``METADATA_FIELDS`` of a chunks/ row (``section_path`` a list, or None)."""
    out = {name: row[name] for name in METADATA_FIELDS}
    if out["section_path"] is not None:
        out["section_path"] = list(out["section_path"])
    return out


def content(row: dict[str, Any], with_context: bool) -> str:
    """The chunk's text, or what was embedded (its context window) with ``with_context``
    where one was configured."""
    if with_context and row["text_with_context"] is not None:
        return str(row["text_with_context"])
    return str(row["text"])


def missing(extra: str, package: str) -> ImportError:
    return ImportError(
        f"chunkmill.integrations.{extra} needs {package}: pip install 'chunkmill[{extra}]'"
    )
