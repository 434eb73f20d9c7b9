"""The chunking config: which strategy, with which parameters, counted by which tokenizer,
with which context window. It decides which chunks a document yields, so its fingerprint is
on every manifest row and a change to it re-chunks every document.

``ChunkingConfig`` is built once at graph-construction time (an unknown strategy, a parameter
the strategy does not take, a size or combination of sizes that cannot work, or a tokenizer
that cannot be loaded raises ``ValueError`` there, not on a worker) and pickled to workers,
where ``Chunking`` holds the live chunkers. Its errors are ``ParameterError`` s naming the
parameters by their names here (``overlap_tokens``); the CLI names its flags instead.

Every strategy is fitted to the embedder (:mod:`chunkmill.chunking.fitting`): no text handed
to it, a chunk with its context window, exceeds ``max_embed_tokens``, and chunks under
``min_chunk_tokens`` are merged into a neighbour. Both default per strategy (below) and are
part of each strategy's ``params`` in the description, so of the fingerprint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from chunkmill import ids
from chunkmill.chunking.base import ParameterError, TokenCounter, chars4, check_int
from chunkmill.chunking.context import ContextWindow, fitted_context_windows
from chunkmill.chunking.fitting import TOKEN_LIMIT_PARAM, FittedChunker
from chunkmill.chunking.recursive import separators_for
from chunkmill.chunking.registry import available, make_chunker, strategy_parameters
from chunkmill.chunking.structure import Unmasking
from chunkmill.chunking.tokens import load_token_counter, model_window, token_counter_identity

# Bumped whenever chunkmill's own processing (not a library's) would give different chunks
# for the same bytes and parameters; a bump re-chunks every document on the next run.
PIPELINE_VERSION = "3"

AUTO = "auto"
# What `auto` picks per document format: headings structure Markdown; prose and PDF text
# are paragraphs; code splits best at its own definitions.
AUTO_STRATEGIES: dict[str, str] = {
    "markdown": "section",
    "text": "paragraph",
    "pdf": "paragraph",
    "code": "recursive",
    # Rendered with Markdown headings (transforms.extract.markup).
    "html": "section",
    "docx": "section",
    # reStructuredText headings are underlines the section strategy does not read.
    "rst": "paragraph",
    # Structured data: one paragraph per record.
    "json": "paragraph",
    "jsonl": "paragraph",
    "csv": "paragraph",
    # An image's text elements, one per line.
    "svg": "paragraph",
}
# With the input window of the embedding model known (a --model, or a tokenizer whose files
# tell it), `auto` picks `paragraph` for every prose format, Markdown included, with sentence
# overlap, at max_tokens = the window: measured on the development set with the model
# retrieving (docs/chunking.md, "Defaults for a model's window"), it had the best recall of
# chunkmill's configurations that fit the window, and its recall and IoU are not both beaten
# by any of LangChain's reference configurations. Code keeps its language's separators.
AUTO_STRATEGIES_IN_WINDOW: dict[str, str] = {
    **AUTO_STRATEGIES,
    "markdown": "paragraph",
    "html": "paragraph",
    "docx": "paragraph",
}
# ...and these parameter defaults, under `auto` or named: no overlap in tokens (it cost IoU
# there and gave no recall: overlap_tokens 0: .886 / .051, 80: .871 / .045, 160: .887 /
# .044), but where a chunk ends inside a line, at a sentence end, the next one repeats the
# two sentences before the cut (overlap_sentences 2: .901 / .050, LangChain 400/200's
# recall at a better IoU). Given --overlap-tokens, there is no sentence overlap.
WINDOW_DEFAULTS: dict[str, dict[str, Any]] = {
    "paragraph": {"overlap_tokens": 0, "overlap_sentences": 2}
}

# The strategies that see Markdown structure through chunking.structure (fences, tables and
# lists kept whole where they fit); section reads it itself.
KEEP_STRUCTURE = frozenset({"paragraph", "sentence", "recursive"})
# The paragraph-window strategy turns the window on for the paragraph strategy, with
# 500 characters before and 300 after; every other strategy has it off unless asked.
DEFAULT_CONTEXT: dict[str, tuple[int, int]] = {"paragraph-window": (500, 300)}

# The input limit of BERT-family embedding models (their position embeddings), the hard
# limit `section` keeps to for all-MiniLM-L6-v2 (docs/chunking.md).
BERT_INPUT_TOKENS = 512
# Chunks under this many tokens are merged into a neighbour by default: about 64 characters
# by the chars4 estimate, a heading line or a one-line fragment, well under any chunk worth
# retrieving on its own (`paragraph`'s overlap alone is 80 tokens). It is what a LangChain user
# gets: MarkdownHeaderTextSplitter never emits a heading without text, and the recursive
# splitter leaves a fragment only at a document's end. On the sample corpus it merges away
# the heading-only sections (`# FAQ` over `## Jobs`) and code tails, 11 of 139 chunks.
DEFAULT_MIN_CHUNK_TOKENS = 16
# ...except for paragraph-window: its unit is the paragraph by specification, and what it
# embeds is never tiny, as every paragraph carries up to 800 characters of its neighbours.
MIN_CHUNK_TOKENS_BY_STRATEGY: dict[str, int] = {"paragraph-window": 0}


def default_max_embed_tokens(params: dict[str, Any]) -> int:
    """The default ``max_embed_tokens`` of a strategy with these (resolved) parameters."""
    if TOKEN_LIMIT_PARAM in params:
        # paragraph and section: their own limit, so that a context window never pushes a
        # text past the size the strategy keeps its chunks to.
        return int(params[TOKEN_LIMIT_PARAM])
    if "chunk_size" in params:
        # sentence and recursive: a chunk of chunk_size characters is chunk_size / 4 tokens by
        # the chars4 estimate; twice that (2 characters a token, denser than prose or code:
        # the largest 1000-character chunk of the sample corpus is 461 all-MiniLM-L6-v2
        # tokens) keeps a chunk of the strategy's size whole, and never below the BERT input
        # limit, which the default 1000 characters are well within.
        return max(BERT_INPUT_TOKENS, -(-int(params["chunk_size"]) // 2))
    # paragraph-window: a paragraph has no size but a safety cap in characters (8000, about
    # 2000 tokens, which no model of this family reads), so the limit is the BERT input
    # limit: a typical paragraph and the default 800 characters of context (about 200
    # tokens) fit, and a longer paragraph is cut.
    return BERT_INPUT_TOKENS


def strategies() -> list[str]:
    """Every name ``--strategy`` takes."""
    return [AUTO, *available()]


@dataclass(frozen=True)
class Limits:
    """Per-document budgets.

    ``timeout_seconds``: wall-clock time one document may spend in a parser. ``memory_mb``:
    address space the parser may add on top of the warm child's own (RLIMIT_AS, Linux and
    other POSIX systems; ignored where ``resource`` is missing). ``max_document_bytes``: a
    listed object larger than this is a ``too_large`` error without being read.
    ``max_pdf_pages``: a PDF with more pages is ``too_large``; ``None`` for no cap.
    """

    timeout_seconds: float = 120.0
    memory_mb: int = 2048
    max_document_bytes: int = 256 * 1024 * 1024
    max_pdf_pages: int | None = 5000

    def __post_init__(self) -> None:
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        if self.memory_mb <= 0 or self.max_document_bytes <= 0:
            raise ValueError("memory_mb and max_document_bytes must be positive")
        if self.max_pdf_pages is not None and self.max_pdf_pages <= 0:
            raise ValueError("max_pdf_pages must be positive")


@dataclass(frozen=True)
class ChunkingConfig:
    strategy: str = AUTO
    params: tuple[tuple[str, Any], ...] = ()
    tokenizer: str = "chars4"
    context_prev_chars: int | None = None
    context_next_chars: int | None = None
    # The PDF text engine (transforms.extract.pdf): the engines give different text.
    pdf_engine: str = "pypdf"
    # OCR of PDF pages without a text layer (chunkmill.extract.ocr): auto, never, always.
    ocr: str = "auto"
    # The environment variable holding the password of encrypted PDFs (its name only: the
    # password never enters a config, a report or a log). It decides whether a document
    # fails, not its text: in the attempt key, not the fingerprint.
    pdf_password_env: str | None = field(default=None, compare=False)
    # Budgets around extraction. They decide whether a document fails, never its text, so
    # they stay out of the fingerprint: a new budget re-chunks nothing.
    limits: Limits = field(default_factory=Limits, compare=False)
    # The largest text handed to the embedder, in tokens; None: each strategy's default
    # (default_max_embed_tokens).
    max_embed_tokens: int | None = None
    # Chunks under this many tokens are merged into a neighbour; None: each strategy's
    # default (DEFAULT_MIN_CHUNK_TOKENS), 0: never.
    min_chunk_tokens: int | None = None
    # The heading path at each chunk's start is put before the text embedded
    # (text_with_context), where it fits max_embed_tokens; the chunk's span is unchanged.
    heading_context: bool = False
    description: dict[str, Any] = field(init=False, repr=False, compare=False)
    fingerprint: str = field(init=False, compare=False)
    # The input window of the model the tokenizer belongs to, where the files beside its
    # tokenizer.json tell it (tokens.model_window). It is the default max_embed_tokens, so it
    # shapes chunks through the resolved parameters (fingerprinted), and is reported.
    model_window: int | None = field(init=False, compare=False)

    def embed_limit(self) -> int | None:
        """The limit every strategy is fitted to: ``max_embed_tokens`` when given (larger
        than the window only when asked for), else the model's window; None: each
        strategy's own default (``default_max_embed_tokens``)."""
        if self.max_embed_tokens is not None:
            return self.max_embed_tokens
        return self.model_window

    def __post_init__(self) -> None:
        from chunkmill.extract import EXTRACTOR_VERSION, OCR_MODES, PDF_ENGINES
        from chunkmill.extract import ocr as ocr_engine

        if self.pdf_engine not in PDF_ENGINES:
            raise ParameterError(
                "{pdf_engine}: unknown engine {0!r}; choose one of {1}",
                self.pdf_engine,
                ", ".join(PDF_ENGINES),
            )
        if self.ocr not in OCR_MODES:
            raise ParameterError(
                "{ocr}: unknown OCR mode {0!r}; choose one of {1}", self.ocr, ", ".join(OCR_MODES)
            )
        if self.ocr == "always" and not ocr_engine.available():
            raise ParameterError("{ocr}: always: {0}", ocr_engine.MISSING)
        if self.strategy != AUTO and self.strategy not in available():
            raise ParameterError(
                "{strategy}: unknown chunking strategy {0!r}; choose one of {1}",
                self.strategy,
                ", ".join(strategies()),
            )
        self._check_params()
        for name in ("context_prev_chars", "context_next_chars"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 0)
        if self.max_embed_tokens is not None:
            check_int("max_embed_tokens", self.max_embed_tokens, 1)
        if self.min_chunk_tokens is not None:
            check_int("min_chunk_tokens", self.min_chunk_tokens, 0)
        if not isinstance(self.heading_context, bool):
            raise ParameterError(
                "{heading_context} must be true or false, got {0!r}", self.heading_context
            )
        prev, next_ = self.context()
        try:  # fails here, at start-up, if it cannot be loaded
            count_tokens = load_token_counter(self.tokenizer)
        except ValueError as e:
            raise ParameterError("{tokenizer}: {0}", e) from None
        object.__setattr__(self, "model_window", model_window(self.tokenizer))
        chunking = Chunking(self, count_tokens)
        if self.strategy == AUTO:
            used = {
                fmt: {"strategy": name, "params": dict(chunking.chunker_for(fmt).params())}
                for fmt, name in sorted(self.auto_strategies().items())
            }
            used["code"]["separators"] = "by file extension"
        else:
            used = {"params": dict(chunking.chunker_for("text").params())}
        description = {
            "strategy": self.strategy,
            **used,
            "tokenizer": token_counter_identity(self.tokenizer, count_tokens),
            "context_window": {"prev_chars": prev, "next_chars": next_},
            "extractor_version": EXTRACTOR_VERSION,
            "pdf_engine": self.pdf_engine,
            "ocr": self.ocr,
            "pipeline_version": PIPELINE_VERSION,
            **({"heading_context": True} if self.heading_context else {}),
        }
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "fingerprint", ids.fingerprint(description))

    @classmethod
    def create(
        cls,
        strategy: str = AUTO,
        *,
        tokenizer: str = "chars4",
        context_prev_chars: int | None = None,
        context_next_chars: int | None = None,
        pdf_engine: str = "pypdf",
        ocr: str = "auto",
        pdf_password_env: str | None = None,
        limits: Limits | None = None,
        max_embed_tokens: int | None = None,
        min_chunk_tokens: int | None = None,
        heading_context: bool = False,
        **params: Any,
    ) -> ChunkingConfig:
        """``None`` values take the strategy's defaults."""
        given = tuple(sorted((k, v) for k, v in params.items() if v is not None))
        return cls(
            strategy=strategy,
            params=given,
            tokenizer=tokenizer,
            context_prev_chars=context_prev_chars,
            context_next_chars=context_next_chars,
            pdf_engine=pdf_engine,
            ocr=ocr,
            pdf_password_env=pdf_password_env,
            limits=limits or Limits(),
            max_embed_tokens=max_embed_tokens,
            min_chunk_tokens=min_chunk_tokens,
            heading_context=heading_context,
        )

    def auto_strategies(self) -> dict[str, str]:
        """What ``auto`` picks per format: for a model's window when one is known."""
        return AUTO_STRATEGIES if self.model_window is None else AUTO_STRATEGIES_IN_WINDOW

    def extract_options(self) -> dict[str, Any]:
        """The options of ``chunkmill.extract.extract`` this config asks for, the PDF
        password read from ``pdf_password_env`` here (where documents are extracted: the
        variable must be set on the workers). Never logged or recorded."""
        password = None
        if self.pdf_password_env is not None:
            password = os.environ.get(self.pdf_password_env)
        return {"pdf_engine": self.pdf_engine, "ocr": self.ocr, "pdf_password": password}

    def context(self) -> tuple[int, int]:
        """(prev_chars, next_chars) of the context window; (0, 0) means none."""
        prev, next_ = DEFAULT_CONTEXT.get(self.strategy, (0, 0))
        return (
            prev if self.context_prev_chars is None else self.context_prev_chars,
            next_ if self.context_next_chars is None else self.context_next_chars,
        )

    def _check_params(self) -> None:
        names = (
            list(AUTO_STRATEGIES.values()) + list(AUTO_STRATEGIES_IN_WINDOW.values())
            if self.strategy == AUTO
            else [self.strategy]
        )
        accepted = set().union(*(strategy_parameters(n) for n in names))
        for key, _ in self.params:
            if key not in accepted:
                raise ParameterError(f"{{{key}}} does not apply to strategy {{0!r}}", self.strategy)


