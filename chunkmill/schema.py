"""The Parquet schemas of every output table: the one place column names, types and
nullability are pinned. The README documents each column; tests read every table back with
plain pyarrow and compare against these schemas.

Rows travel through the pipeline as plain dicts keyed by these field names, which is what
``WriteToParquet`` takes and ``ReadFromParquet`` returns.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from chunkmill.versions import chunkmill_version

# Bumped on any change to a table (2: source_version added to every occurrence table; 3:
# errors gained source_version, attempt_key and attempted; 4: the added and retired tables;
# 5: extracted_by added to every occurrence table); stored in every file's schema metadata so
# a later version can tell which version wrote a prior manifest.
SCHEMA_VERSION = "5"
# The versions whose manifest this chunkmill diffs against: 3 changed the errors table only,
# 4 added tables and 5 a nullable column, so a manifest written by version 2 has the columns
# of one now but the nullable ones added since, which read as null (``with_absent_nulls``).
READABLE_MANIFEST_VERSIONS: frozenset[str] = frozenset({"2", "3", "4", "5"})
_META = {
    b"chunkmill.schema_version": SCHEMA_VERSION.encode(),
    # Which release wrote a file, so a reader that cannot use it can say which one did.
    b"chunkmill.version": chunkmill_version().encode(),
}


def _f(name: str, type_: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


# Columns shared by every table that describes one chunk occurrence.
_OCCURRENCE = [
    _f("chunk_id", pa.string()),
    _f("chunk_hash", pa.string()),
    _f("doc_id", pa.string()),
    _f("source_uri", pa.string()),
    _f("chunk_index", pa.int32()),
    _f("char_start", pa.int64()),
    _f("char_end", pa.int64()),
    _f("token_count", pa.int32()),
    _f("page_start", pa.int32(), nullable=True),
    _f("page_end", pa.int32(), nullable=True),
    _f("strategy", pa.string()),
    _f("config_fingerprint", pa.string()),
    _f("content_sha256", pa.string()),
    _f("doc_format", pa.string()),
    # Structure the strategy knows; null where it knows none.
    _f("section_path", pa.list_(pa.string()), nullable=True),
    _f("section_anchor", pa.string(), nullable=True),
    _f("section_chunk_index", pa.int32(), nullable=True),
    _f("paragraph_index", pa.int32(), nullable=True),
    _f("total_paragraphs", pa.int32(), nullable=True),
    # Context window: null when none is configured.
    _f("has_prev_context", pa.bool_(), nullable=True),
    _f("has_next_context", pa.bool_(), nullable=True),
    # The listing's view of the document version these rows were made from (size and
    # modification time); a later listing that reports the same carries the document over
    # unread. Null when the store reported nothing usable.
    _f("source_version", pa.string(), nullable=True),
    # True when the text is not an exact decoding of the bytes (encoding guessed by a
    # detector, or NULs / invalid sequences dropped or replaced); null in rows written before
    # the column existed.
    _f("decode_lossy", pa.bool_(), nullable=True),
    # What read the chunk's text from a document with pages (PDFs): "text" (its text layer),
    # "ocr", or "text+ocr" for a chunk over pages of both; null for every other format and in
    # rows written before the column existed.
    _f("extracted_by", pa.string(), nullable=True),
]

CHUNKS = pa.schema(
    [
        *_OCCURRENCE,
        _f("text", pa.large_string()),
        # What the embedder receives when a context window is configured; null otherwise.
        _f("text_with_context", pa.large_string(), nullable=True),
    ],
    metadata=_META,
)
MANIFEST = pa.schema([*_OCCURRENCE, _f("is_new", pa.bool_())], metadata=_META)
REMOVED = pa.schema([*_OCCURRENCE, _f("removed_reason", pa.string())], metadata=_META)
# The occurrences of the current state that the prior state lacked (by chunk_id): with
# removed/, what a consumer keyed by chunk_id applies. is_new as in the manifest.
ADDED = pa.schema([*_OCCURRENCE, _f("is_new", pa.bool_())], metadata=_META)
# The hashes the prior state had and no current occurrence has: what a consumer keyed by
# chunk_hash deletes.
RETIRED = pa.schema([_f("chunk_hash", pa.string())], metadata=_META)
ERRORS = pa.schema(
    [
        _f("doc_id", pa.string()),
        _f("source_uri", pa.string()),
        _f("stage", pa.string()),
        _f("reason", pa.string()),
        _f("message", pa.string()),
        _f("size_bytes", pa.int64(), nullable=True),
        _f("content_sha256", pa.string(), nullable=True),
        _f("versions", pa.string()),
        # The listing's version of the document when it failed (as ``source_version`` of
        # the occurrence tables); null when the store reported none.
        _f("source_version", pa.string(), nullable=True),
        # What else the outcome depended on: a digest of the chunking config fingerprint,
        # the limits and the extraction libraries' versions (``document.attempt_key``). A
        # later run that lists the same source_version under the same attempt_key does not
        # read the document again (``carryover.is_known_failure``); null where none was set.
        _f("attempt_key", pa.string(), nullable=True),
        # False when this run did not try the document: it failed before, and neither its
        # version nor the attempt_key changed since, so the prior failure is repeated.
        _f("attempted", pa.bool_()),
    ],
    metadata=_META,
)

TABLES: dict[str, pa.Schema] = {
    "chunks": CHUNKS,
    "manifest": MANIFEST,
    "removed": REMOVED,
    "errors": ERRORS,
    "added": ADDED,
    "retired": RETIRED,
}
# Tables a run of an older schema version did not write: its _SUCCESS lists none of them.
TABLES_SINCE_4: tuple[str, ...] = ("added", "retired")

OCCURRENCE_FIELDS: tuple[str, ...] = tuple(f.name for f in _OCCURRENCE)
MANIFEST_FIELDS: tuple[str, ...] = tuple(MANIFEST.names)


def as_written_before(table: pa.Schema, names: Iterable[str]) -> pa.Schema:
    """``table`` without its nullable columns missing from ``names``: the shape of the table
    in a file an older schema version wrote, one that lacks columns added since."""
    present = set(names)
    return pa.schema(
        [f for f in table if f.name in present or not f.nullable], metadata=table.metadata
    )


def with_absent_nulls(table: pa.Table, fields: Iterable[pa.Field]) -> pa.Table:
    """``table`` with a column of nulls appended for each nullable field of ``fields`` it
    lacks: rows of a file written before that column existed read as null in it."""
    for field in fields:
        if field.nullable and field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table


# removed_reason values
DOCUMENT_REMOVED = "document_removed"  # the document is gone from the listing
DOCUMENT_CHANGED = "document_changed"  # the document's new version no longer has this chunk
# The document is still listed but holds no text now (0 bytes, or a text format whose text is
# empty or whitespace only): it has no chunk, so none of its prior chunks stays.
DOCUMENT_EMPTIED = "document_emptied"
