"""A run's chunks, or the current state's, as LlamaIndex ``TextNode``\\ s (the
``llamaindex`` extra: ``llama-index-core``)::

    from chunkmill.integrations.llamaindex import ChunkmillReader

    nodes = ChunkmillReader("out").load_nodes()  # the state LATEST names
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chunkmill.api import read_chunks
from chunkmill.integrations import METADATA_FIELDS, content, metadata, missing

try:
    from llama_index.core.schema import (
        NodeRelationship,
        ObjectType,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise missing("llamaindex", "llama-index-core") from e

__all__ = ["ChunkmillReader", "to_nodes"]

# Identifiers and offsets inform a program, not a model: kept out of the text LlamaIndex
# embeds and shows an LLM.
_HIDDEN = tuple(name for name in METADATA_FIELDS if name not in ("source_uri", "section_path"))


class ChunkmillReader:
    """Reads the chunks under ``output`` (``chunkmill.api.read_chunks``): with ``state``
    (the default) every chunk of the state after ``run`` (default: LATEST's run), else the
    chunks new in ``run``. ``load_nodes`` gives ``TextNode``\\ s (see ``to_nodes``)."""

    def __init__(
        self, output: str, run: str | None = None, *, state: bool = True, with_context: bool = False
    ) -> None:
        self.output = output
        self.run = run
        self.state = state
        self.with_context = with_context

    def load_nodes(self) -> list[TextNode]:
        rows = read_chunks(self.output, self.run, state=self.state)
        return list(to_nodes(rows, with_context=self.with_context))


def to_nodes(rows: Any, *, with_context: bool = False) -> Iterator[TextNode]:
    """One ``TextNode`` per chunks/ row: ``id_`` = ``chunk_id``, ``text`` the chunk's text
    (with ``with_context``, its context window where one was configured), the metadata of
    ``chunkmill.integrations.METADATA_FIELDS``; relationships ``SOURCE`` (the document, by
    ``doc_id``) and ``PREVIOUS``/``NEXT`` between chunks of one document whose
    ``chunk_index`` follow each other (in a run's own chunks/ some neighbours are absent:
    only the hashes new in it are there)."""
    nodes = []
    for row in rows:
        node = TextNode(
            id_=row["chunk_id"],
            text=content(row, with_context),
            metadata=metadata(row),
            excluded_embed_metadata_keys=list(_HIDDEN),
            excluded_llm_metadata_keys=list(_HIDDEN),
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
            node_id=row["doc_id"],
            node_type=ObjectType.DOCUMENT,
            metadata={"source_uri": row["source_uri"]},
        )
        nodes.append(node)
    by_place = {(n.metadata["doc_id"], n.metadata["chunk_index"]): n for n in nodes}
    for node in nodes:
        doc, index = node.metadata["doc_id"], node.metadata["chunk_index"]
        after = by_place.get((doc, index + 1))
        if after is not None:
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(
                node_id=after.node_id, node_type=ObjectType.TEXT
            )
            after.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(
                node_id=node.node_id, node_type=ObjectType.TEXT
            )
    yield from nodes