class Chunking:
    """A config made live on a worker: the token counter and the chunkers, built once per
    process and reused for every document."""

    def __init__(self, config: ChunkingConfig, count_tokens: TokenCounter | None = None) -> None:
        self.config = config
        if count_tokens is None:  # on a worker: the tokenizer must be the one configured
            count_tokens = load_token_counter(config.tokenizer)
            found = token_counter_identity(config.tokenizer, count_tokens)
            if found != config.description["tokenizer"]:
                raise RuntimeError(
                    f"tokenizer {config.tokenizer!r} here is {found}, but the run was "
                    f"configured with {config.description['tokenizer']}"
                )
        self.count_tokens = count_tokens
        self._chunkers: dict[tuple[str, str], FittedChunker] = {}

    def strategy_for(self, fmt: str) -> str:
        if self.config.strategy == AUTO:
            return self.config.auto_strategies().get(fmt, "paragraph")
        return self.config.strategy

    def chunker_for(self, fmt: str, uri: str = "") -> FittedChunker:
        """The chunker for a document of format ``fmt`` at ``uri`` (its extension picks the
        code separators under ``auto``)."""
        name = self.strategy_for(fmt)
        auto_code = self.config.strategy == AUTO and fmt == "code"
        separators = separators_for(uri) if auto_code else None
        key = (name, repr(separators))
        chunker = self._chunkers.get(key)
        if chunker is None:
            accepted = strategy_parameters(name)
            params = {k: v for k, v in self.config.params if k in accepted}
            if self.config.model_window is not None:
                defaults = WINDOW_DEFAULTS.get(name, {})
                if params.get("overlap_tokens"):  # one kind of overlap: the one asked for
                    defaults = {**defaults, "overlap_sentences": 0}
                params = {**defaults, **params}
            if separators is not None:
                params["separators"] = separators
            chunker = self._fitted(name, params)
            self._chunkers[key] = chunker
        return chunker

    def _fitted(self, name: str, params: dict[str, Any]) -> FittedChunker:
        """Strategy ``name`` with ``params``, fitted to the embedding limit and the minimum
        chunk size (:mod:`chunkmill.chunking.fitting`).

        A strategy whose limit is in tokens must keep its chunks within ``max_embed_tokens``
        by itself: without ``max_tokens`` given, its default is lowered to that limit; a
        ``max_tokens`` given above it is refused (cutting would only shrink every large chunk
        behind the strategy's back)."""
        config = self.config
        limit = config.embed_limit()
        if limit is not None and limit <= self.count_tokens(""):
            raise ParameterError(
                "{max_embed_tokens} ({0}) leaves no room for text: {tokenizer} counts {1} "
                "tokens for any text, the model's special ones; raise {max_embed_tokens}",
                limit,
                self.count_tokens(""),
            )
        # Code (auto's recursive with a language's separators) has no Markdown structure.
        keep_structure = name in KEEP_STRUCTURE and "separators" not in params
        counter = self.count_tokens
        if keep_structure and counter is not chars4:
            counter = Unmasking(counter)
        chunker = make_chunker(name, token_counter=counter, **params)
        own = dict(chunker.params())
        if limit is not None and own.get(TOKEN_LIMIT_PARAM, 0) > limit:
            if TOKEN_LIMIT_PARAM in params and config.max_embed_tokens is None:
                raise ParameterError(
                    "{max_tokens} ({0}) is over the input window of the model of {tokenizer} "
                    "({1} tokens, special ones included); lower {max_tokens}, or give "
                    "{max_embed_tokens} to ask for larger texts than the model reads",
                    own[TOKEN_LIMIT_PARAM],
                    limit,
                )
            if TOKEN_LIMIT_PARAM in params:
                raise ParameterError(
                    "{max_embed_tokens} ({0}) must be at least {max_tokens} ({1}), the most a "
                    "{2} chunk holds without its context; raise {max_embed_tokens} or lower "
                    "{max_tokens}",
                    limit,
                    own[TOKEN_LIMIT_PARAM],
                    name,
                )
            try:
                chunker = make_chunker(name, token_counter=counter, **params, max_tokens=limit)
            except ParameterError as e:  # say which limit set max_tokens
                raise ParameterError(
                    e.template.replace("{max_tokens}", "{max_embed_tokens}")
                    + f" (strategy {name!r} keeps its chunks within it)",
                    *e.values,
                ) from None
            own = dict(chunker.params())
        if limit is None:
            limit = default_max_embed_tokens(own)
        minimum = config.min_chunk_tokens
        if minimum is None:
            minimum = MIN_CHUNK_TOKENS_BY_STRATEGY.get(name, DEFAULT_MIN_CHUNK_TOKENS)
        elif minimum >= limit:
            raise ParameterError(
                "{min_chunk_tokens} ({0}) must be less than {max_embed_tokens} ({1} for "
                "strategy {2!r}); lower {min_chunk_tokens} or raise {max_embed_tokens}",
                minimum,
                limit,
                name,
            )
        return FittedChunker(
            chunker,
            max_embed_tokens=limit,
            min_chunk_tokens=minimum,
            token_counter=self.count_tokens,
            keep_structure=keep_structure,
        )

    def context_windows(
        self, texts: list[str], max_embed_tokens: int
    ) -> list[tuple[ContextWindow, int]] | None:
        """The context window of each chunk text of one document, narrowed to fit
        ``max_embed_tokens`` (its chunker's), with its token count; None when the config has
        no context window."""
        prev_chars, next_chars = self.config.context()
        if not (prev_chars or next_chars):
            return None
        return fitted_context_windows(
            texts, prev_chars, next_chars, self.count_tokens, max_embed_tokens
        )
