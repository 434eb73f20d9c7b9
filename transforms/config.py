"""The chunking config: which strategy, with which parameters, counted by which tokenizer,
with which context window. It decides which chunks a document yields, so its fingerprint is
on every manifest row and a change to it re-chunks every document.

``ChunkingConfig`` is built once at graph-construction time (an unknown strategy, a parameter
the strategy does not take, or a tokenizer that cannot be loaded raises ``ValueError`` there,
not on a worker) and pickled to workers, where ``Chunking`` holds the live chunkers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transforms import ids
from transforms.chunking import Chunker, make_chunker
from transforms.chunking.base import TokenCounter, available, strategy_parameters
from transforms.chunking.recursive import separators_for
from transforms.chunking.tokens import load_token_counter, token_counter_identity
from transforms.isolation import Limits

# Bumped whenever chunkmill's own processing (not a library's) would give different chunks
# for the same bytes and parameters; a bump re-chunks every document on the next run.
PIPELINE_VERSION = "1"

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
}
# chunking-context-window-api.md turns the window on for its paragraph strategy, with
# 500 characters before and 300 after; every other strategy has it off unless asked.
DEFAULT_CONTEXT: dict[str, tuple[int, int]] = {"paragraph-window": (500, 300)}


def strategies() -> list[str]:
    """Every name ``--strategy`` takes."""
    return [AUTO, *available()]


@dataclass(frozen=True)
class ChunkingConfig:
    strategy: str = AUTO
    params: tuple[tuple[str, Any], ...] = ()
    tokenizer: str = "chars4"
    context_prev_chars: int | None = None
    context_next_chars: int | None = None
    # The PDF text engine (transforms.extract.pdf): the engines give different text.
    pdf_engine: str = "pypdf"
    # Budgets around extraction. They decide whether a document fails, never its text, so
    # they stay out of the fingerprint: a new budget re-chunks nothing.
    limits: Limits = field(default_factory=Limits, compare=False)
    description: dict[str, Any] = field(init=False, repr=False, compare=False)
    fingerprint: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        from transforms.extract import EXTRACTOR_VERSION, PDF_ENGINES

        if self.pdf_engine not in PDF_ENGINES:
            raise ValueError(
                f"argument --pdf-engine: unknown engine {self.pdf_engine!r}; "
                f"choose one of {', '.join(PDF_ENGINES)}"
            )
        if self.strategy != AUTO and self.strategy not in available():
            raise ValueError(
                f"unknown chunking strategy {self.strategy!r}; "
                f"choose one of {', '.join(strategies())}"
            )
        self._check_params()
        prev, next_ = self.context()
        if prev < 0 or next_ < 0:
            raise ValueError("context window sizes must not be negative")
        try:  # fails here, at start-up, if it cannot be loaded
            count_tokens = load_token_counter(self.tokenizer)
        except ValueError as e:
            raise ValueError(f"argument --tokenizer: {e}") from None
        chunking = Chunking(self, count_tokens)
        if self.strategy == AUTO:
            used = {
                fmt: {"strategy": name, "params": dict(chunking.chunker_for(fmt).params())}
                for fmt, name in sorted(AUTO_STRATEGIES.items())
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
            "pipeline_version": PIPELINE_VERSION,
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
        limits: Limits | None = None,
        **params: Any,
    ) -> ChunkingConfig:
        """``None`` values take the strategy's defaults."""
        given = tuple(sorted((k, v) for k, v in params.items() if v is not None))
        return cls(
            strategy,
            given,
            tokenizer,
            context_prev_chars,
            context_next_chars,
            pdf_engine,
            limits or Limits(),
        )

    def context(self) -> tuple[int, int]:
        """(prev_chars, next_chars) of the context window; (0, 0) means none."""
        prev, next_ = DEFAULT_CONTEXT.get(self.strategy, (0, 0))
        return (
            prev if self.context_prev_chars is None else self.context_prev_chars,
            next_ if self.context_next_chars is None else self.context_next_chars,
        )

    def _check_params(self) -> None:
        names = list(AUTO_STRATEGIES.values()) if self.strategy == AUTO else [self.strategy]
        accepted = set().union(*(strategy_parameters(n) for n in names))
        for key, _ in self.params:
            if key not in accepted:
                raise ValueError(
                    f"--{key.replace('_', '-')} does not apply to strategy {self.strategy!r}"
                )


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
        self._chunkers: dict[tuple[str, str], Chunker] = {}

    def strategy_for(self, fmt: str) -> str:
        if self.config.strategy == AUTO:
            return AUTO_STRATEGIES.get(fmt, "paragraph")
        return self.config.strategy

    def chunker_for(self, fmt: str, uri: str = "") -> Chunker:
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
            if separators is not None:
                params["separators"] = separators
            chunker = make_chunker(name, token_counter=self.count_tokens, **params)
            self._chunkers[key] = chunker
        return chunker
