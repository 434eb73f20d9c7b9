"""Element types that travel between pipeline stages (frozen, picklable dataclasses).

Table rows are plain dicts keyed by the fields of ``transforms.schema``; these types are the
work items around them. The chunking config is in ``transforms.config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
