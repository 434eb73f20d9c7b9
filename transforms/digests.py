"""Hashes and ids as the bytes their hex spells, for what crosses the hash join.

The tables hold ``chunk_hash`` (SHA-256) and ``chunk_id`` as lowercase hex, 64 and 32
characters. Decoded, they are 32 and 16 bytes: what the hash join sends of each occurrence,
in fixed-size Arrow columns with no offsets. The byte order of decoded values is the
lexicographic order of their hex, so the smallest id is the same either way. Both directions
are vectorised over an Arrow column's buffers: a first run decodes every occurrence it makes.
"""

from __future__ import annotations

import binascii

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HASH_BYTES = 32  # chunk_hash: SHA-256
ID_BYTES = 16  # chunk_id: the first 32 hex characters of a SHA-256

_DIGITS = b"0123456789abcdef"


def from_hex(column: pa.Array | pa.ChunkedArray, width: int) -> pa.FixedSizeBinaryArray:
    """``column`` (strings of ``2 * width`` lowercase hex characters, no nulls) decoded to
    ``width`` bytes a value. Raises ``ValueError`` on any other value."""
    strings = _plain(column).cast(pa.string())
    n = len(strings)
    if strings.null_count:
        raise ValueError("a hex column to decode holds a null")
    if n == 0:
        return pa.array([], pa.binary(width))
    packed = binascii.unhexlify(_hex_digits(strings, width))
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(packed)])


def is_hex(column: pa.Array | pa.ChunkedArray, width: int) -> bool:
    """Whether every non-null value of ``column`` (a string column; False for any other
    type) is ``2 * width`` lowercase hex characters: what ``from_hex`` accepts."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return False
    strings = _plain(pc.drop_null(column) if column.null_count else column).cast(pa.string())
    if len(strings) == 0:
        return True
    try:
        _hex_digits(strings, width)
    except ValueError:
        return False
    return True


def _hex_digits(strings: pa.StringArray, width: int) -> memoryview:
    """The characters of ``strings`` (no nulls, at least one value) end to end, a view of
    the array's bytes read off its offsets; ``ValueError`` unless every value is
    ``2 * width`` lowercase hex characters. Checked by a C loop over the bytes
    (``bytes.translate`` deleting every hex digit leaves nothing), several times faster than
    a NumPy lookup of every byte, a slice of ``_CHECK_BYTES`` at a time: a copy of the whole
    column would be fresh memory, its page faults costing as much as the check."""
    n = len(strings)
    _, offsets_buffer, data = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, strings.offset * 4)
    if not (np.diff(offsets) == 2 * width).all():
        raise ValueError(f"a value to decode is not {2 * width} hex characters")
    digits = memoryview(data.slice(int(offsets[0]), 2 * width * n))
    for start in range(0, len(digits), _CHECK_BYTES):
        if bytes(digits[start : start + _CHECK_BYTES]).translate(None, _DIGITS):
            raise ValueError("a value to decode is not lowercase hex")
    return digits


_CHECK_BYTES = 64 * 1024


def to_hex(column: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """``column`` (fixed-size binary, no nulls) as lowercase hex strings."""
    values = _plain(column)
    width = values.type.byte_width
    n = len(values)
    if values.null_count:
        raise ValueError("a binary column to encode holds a null")
    if n == 0:
        return pa.array([], pa.string())
    raw = values.buffers()[1].slice(values.offset * width, width * n)
    chars = binascii.hexlify(memoryview(raw))
    offsets = np.arange(0, 2 * width * (n + 1), 2 * width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(chars))


def _plain(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column
