"""``chunkmill embed`` with the real model: a run's live chunks that the store lacks are
embedded, each hash once per model key, whatever the re-runs and crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill import embedding
from chunkmill.pipeline.cli import main
from chunkmill.transforms import embedstore
from tests.e2e.conftest import prose

pytestmark = pytest.mark.slow


def stored(output) -> list[str]:
    """Every hash in the store, repeats included."""
    (key,) = [p.name for p in (output / "embeddings").iterdir()]
    return [
        h
        for p in embedstore.part_paths(str(output), key)
        for h in pq.read_table(p)["chunk_hash"].to_pylist()
    ]


def test_two_nights_embed_exactly_the_new_hashes_once(chunkmill, corpus, capsys):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed = ["embed", "--output", str(output)]

    assert main([*embed, "--dry-run"]) == 0
    live = {r["chunk_hash"]: r["token_count"] for r in first.rows("manifest")}
    assert f"would embed {len(live)} chunks, {sum(live.values())} tokens" in capsys.readouterr().out
    assert main(embed) == 0
    assert sorted(stored(output)) == sorted(live)
    assert main(embed) == 0  # nothing left to do
    assert "embedded 0 chunks" in capsys.readouterr().out
    assert sorted(stored(output)) == sorted(live)

    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    new = {r["chunk_hash"] for r in second.rows("chunks")}
    assert new
    assert main(embed) == 0
    assert f"embedded {len(new)} chunks" in capsys.readouterr().out
    hashes = stored(output)
    assert len(hashes) == len(set(hashes)) == len(live.keys() | new)
    assert {r["chunk_hash"] for r in second.rows("manifest")} <= set(hashes)

    # The vectors are the model's own, for exactly the text the hash is of.
    model = embedding.describe()
    texts = {r["chunk_hash"]: r["text_with_context"] or r["text"] for r in second.rows("chunks")}
    sample = sorted(texts)[:3]
    got = {
        h: np.asarray(v, dtype=np.float32)
        for t in embedstore.read_vectors(str(output), model.key, None)
        for h, v in zip(t["chunk_hash"].to_pylist(), t["vector"].to_pylist(), strict=True)
    }
    expected = embedding.load(model.path, "cpu").encode([texts[h] for h in sample])
    for h, e in zip(sample, expected, strict=True):
        assert np.allclose(got[h], e, atol=1e-5)
        assert abs(np.linalg.norm(got[h]) - 1) < 1e-4  # the model normalises


# ---------------------------------------------------------------------------------------------
# Kills, races, damage and other models, on a few one-line notes (a chunk each: embedding is
# slow on a shared CPU).

REPO = Path(__file__).resolve().parents[2]


def notes(root: Path, n: int) -> Path:
    """``n`` one-line documents under ``root``: ``n`` chunks of a few tokens."""
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"note{i}.md").write_text(f"# Note {i}\n\nA short note, number {i}, on {i}s.\n")
    return root


def rows_per_hash(output: Path, key: str) -> Counter:
    """How many rows each hash has over every vector file of ``key``, read with plain
    pyarrow."""
    files = sorted((output / "embeddings" / key).glob("part-*.parquet"))
    return Counter(h for f in files for h in pq.read_table(f)["chunk_hash"].to_pylist())


def start_embed(output: Path, log: Path, *flags: str) -> subprocess.Popen:
    """``python -m chunkmill embed`` in its own process, its output in ``log``.out/.err."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "chunkmill", "embed", "--output", str(output), *flags]
    with log.with_suffix(".out").open("w") as out, log.with_suffix(".err").open("w") as err:
        return subprocess.Popen(argv, stdout=out, stderr=err, env=env)


def test_a_killed_embed_keeps_its_files_and_the_next_embeds_only_the_rest(
    chunkmill, tmp_path, capsys
):
    run = chunkmill("--input", str(notes(tmp_path / "notes", 12) / "**"), run_id="r1")
    output = run.dir.parents[1]
    live = {r["chunk_hash"] for r in run.rows("manifest")}
    key = embedding.describe().key
    store = output / "embeddings" / key

    embed = start_embed(output, tmp_path / "killed", "--texts-per-file", "1")
    while not list(store.glob("part-*.parquet")):
        assert embed.poll() is None, (tmp_path / "killed.err").read_text()
        time.sleep(0.01)
    embed.send_signal(signal.SIGKILL)
    embed.wait()

    kept = rows_per_hash(output, key)
    assert 1 <= len(kept) < len(live)  # killed midway: some files committed, not all
    assert set(kept.values()) == {1} and set(kept) <= live
    assert (store / embedstore.CLAIM).exists()  # the killed embed's claim, left behind

    assert main(["embed", "--output", str(output), "--texts-per-file", "1"]) == 0
    assert f"embedded {len(live) - len(kept)} chunks" in capsys.readouterr().out
    assert rows_per_hash(output, key) == dict.fromkeys(live, 1)
    assert not (store / embedstore.CLAIM).exists()  # taken over, then released
    assert not list(store.glob("*.tmp"))


