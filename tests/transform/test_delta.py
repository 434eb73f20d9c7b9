"""A run's delta against its prior state: what a consumer applies without re-counting.

For any prior state and any night's changes, the run's tables must be the set differences of
the two states: added = current ids - prior ids, removed = prior ids - current ids,
retired = prior hashes - current hashes, chunks = current hashes - prior hashes."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import manifest_rows, paragraphs
from tests.transform.test_core import run_corpus

WORDS = ["alpha", "beta", "gamma", "delta", "eps"]
# A document: its paragraphs' words (a word repeated is the same chunk twice in it); no word
# is a document emptied to 0 bytes, which has no chunk.
doc = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4)
state = st.dictionaries(st.sampled_from([f"/c/{n}.md" for n in "abcdef"]), doc, max_size=5)


def store(docs: dict[str, list[str]]) -> dict[str, bytes]:
    return {uri: paragraphs(*words) for uri, words in docs.items()}


def delta_of(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict:
    prior = [row for uri, data in sorted(store(before).items()) for row in manifest_rows(uri, data)]
    out = run_corpus(store(after), prior)
    ids = {r["chunk_id"] for r in prior}, {r["chunk_id"] for r in out["manifest"]}
    hashes = {r["chunk_hash"] for r in prior}, {r["chunk_hash"] for r in out["manifest"]}
    return {"out": out, "ids": ids, "hashes": hashes}


@settings(max_examples=10, deadline=None)
@given(before=state, after=state)
@example(before={"/c/a.md": ["alpha"], "/c/b.md": ["beta"]}, after={"/c/a.md": [], "/c/b.md": []})
def test_the_tables_are_the_difference_of_the_two_states(before, after):
    d = delta_of(before, after)
    out, (prior_ids, ids), (prior_hashes, hashes) = d["out"], d["ids"], d["hashes"]
    assert sorted(r["chunk_id"] for r in out["added"]) == sorted(ids - prior_ids)
    assert sorted(r["chunk_id"] for r in out["removed"]) == sorted(prior_ids - ids)
    assert sorted(r["chunk_hash"] for r in out["retired"]) == sorted(prior_hashes - hashes)
    assert sorted(r["chunk_hash"] for r in out["chunks"]) == sorted(hashes - prior_hashes)
    # An added row is the manifest's row of that occurrence.
    manifest = {r["chunk_id"]: r for r in out["manifest"]}
    assert all(row == manifest[row["chunk_id"]] for row in out["added"])
    counts = out["counts"][0]
    assert counts["occurrences_added"] == len(out["added"])
    assert counts["hashes_retired"] == len(out["retired"])
    # An empty document has no row now; its prior rows are removed as emptied.
    empty = {uri for uri, words in after.items() if not words}
    assert not empty & {r["source_uri"] for r in out["manifest"]}
    emptied = {r["source_uri"] for r in out["removed"] if r["removed_reason"] == "document_emptied"}
    assert emptied == empty & {uri for uri, words in before.items() if words}
    assert counts["docs_emptied"] == len(emptied) and counts["docs_empty"] == len(empty)
    assert not out["errors"]


def test_a_chunk_two_documents_share_is_retired_only_with_the_last_of_them():
    both = {"/c/a.md": ["shared", "alpha"], "/c/b.md": ["shared", "beta"]}
    one_left = delta_of(both, {"/c/b.md": ["shared", "beta"]})["out"]
    shared = {r["chunk_hash"] for r in one_left["manifest"] if r["source_uri"] == "/c/b.md"}
    assert {r["source_uri"] for r in one_left["removed"]} == {"/c/a.md"}
    retired = {r["chunk_hash"] for r in one_left["retired"]}
    assert len(retired) == 1 and not retired & shared  # alpha's hash only
    none_left = delta_of(both, {"/c/c.md": ["gamma"]})["out"]
    assert shared <= {r["chunk_hash"] for r in none_left["retired"]}
    assert len(none_left["retired"]) == 3  # shared, alpha and beta
