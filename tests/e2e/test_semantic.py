"""`--strategy semantic` end to end on a tiny corpus: chunks that are slices of the text with
a boundary at the planted change of topic, the model's key in the run report, unchanged
documents carried over, and a model change re-chunking every document."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkmill import embedding
from chunkmill.chunking.tokens import load_token_counter
from tests.unit.test_semantic import CATS, MARKETS

pytestmark = pytest.mark.slow


def model_copy(folder: Path) -> Path:
    """all-MiniLM-L6-v2 with one configuration file changed (its files linked, not copied)."""
    original = embedding.model_path()
    for file in original.rglob("*"):
        if file.is_file():
            target = folder / file.relative_to(original)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(file)
    settings = folder / "sentence_bert_config.json"
    text = settings.read_text()
    settings.unlink()
    settings.write_text(text.replace("256", "128"))
    return folder


def test_a_semantic_run_splits_at_the_change_of_topic_and_rechunks_on_a_new_model(
    chunkmill, tmp_path
):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    two_topics = CATS + "\n\n" + MARKETS
    (corpus / "two-topics.txt").write_text(two_topics)
    (corpus / "cats.md").write_text("# Cats\n\n" + CATS)
    flags = ("--input", str(corpus / "*"), "--strategy", "semantic")
    flags += ("--tokenizer", "all-minilm-l6-v2")

    first = chunkmill(*flags, run_id="first")
    assert first.counts["docs_processed"] == 2
    rows = first.rows("chunks")
    assert {r["strategy"] for r in rows} == {"semantic"}
    counter = load_token_counter("all-minilm-l6-v2")
    texts = {"two-topics.txt": two_topics, "cats.md": "# Cats\n\n" + CATS}
    for r in rows:
        text = texts[Path(r["source_uri"]).name]
        assert text[r["char_start"] : r["char_end"]] == r["text"]
        assert counter(r["text"]) <= 256
    planted = sorted(
        (r["char_start"], r["char_end"]) for r in rows if r["source_uri"].endswith(".txt")
    )
    assert planted == [(0, len(CATS)), (len(CATS) + 2, len(two_topics))]
    params = first.report["chunking"]["params"]
    assert params["semantic_model"] == "all-minilm-l6-v2"
    assert params["semantic_model_key"] == embedding.model_key(embedding.model_path())

    again = chunkmill(*flags, run_id="again")
    assert again.counts["docs_carried_over"] == 2 and not again.rows("chunks")

    other = model_copy(tmp_path / "other-model")
    changed = chunkmill(*flags, "--semantic-model", str(other), run_id="changed")
    assert changed.counts["docs_processed"] == 2
    assert changed.report["chunking"]["fingerprint"] != first.report["chunking"]["fingerprint"]