def test_two_embeds_at_once_store_each_hash_once(chunkmill, tmp_path):
    run = chunkmill("--input", str(notes(tmp_path / "notes", 6) / "**"), run_id="r1")
    output = run.dir.parents[1]
    live = {r["chunk_hash"] for r in run.rows("manifest")}
    logs = [tmp_path / "a", tmp_path / "b"]
    embeds = [start_embed(output, log, "--texts-per-file", "2") for log in logs]
    codes = [e.wait() for e in embeds]

    assert rows_per_hash(output, embedding.describe().key) == dict.fromkeys(live, 1)
    assert 0 in codes
    for code, log in zip(codes, logs, strict=True):
        err = log.with_suffix(".err").read_text()
        assert "Traceback" not in err
        if code != 0:  # refused at once, in one line naming the model, while the other ran
            assert code == 2
            assert (
                err.strip()
                .splitlines()[-1]
                .startswith("chunkmill: error: another embed of model all-minilm-l6-v2 (key ")
            )


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_flipped_bit_is_one_line_and_embed_embeds_that_files_chunks_again(
    chunkmill, tmp_path, capsys
):
    run = chunkmill("--input", str(notes(tmp_path / "notes", 6) / "**"), run_id="r1")
    output = run.dir.parents[1]
    live = {r["chunk_hash"] for r in run.rows("manifest")}
    embed = ["embed", "--output", str(output), "--texts-per-file", "2"]
    assert main(embed) == 0
    key = embedding.describe().key
    store = output / "embeddings" / key
    in_data, in_footer, _ = sorted(store.glob("part-*.parquet"))
    lost = {h for f in (in_data, in_footer) for h in pq.read_table(f)["chunk_hash"].to_pylist()}
    flip_bit(in_data, in_data.stat().st_size // 2)  # a vector's bytes
    # The footer's last bytes before its length and magic: no page checksum covers them.
    flip_bit(in_footer, in_footer.stat().st_size - 12)

    readers = [
        lambda: list(embedstore.read_vectors(str(output), key)),
        lambda: embedstore.stored_hashes(str(output), key),
    ]
    for read in readers:
        with pytest.raises(embedstore.StoreDamaged) as damaged:
            read()
        line = str(damaged.value)
        assert "\n" not in line and str(in_data) in line
        assert "model all-minilm-l6-v2" in line and f"chunkmill embed --output {output}" in line

    info = store / embedstore.MODEL_INFO
    flip_bit(info, info.read_bytes().index(b"minilm"))  # the model's name, still JSON
    with pytest.raises(embedstore.StoreDamaged) as damaged:
        embedstore.read_model_info(str(output), key)
    assert "\n" not in str(damaged.value) and str(info) in str(damaged.value)

    capsys.readouterr()
    assert main([*embed, "--dry-run"]) == 0
    shown = capsys.readouterr()
    assert f"damaged {info}" in shown.err
    assert f"{len(live) - len(lost)} embedded already, 2 damaged vector files" in shown.out
    assert f"would embed {len(lost)} chunks" in shown.out
    assert str(in_data) in shown.err and str(in_footer) in shown.err

    assert main(embed) == 0
    shown = capsys.readouterr()
    assert f"embedded {len(lost)} chunks" in shown.out
    assert str(in_data) in shown.err and str(in_footer) in shown.err
    assert f"{info} was damaged; written again" in shown.err
    assert embedstore.read_model_info(str(output), key)["model"] == "all-minilm-l6-v2"
    assert rows_per_hash(output, key) == dict.fromkeys(live, 1)
    assert sorted(p.name for p in (store / embedstore.DAMAGED).iterdir()) == sorted(
        [in_data.name, in_footer.name]
    )
    vectors = [t for t in embedstore.read_vectors(str(output), key)]
    assert sum(t.num_rows for t in vectors) == len(live)


def test_a_model_with_a_dense_projection_stores_vectors_of_its_width(
    chunkmill, tmp_path, capsys, monkeypatch
):
    import torch
    from sentence_transformers import SentenceTransformer, models

    base = embedding.load(embedding.model_path(), "cpu")
    torch.manual_seed(0)
    folder = tmp_path / "minilm-dense-64"
    modules = [base[0], base[1], models.Dense(384, 64), base[2]]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    assert embedding.loaded_dimension(folder) == 64

    def no_torch(*args, **kwargs):
        raise AssertionError("describe loaded the model")

    monkeypatch.setattr(embedding, "load", no_torch)  # the width is read from its files
    model = embedding.describe(str(folder))
    monkeypatch.undo()
    assert (model.name, model.dimension, model.normalized) == ("minilm-dense-64", 64, True)

    run = chunkmill("--input", str(notes(tmp_path / "notes", 3) / "**"), run_id="r1")
    output = run.dir.parents[1]
    # What a release that took the width from the pooling wrote before it crashed.
    embedstore.write_model_info(str(output), model.key, {**model.info(), "dimension": 384})
    assert main(["embed", "--output", str(output), "--model", str(folder)]) == 0
    assert "model minilm-dense-64" in capsys.readouterr().out
    assert embedstore.read_model_info(str(output), model.key)["dimension"] == 64
    table = pa.concat_tables(embedstore.read_vectors(str(output), model.key))
    assert table.schema.field("vector").type.list_size == 64
    assert set(table["chunk_hash"].to_pylist()) == {r["chunk_hash"] for r in run.rows("manifest")}
