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
