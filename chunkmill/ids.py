"""Deterministic identifiers and hashes. Nothing here is random: Beam retries bundles, and a
re-run on the same input must produce the same ids (docs/design.md, the output contract)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

# 128 bits: collision-free in practice for any corpus, and half the width of a full digest.
_ID_HEX_CHARS = 32
DOC_ID_CHARS = _ID_HEX_CHARS


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def doc_id(source_uri: str) -> str:
    """Stable id of a document: a function of its source URI only."""
    return sha256_hex(source_uri.encode("utf-8"))[:_ID_HEX_CHARS]


def doc_ids_joined(source_uris: Iterable[str]) -> str:
    """``doc_id`` of each of ``source_uris``, back to back in one string (``DOC_ID_CHARS``
    each): a listing's thousands without a string, or a hash object made from nothing,
    each (a copy of an empty one costs a third of a new one)."""
    empty = hashlib.sha256()
    digests = []
    for data in map(str.encode, source_uris):  # UTF-8
        sha256 = empty.copy()
        sha256.update(data)
        digests.append(sha256.digest()[: _ID_HEX_CHARS // 2])
    return b"".join(digests).hex()


def chunk_hash(embed_text: str) -> str:
    """SHA-256 (hex) of exactly the text the embedder receives; embeddings are keyed by it."""
    # Extraction guarantees no lone surrogate reaches here (strict UTF-8 decoding; PDF text
    # is repaired), so the strict encoder, which has CPython's fast paths, is safe.
    return sha256_hex(embed_text.encode("utf-8"))


def chunk_id(doc: str, hash_: str, occurrence: int) -> str:
    """Id of the ``occurrence``-th (0-based) chunk with hash ``hash_`` inside document ``doc``.

    Independent of the chunk's position, so an edit elsewhere in the document leaves it alone.
    """
    return sha256_hex(f"{doc}\x00{hash_}\x00{occurrence}".encode())[:_ID_HEX_CHARS]


def fingerprint(config: Mapping[str, Any]) -> str:
    """Hash of a JSON-serialisable config; equal configs give equal fingerprints."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return sha256_hex(canonical.encode())[:_ID_HEX_CHARS]
