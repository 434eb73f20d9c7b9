"""A run's chunks, or the current state's, as LangChain ``Document``\\ s (the ``langchain``
extra: ``langchain-core``)::

    from chunkmill.integrations.langchain import ChunkmillLoader

    docs = ChunkmillLoader("out").load()  # the state LATEST names
"""

from __future__ import annotations

from collections.abc import Iterator

from chunkmill.api import read_chunks
from chunkmill.integrations import content, metadata, missing

try:
    from langchain_core.document_loaders import BaseLoader
    from langchain_core.documents import Document
except ImportError as e:  # pragma: no cover - depends on the environment
    raise missing("langchain", "langchain-core") from e

__all__ = ["ChunkmillLoader"]


class ChunkmillLoader(BaseLoader):
    """Loads the chunks under ``output`` (``chunkmill.api.read_chunks``): with ``state``
    (the default) every chunk of the state after ``run`` (default: LATEST's run), else the
    chunks new in ``run``. Each ``Document`` has ``id`` = ``chunk_id``, ``page_content`` =
    the chunk's text (with ``with_context``, what was embedded: its context window where
    one was configured) and the metadata of ``chunkmill.integrations.METADATA_FIELDS``
    (``source`` too, LangChain's name for ``source_uri``)."""

    def __init__(
        self, output: str, run: str | None = None, *, state: bool = True, with_context: bool = False
    ) -> None:
        self.output = output
        self.run = run
        self.state = state
        self.with_context = with_context

    def lazy_load(self) -> Iterator[Document]:
        for row in read_chunks(self.output, self.run, state=self.state):
            meta = metadata(row)
            meta["source"] = meta["source_uri"]
            yield Document(
                id=row["chunk_id"], page_content=content(row, self.with_context), metadata=meta
            )
