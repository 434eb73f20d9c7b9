"""Hashes and ids as bytes for the hash join (``transforms/digests.py``): exact both ways, in
the same order as their hex, and nothing but lowercase hex of the right length accepted."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from chunkmill.transforms import digests

HASHES = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(50)]


def test_hex_and_bytes_round_trip_across_chunks_and_slices():
    column = pa.chunked_array([HASHES[:20], HASHES[20:]])
    decoded = digests.from_hex(column, digests.HASH_BYTES)
    assert decoded.type == pa.binary(32)
    assert decoded.to_pylist() == [bytes.fromhex(h) for h in HASHES]
    assert digests.to_hex(decoded).to_pylist() == HASHES
    assert digests.to_hex(decoded.slice(7, 5)).to_pylist() == HASHES[7:12]
    assert digests.from_hex(pa.array(HASHES).slice(30), 32).to_pylist() == [
        bytes.fromhex(h) for h in HASHES[30:]
    ]
    assert len(digests.from_hex(pa.array([], pa.string()), 16)) == 0


def test_bytes_sort_as_their_hex_does():
    ids = [h[:32] for h in HASHES]
    decoded = digests.from_hex(pa.array(ids), digests.ID_BYTES)
    by_bytes = sorted(range(len(ids)), key=lambda i: decoded[i].as_py())
    assert [ids[i] for i in by_bytes] == sorted(ids)


@pytest.mark.parametrize(
    ("value", "problem"),
    [("A" * 64, "lowercase hex"), ("g" * 64, "lowercase hex"), ("a" * 62, "64 hex characters")],
)
def test_anything_but_lowercase_hex_of_its_length_is_refused(value, problem):
    with pytest.raises(ValueError, match=problem):
        digests.from_hex(pa.array([HASHES[0], value]), digests.HASH_BYTES)
    with pytest.raises(ValueError, match="null"):
        digests.from_hex(pa.array([HASHES[0], None]), digests.HASH_BYTES)
