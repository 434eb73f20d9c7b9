"""The drift between a state and an index, without a database."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from chunkmill import vector_index

KEY = "key-now"
ids = st.sampled_from([f"id{i}" for i in range(8)])
hashes = st.sampled_from(["h1", "h2", "h3"])
keys = st.sampled_from([KEY, "key-before"])


def table(rows: dict, with_key: bool) -> pa.Table:
    columns = {"chunk_id": list(rows), "chunk_hash": [v[0] for v in rows.values()]}
    if with_key:
        columns["model_key"] = [v[1] for v in rows.values()]
    return pa.table({k: pa.array(v, pa.string()) for k, v in columns.items()})


@given(
    state=st.dictionaries(ids, st.tuples(hashes)),
    index=st.dictionaries(ids, st.tuples(hashes, keys)),
)
def test_applying_the_drift_gives_the_state(state, index):
    drift = vector_index.diff(table(state, False), table(index, True), KEY)
    mended = {i: v for i, v in index.items() if i not in set(drift.extra.to_pylist())}
    for i in drift.to_write.to_pylist():
        mended[i] = (state[i][0], KEY)
    assert mended == {i: (h, KEY) for i, (h,) in state.items()}
    # Nothing is written that was right already.
    right = {i for i in state if index.get(i) == (state[i][0], KEY)}
    assert not right & set(drift.to_write.to_pylist())
    assert (drift.total == 0) == (mended == index)


def test_each_kind_is_counted_apart():
    state = table({"a": ("h1",), "b": ("h2",), "c": ("h3",), "d": ("h1",)}, False)
    index = table({"b": ("hX", KEY), "c": ("h3", "old"), "d": ("h1", KEY), "z": ("h1", KEY)}, True)
    drift = vector_index.diff(state, index, KEY, pa.array(["d"]))
    assert [drift.missing.to_pylist(), drift.extra.to_pylist()] == [["a"], ["z"]]
    assert [drift.changed.to_pylist(), drift.other_model.to_pylist()] == [["b"], ["c"]]
    assert sorted(drift.to_write.to_pylist()) == ["a", "b", "c", "d"]
    assert [line.split(": ")[1] for line in drift.lines()] == ["1", "1", "1", "1", "1"]
