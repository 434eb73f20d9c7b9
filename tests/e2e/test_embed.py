"""``chunkmill embed`` with the real model: a run's live chunks that the store lacks are
embedded, each hash once per model key, whatever the re-runs and crashes."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from chunkmill import embedding
from chunkmill.pipeline.cli import main
from chunkmill.transforms import embed as embed_transforms
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


def test_two_nights_embed_exactly_the_new_hashes_once(chunkmill, corpus, capsys, monkeypatch):
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed = ["embed", "--output", str(output)]

    # A crash after the vectors were computed, before they reached the store: nothing is
    # stored, so the next embed does all of it, and nothing twice.
    def crash(*args, **kwargs):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(embed_transforms, "store_vector_files", crash)
    with pytest.raises(RuntimeError, match="worker lost"):
        main(embed)
    monkeypatch.undo()
    capsys.readouterr()
    assert not list((output / "embeddings").rglob("part-*.parquet"))

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
