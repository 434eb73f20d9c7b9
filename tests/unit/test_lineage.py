"""Runs ordered by their chain: a run descends from the run it diffed against, and from the
run LATEST named at its launch when it diffed against nothing."""

from __future__ import annotations

from chunkmill.transforms import lineage

REPORTS = {
    "a": {"prior": {"mode": "none", "run_id": None}},
    "b": {"prior": {"mode": "latest", "run_id": "a"}},
    "c": {"prior": {"mode": "none", "run_id": None, "after": "b"}},
    "loop1": {"prior": {"run_id": "loop2"}},
    "loop2": {"prior": {"run_id": "loop1"}},
}


def walk(run: str) -> list[str]:
    return list(lineage.walk("out", run, REPORTS.get))


def test_a_run_walks_back_through_its_priors_and_the_run_it_came_after():
    assert walk("c") == ["c", "b", "a"]
    assert lineage.descends_from("out", "c", "a", REPORTS.get)
    assert not lineage.descends_from("out", "a", "c", REPORTS.get)


def test_a_deleted_run_ends_the_walk_and_a_loop_ends_too():
    assert walk("gone") == ["gone"]
    assert walk("loop1") == ["loop1", "loop2"]
    assert not lineage.descends_from("out", "loop1", "a", REPORTS.get)


def test_a_predecessor_that_is_not_a_run_id_is_none():
    assert lineage.predecessor({"prior": {"run_id": "../x"}}) is None
    assert lineage.predecessor({"prior": "b"}) is None
    assert lineage.predecessor({}) is None


AHEAD = "2026-11-24T03:00:00.000000Z"  # a clock two hours ahead
CHAINED = {
    # Older releases: no chain block, so the chain is folded from their started_at.
    "old1": {"started_at": "2026-11-24T01:00:00Z", "prior": {"run_id": None}},
    "old2": {"started_at": AHEAD, "prior": {"run_id": "old1"}},
    # A run whose report records its chain: the walk stops there.
    "kept": {
        "started_at": "2026-11-20T00:00:00.000000Z",
        "prior": {"run_id": "deleted"},
        "chain": {"latest_start": AHEAD, "length": 7},
    },
}


def test_a_chain_is_folded_from_reports_that_lack_the_block():
    chain = lineage.chain_after("out", "old2", "2026-11-24T01:30:00.000000Z", CHAINED.get)
    assert chain == {"latest_start": AHEAD, "length": 2}


def test_a_recorded_chain_outlives_the_runs_before_it():
    chain = lineage.chain_after("out", "kept", "2026-11-24T04:00:00.000000Z", CHAINED.get)
    assert chain == {"latest_start": "2026-11-24T04:00:00.000000Z", "length": 8}


def test_the_first_run_of_a_chain_and_a_damaged_block():
    assert lineage.chain_after("out", None, "2026-11-24T01:00:00Z", CHAINED.get) == {
        "latest_start": "2026-11-24T01:00:00.000000Z",
        "length": 0,
    }
    assert lineage.chain_block({"chain": {"latest_start": AHEAD, "length": -1}}) is None
    assert lineage.chain_block({"chain": "x"}) is None
