"""The index guards' checks on values, without a database (test_sync_safety.py runs them
against PostgreSQL)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill import index_guard
from chunkmill.index_guard import Found, Refused

OLD = ("2026-01-01T00:00:00.000000Z", 3, "2026-01-01T00:00:00.000000Z", "r3")
NEW = ("2026-01-02T00:00:00.000000Z", 4, "2026-01-02T00:00:00.000000Z", "r4")


def recorded(run_id: str, order=None, **more) -> Found:
    row = {"run_id": run_id, "output": "/out", **more}
    if order is not None:
        row["run_order"] = index_guard.encode_order(order)
    return Found(True, True, row)


def forward(found: Found, run_id: str, chain, *, broken=False, order=None, rewind=False):
    index_guard.check_forward(
        found, "t", run_id, chain, chain_broken=broken, run_order=order, allow_rewind=rewind
    )


def test_the_index_moves_only_forward_by_the_chain():
    forward(Found(False, False, None), "r1", ["r1"])  # nothing recorded yet
    forward(recorded("r3"), "r3", ["r3", "r2"])  # the same run again
    forward(recorded("r2"), "r4", ["r4", "r3", "r2", "r1"])
    with pytest.raises(Refused, match=r"holds run r3, and run r2 \(LATEST\).*--allow-rewind"):
        forward(recorded("r3"), "r2", ["r2", "r1"])
    forward(recorded("r3"), "r2", ["r2", "r1"], rewind=True)


def test_past_a_chain_cut_by_gc_the_recorded_order_decides():
    """The walk back from r9 ends at a run whose report ``runs gc`` deleted: a run later in
    the chain order than the one recorded applies, an earlier one does not."""
    forward(recorded("r3", OLD), "r9", ["r9", "r8"], broken=True, order=NEW)
    with pytest.raises(Refused):
        forward(recorded("r4", NEW), "r2", ["r2"], broken=True, order=OLD)
    with pytest.raises(Refused):  # a whole walk that misses the recorded run proves it older
        forward(recorded("r3", OLD), "r9", ["r9", "r8"], broken=False, order=NEW)
    with pytest.raises(Refused):  # an older release recorded no order: nothing to compare
        forward(recorded("r3"), "r9", ["r9", "r8"], broken=True, order=NEW)


@given(rows=st.integers(0, 10_000), data=st.data())
def test_no_apply_deletes_more_than_the_ratio_of_a_guarded_index(rows, data):
    deleting = data.draw(st.integers(0, rows))
    ratio = data.draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]))
    try:
        index_guard.check_removal("t", rows, deleting, max_ratio=ratio, run_id="r2")
    except Refused as e:
        assert rows >= index_guard.MIN_GUARDED_ROWS and deleting > ratio * rows
        # The ratio the line suggests lets exactly this apply through.
        suggested = float(re.search(r"--max-delete-ratio ([\d.]+) or", str(e)).group(1))
        index_guard.check_removal("t", rows, deleting, max_ratio=suggested, run_id="r2")
    else:
        assert rows < index_guard.MIN_GUARDED_ROWS or deleting <= ratio * rows


def test_the_removal_line_names_the_counts_and_the_flags():
    with pytest.raises(Refused) as info:
        index_guard.check_removal("chunks", 337, 256, max_ratio=0.5, run_id="r2")
    line = str(info.value)
    assert "delete 256 of the 337 rows of chunks (76%" in line
    assert "--max-delete-ratio 0.76 or --allow-mass-delete" in line and "\n" not in line


def test_an_older_releases_state_row_names_its_owner_by_its_output():
    old = Found(True, True, {"run_id": "r1", "output": "gs://b/a", "model_key": "k"})
    assert old.owner == "gs://b/a" and old.run_order is None
    assert not old.owned_by_another("gs://b/a") and old.owned_by_another("gs://b/other")
    index_guard.check_owner(old, "t", "gs://b/other", take_over=True)
    with pytest.raises(Refused, match=r"belongs to the output gs://b/a.*--table.*--take-over"):
        index_guard.check_owner(old, "t", "gs://b/other", take_over=False)


def test_lock_keys_are_per_table_and_fit_a_bigint():
    keys = {index_guard.lock_key(t) for t in ("a", "b", "chunkmill_chunks")}
    assert len(keys) == 3 and all(-(2**63) <= k < 2**63 for k in keys)
    assert index_guard.lock_key("a") == index_guard.lock_key("a")


def test_a_database_error_line_never_shows_the_password():
    url = "postgresql://rag:s%40cret@db/rag"
    error = Exception("FATAL: password s@cret rejected for rag\nDETAIL: s%40cret")
    assert index_guard.one_line(error, url) == "FATAL: password *** rejected for rag"


def test_no_sync_or_embed_refusal_advises_a_bare_prior_manifest_none():
    """A chunk's text lost with its run folder: the way on is the folder back, or a run without
    a prior that is still held to LATEST's documents, and the line says so."""
    from tests.tree import ROOT

    for path in (ROOT / "pipeline" / "sync.py", ROOT / "pipeline" / "embed.py"):
        assert "--prior-manifest none" not in path.read_text(), path
    remedy = index_guard.LOST_TEXT_REMEDY
    assert remedy.startswith("restore the deleted run folder")
    assert "still refused if it would leave out more than --max-removed-ratio" in remedy
