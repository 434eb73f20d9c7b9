"""The carry-over rule and its one summary of prior rows: the fate of a listed document
before it is read, as both a run and ``chunkmill plan`` decide it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill import carryover, prior_summary
from chunkmill.carryover import CHANGED, KNOWN_FAILED, NEW, UNCHANGED, PriorState
from chunkmill.items import PriorError, PriorSummary

FP, V1, V2, KEY = "f" * 32, "size=10;mtime=1.5", "size=12;mtime=2.5", "k" * 32


def error(reason="corrupt", version=V1, key=KEY) -> PriorError:
    return PriorError(version, key, "extract", reason, "bad", None)


@pytest.mark.parametrize(
    ("version", "prior", "prior_error", "fate"),
    [
        (V1, None, None, NEW),
        (V1, PriorState(0, None, None), None, NEW),
        (V1, PriorState(3, V1, FP), None, UNCHANGED),
        (V2, PriorState(3, V1, FP), None, CHANGED),  # edited
        (V1, PriorState(3, V1, "other"), None, CHANGED),  # the config changed
        (V1, PriorState(3, None, FP), None, CHANGED),  # rows of several versions, or none
        (None, PriorState(3, None, FP), None, CHANGED),  # the store reports no version
        (V1, PriorState(3, V1, FP), error(), UNCHANGED),  # rows win over an old failure
        (V1, None, error(), KNOWN_FAILED),
        (V1, PriorState(2, V1, "other"), error(), KNOWN_FAILED),
        (V2, None, error(), NEW),  # rewritten since it failed
        (V1, None, error(key="other"), NEW),  # config, limits or parsers changed
        (V1, None, error(version=None), NEW),  # an older run's row, no version kept
        (V1, None, error(reason="vanished"), NEW),  # transient: always tried again
        (V1, None, error(reason="link_target_missing"), NEW),
    ],
)
def test_the_fate_of_a_listed_document_before_it_is_read(version, prior, prior_error, fate):
    assert carryover.before_reading(version, prior, FP, prior_error, KEY) == fate


def test_the_state_of_a_document_with_rows_in_several_parts():
    parts = [
        PriorSummary("p1", 2, V1, FP, "s", "/a"),
        PriorSummary("p2", 3, V1, FP, "s", "/a"),
    ]
    assert PriorState.of_parts(parts) == PriorState(5, V1, FP, "s")
    parts.append(PriorSummary("p3", 1, V2, FP, "s", "/a"))
    assert PriorState.of_parts(parts) == PriorState(6, None, FP, "s")
    assert PriorState.of_parts([]) is None


def test_unchanged_by_content_needs_the_same_bytes_and_config():
    state = PriorState(2, None, FP, "s" * 64)
    assert carryover.unchanged_by_content("s" * 64, state, FP)
    assert not carryover.unchanged_by_content("t" * 64, state, FP)
    assert not carryover.unchanged_by_content("s" * 64, state, "other")
    assert not carryover.unchanged_by_content("s" * 64, None, FP)


_value = st.sampled_from(["a", "b", None])
_row = st.tuples(st.sampled_from(["d1", "d2", "d3"]), _value, _value, st.integers(0, 9))


@given(rows=st.lists(_row, min_size=1, max_size=30), split=st.integers(1, 7))
def test_summaries_of_batches_merge_into_the_summary_of_the_whole(rows, split):
    def table(rs):
        return pa.table(
            {
                "doc_id": [r[0] for r in rs],
                "source_version": pa.array([r[1] for r in rs], pa.string()),
                "config_fingerprint": pa.array([r[2] for r in rs], pa.string()),
                "content_sha256": pa.array(["s"] * len(rs), pa.string()),
                "source_uri": pa.array(["/" + r[0] for r in rs], pa.string()),
            }
        )

    def summary(rs):
        t = table(rs)
        return prior_summary.summarise(t, sums={"n": pa.array([r[3] for r in rs], pa.int64())})

    whole = summary(rows)
    merged = prior_summary.merge([summary(rows[i : i + split]) for i in range(0, len(rows), split)])

    def by_doc(t):
        states = prior_summary.states(t)
        columns = zip(t["doc_id"].to_pylist(), states, t["n"].to_pylist(), strict=True)
        return {d: (s, n) for d, s, n in columns}

    assert by_doc(merged) == by_doc(whole)
    expected = {}
    for doc in {r[0] for r in rows}:
        mine = [r for r in rows if r[0] == doc]
        versions = {r[1] for r in mine}
        fps = {r[2] for r in mine}
        expected[doc] = (
            PriorState(
                len(mine),
                versions.pop() if len(versions) == 1 else None,
                fps.pop() if len(fps) == 1 else None,
                "s",
            ),
            sum(r[3] for r in mine),
        )
    assert by_doc(whole) == expected


_summary = st.tuples(
    st.sampled_from(["p1", "p2"]), st.integers(0, 3), _value, st.sampled_from([FP, "other", None])
)
_listed = st.tuples(st.sampled_from([V1, V2, None]), st.lists(_summary, max_size=3))


@given(docs=st.lists(_listed, min_size=1, max_size=12))
def test_the_rule_over_arrays_is_the_rule_document_by_document(docs):
    """A run decides carry-over in Arrow, a doc-id bucket at a time; ``chunkmill plan`` and
    a document to read decide it one document at a time. Both must agree."""
    parts = [
        (f"d{i}", *s)
        for i, (_, summaries) in enumerate(docs)
        for s in {s[0]: s for s in summaries}.values()
    ]
    table = pa.table(
        {
            "doc_id": pa.array([p[0] for p in parts], pa.string()),
            "part": pa.array([p[1] for p in parts], pa.string()),
            "rows": pa.array([p[2] for p in parts], pa.int64()),
            "source_version": pa.array([p[3] for p in parts], pa.string()),
            "config_fingerprint": pa.array([p[4] for p in parts], pa.string()),
            "content_sha256": pa.array(["s"] * len(parts), pa.string()),
            "source_uri": pa.array(["/" + p[0] for p in parts], pa.string()),
        }
    )
    states = prior_summary.doc_states(table)
    listed = pa.array([f"d{i}" for i in range(len(docs))], pa.string())
    at = pc.index_in(listed, value_set=states["doc_id"])
    over_arrays = prior_summary.unchanged_by_listing(
        pa.array([version for version, _ in docs], pa.string()),
        pc.take(states["rows"], at),
        pc.take(states["source_version"], at),
        pc.take(states["config_fingerprint"], at),
        FP,
    ).to_pylist()
    one_by_one = []
    for i, (version, _) in enumerate(docs):
        mine = [
            PriorSummary(p[1], p[2], p[3], p[4], "s", "/" + p[0]) for p in parts if p[0] == f"d{i}"
        ]
        one_by_one.append(carryover.unchanged_by_listing(version, PriorState.of_parts(mine), FP))
    assert over_arrays == one_by_one
