"""The embedding store: a retried group is one file, every file is checked on read, and one
embed at a time holds a key."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill.transforms import embedstore

KEY = "k" * 32
DIM = 4


def vectors(hashes: list[str], seed: int) -> pa.Table:
    flat = pa.array(np.random.default_rng(seed).random(len(hashes) * DIM), pa.float32())
    return pa.table(
        [pa.array(hashes), pa.FixedSizeListArray.from_arrays(flat, DIM)],
        schema=embedstore.vector_schema(DIM),
    )


def test_a_retried_group_replaces_its_file_whatever_its_bytes(tmp_path):
    output = str(tmp_path)
    first = embedstore.write_vectors(output, KEY, vectors(["b", "a"], seed=1))
    # The same group again (a retried bundle), its vectors off in the last bits (a GPU).
    again = embedstore.write_vectors(output, KEY, vectors(["a", "b"], seed=2))
    assert first != again
    assert embedstore.part_paths(output, KEY) == [again]
    assert pq.read_table(again)["chunk_hash"].to_pylist() == ["a", "b"]
    assert embedstore.stored_hashes(output, KEY).to_pylist() == ["a", "b"]


def test_a_file_of_an_older_release_is_checked_by_its_page_checksums(tmp_path):
    output = str(tmp_path)
    embedstore.write_model_info(output, KEY, {"model": "old-model", "dimension": DIM})
    name = embedstore.part_name("r1", "t", 0)
    table = vectors(["a", "b"], seed=1)
    path = Path(embedstore.write_part(output, KEY, name, table))
    data = bytearray(path.read_bytes())
    value = np.float32(table["vector"][1].as_py()[2]).tobytes()
    data[data.index(value)] ^= 1  # one bit of a vector, in its page
    path.write_bytes(bytes(data))
    found = embedstore.scan(output, KEY)
    assert found.damaged == [str(path)] and len(found.hashes) == 0
    with pytest.raises(embedstore.StoreDamaged, match="model old-model") as damaged:
        embedstore.stored_hashes(output, KEY)
    assert "\n" not in str(damaged.value) and "--model <the folder of old-model>" in str(
        damaged.value
    )


def test_one_embed_at_a_time_holds_a_key(tmp_path):
    output = str(tmp_path)
    embedstore.write_model_info(output, KEY, {"model": "m1", "dimension": DIM})
    held = embedstore.claim(output, KEY, "m1", "r1")
    with pytest.raises(embedstore.EmbedBusy) as busy:
        embedstore.claim(output, KEY, "m1", "r1")
    line = str(busy.value)
    assert "\n" not in line and f"another embed of model m1 (key {KEY})" in line
    assert held.path in line
    embedstore.release(held)
    embedstore.release(embedstore.claim(output, KEY, "m1", "r1"))


def write_claim(output: str, **holder) -> None:
    path = Path(embedstore.store_dir(output, KEY)) / embedstore.CLAIM
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"token": "t", "started_at": "then", **holder}))


def test_the_claim_of_a_killed_embed_on_this_machine_is_taken_over(tmp_path):
    output = str(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    write_claim(output, host=socket.gethostname(), pid=gone.pid)
    embedstore.release(embedstore.claim(output, KEY, "m1", "r1"))


def ago(seconds: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds)).isoformat()


def test_a_renewed_claim_from_another_machine_is_left_to_its_owner(tmp_path):
    output = str(tmp_path)
    write_claim(output, host="elsewhere", pid=1, renewed_at=ago(60))
    with pytest.raises(embedstore.EmbedBusy, match="pid 1 on elsewhere"):
        embedstore.claim(output, KEY, "m1", "r1")


def test_a_claim_not_renewed_for_the_lease_is_taken_over(tmp_path):
    output = str(tmp_path)
    write_claim(output, host="elsewhere", pid=1, renewed_at=ago(embedstore.LEASE_SECONDS + 60))
    embedstore.release(embedstore.claim(output, KEY, "m1", "r1"))


def test_a_held_claim_is_renewed_and_released(tmp_path):
    output = str(tmp_path)
    held = embedstore.claim(output, KEY, "m1", "r1")
    path = Path(held.path)
    first = json.loads(path.read_text())["renewed_at"]
    with embedstore.holding(held, every=0.05):
        while json.loads(path.read_text())["renewed_at"] == first:
            time.sleep(0.05)  # renewed within a second or two (times are to the second)
        with pytest.raises(embedstore.EmbedBusy):
            embedstore.claim(output, KEY, "m1", "r1")
    assert not path.exists()


def test_tidy_removes_what_a_killed_embed_left(tmp_path):
    output = str(tmp_path)
    kept = Path(embedstore.write_vectors(output, KEY, vectors(["a"], seed=1)))
    store = kept.parent
    (store / f"{kept.name}.0123.tmp").write_bytes(b"half")  # a write cut short
    group = embedstore.set_digest(["a"])
    # A second copy of the group, sorted first, that fails its check.
    (store / f"part-{group}-{'0' * 32}.parquet").write_bytes(kept.read_bytes())
    embedstore.tidy(output, KEY)
    assert embedstore.part_paths(output, KEY) == [str(kept)]
    assert not list(store.glob("*.tmp"))


def test_model_json_is_checked_and_one_of_an_older_release_still_reads(tmp_path):
    output = str(tmp_path)
    path = Path(embedstore.store_dir(output, KEY)) / embedstore.MODEL_INFO
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": KEY, "model": "m1", "dimension": DIM}))  # no SHA
    assert embedstore.read_model_info(output, KEY) == {"key": KEY, "model": "m1", "dimension": DIM}
    embedstore.replace_model_info(output, KEY, {"model": "m1", "dimension": DIM})
    assert embedstore.read_model_info(output, KEY)["dimension"] == DIM
    for damage in (
        path.read_text().replace(f'"dimension": {DIM}', f'"dimension": {DIM + 1}'),
        path.read_text()[:-3],
        json.dumps({"key": "another", "model": "m1", "dimension": DIM}),
    ):
        path.write_text(damage)
        with pytest.raises(embedstore.StoreDamaged, match="chunkmill embed --output"):
            embedstore.read_model_info(output, KEY)
