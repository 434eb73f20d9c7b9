"""The drift between a state and an index, by row digests' parts, without a database."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from chunkmill import index_digest

KEY = "key-now"
ids = st.sampled_from([f"id{i}" for i in range(8)])
hashes = st.sampled_from([hashlib.sha256(t.encode()).hexdigest() for t in "abc"])
metas = st.sampled_from([b"m1", b"m2"])
vectors = st.sampled_from([b"v1", b"v2"])
keys = st.sampled_from([KEY, "key-before"])
texts = st.sampled_from([True, False])  # whether the index's text is the hash's


def found_row(chunk_hash: str, key: str, meta: bytes, right_text: bool, vector: bytes) -> tuple:
    text = bytes.fromhex(chunk_hash) if right_text else b"tampered"
    return (chunk_hash, key, meta, text, vector)


@given(
    state=st.dictionaries(ids, st.tuples(hashes, metas, vectors)),
    index=st.dictionaries(ids, st.tuples(hashes, keys, metas, texts, vectors)),
)
def test_writing_the_drift_gives_the_state_and_nothing_right_is_written(state, index):
    found = {i: found_row(*v) for i, v in index.items()}
    drift = index_digest.classify(state, found, KEY)
    mended = {i: v for i, v in found.items() if i not in set(drift.extra.to_pylist())}
    for i in drift.to_write.to_pylist():
        h, meta, vector = state[i]
        mended[i] = found_row(h, KEY, meta, True, vector)
    want = {i: found_row(h, KEY, m, True, v) for i, (h, m, v) in state.items()}
    assert mended == want
    right = {i for i in state if found.get(i) == want[i]}
    assert not right & set(drift.to_write.to_pylist())
    assert (drift.total == 0) == (found == want)


def test_each_kind_is_counted_apart():
    h1, h2 = (hashlib.sha256(t.encode()).hexdigest() for t in "ab")
    state = {i: (h1, b"m", b"v") for i in "abcdefg"}
    found = {
        "b": found_row(h2, KEY, b"m", True, b"v"),  # another hash
        "c": found_row(h1, "old", b"m", True, b"v"),  # another model key
        "d": found_row(h1, KEY, b"m", False, b"v"),  # another text
        "e": found_row(h1, KEY, b"moved", True, b"v"),  # other metadata
        "f": found_row(h1, KEY, b"m", True, b"swapped"),  # another vector
        "g": found_row(h1, KEY, b"m", True, b"v"),  # right
        "z": found_row(h1, KEY, b"m", True, b"v"),  # stray
    }
    drift = index_digest.classify(state, found, KEY)
    kinds = [
        drift.missing, drift.extra, drift.changed, drift.other_model,
        drift.text_differs, drift.metadata, drift.vector,
    ]  # fmt: skip
    assert [k.to_pylist() for k in kinds] == [["a"], ["z"], ["b"], ["c"], ["b", "d"], ["e"], ["f"]]
    assert sorted(drift.to_write.to_pylist()) == ["a", "b", "c", "d", "e", "f"]
    assert [line.split(": ")[1] for line in drift.lines()] == ["1", "1", "1", "1", "2", "1", "1"]
