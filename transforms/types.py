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
    # What the listing says about this version of the object, without reading it (see
    # ``source_version``); None when the store told nothing usable.
    version: str | None = None


@dataclass(frozen=True, slots=True)
class WorkItem:
    """A listed document joined with its rows in the prior manifest (empty if it is new)."""

    doc_id: str
    uri: str
    size_bytes: int
    prior: tuple[dict[str, Any], ...] = ()
    version: str | None = None  # the listing's ``SourceFile.version``


def source_version(size_bytes: int, last_updated_in_seconds: float | None) -> str | None:
    """A listing-metadata fingerprint of one object version: its size and modification time.

    Two listings that give the same string are taken to name the same bytes, so the document
    is carried over without being read (a nightly run over an unchanged corpus reads nothing).
    ``None`` when the store reports no modification time (Beam reports 0.0 then): such
    objects are always read and compared by content SHA-256.
    """
    if not last_updated_in_seconds:
        return None
    # repr keeps every digit of the float: a sub-second rewrite of the same size still
    # changes the string where the store records sub-second times.
    return f"size={size_bytes};mtime={last_updated_in_seconds!r}"
