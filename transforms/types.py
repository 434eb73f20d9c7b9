"""Element types that travel between pipeline stages (frozen, picklable dataclasses).

Table rows are plain dicts keyed by the fields of ``transforms.schema``; these types are the
work items and configs around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transforms import ids
from transforms.chunking import Chunker, chars4, make_chunker

# Bumped whenever chunkmill's own processing (not a library's) would give different chunks
# for the same bytes and parameters; it is part of the config fingerprint, so a bump
# re-chunks every document on the next run.
PIPELINE_VERSION = "1"

TOKENIZERS = {"chars4": chars4}


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One object found by the listing."""

    uri: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class WorkItem:
    """A listed document joined with its rows in the prior manifest (empty if it is new)."""

    doc_id: str
    uri: str
    size_bytes: int
    prior: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ChunkingConfig:
    """Everything that decides which chunks a document yields.

    Built once at graph-construction time: an unknown strategy or invalid parameter raises
    ``ValueError`` there, not on a worker. ``fingerprint`` changes exactly when the chunks of
    some document could change, and manifest rows carry it.
    """

    strategy: str = "paragraph"
    params: tuple[tuple[str, Any], ...] = ()
    tokenizer: str = "chars4"
    description: dict[str, Any] = field(init=False, repr=False, compare=False)
    fingerprint: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        from transforms.extract import EXTRACTOR_VERSION

        if self.tokenizer not in TOKENIZERS:
            raise ValueError(
                f"unknown tokenizer {self.tokenizer!r}; choose one of {', '.join(TOKENIZERS)}"
            )
        chunker = self.build()
        description = {
            "strategy": self.strategy,
            "params": dict(chunker.params()),
            "tokenizer": self.tokenizer,
            "extractor_version": EXTRACTOR_VERSION,
            "pipeline_version": PIPELINE_VERSION,
        }
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "fingerprint", ids.fingerprint(description))

    @classmethod
    def create(cls, strategy: str = "paragraph", tokenizer: str = "chars4", **params: Any):
        """``params`` with value ``None`` take the strategy's defaults."""
        given = tuple(sorted((k, v) for k, v in params.items() if v is not None))
        return cls(strategy=strategy, params=given, tokenizer=tokenizer)

    def build(self) -> Chunker:
        return make_chunker(self.strategy, **dict(self.params))

    def token_counter(self):
        return TOKENIZERS[self.tokenizer]
