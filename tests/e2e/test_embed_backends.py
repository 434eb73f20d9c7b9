"""``chunkmill embed --backend`` with the real model on a small run: each backend's vectors are
stored under its own key, with a ``model.json`` naming the backend, and agree with torch's
within docs/embedding-backends.md's tolerance; ``chunkmill query`` embeds the question with the
backend the table's vectors were made with, and refuses another in one line."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from chunkmill import backends, embedding
from chunkmill.pipeline.cli import main
from chunkmill.transforms import embedstore
from tests.e2e import tiny_index
from tests.pg import postgres  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow

# docs/embedding-backends.md: the largest absolute difference per component (float32 exports),
# else the smallest cosine of a vector to torch's (quantized ones).
TOLERANCE = {"onnx": ("abs", 1e-5), "openvino-int8": ("cosine", 0.97)}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One export cache for the module, made from the local model folder with the hub off."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("cache")
        patch.setenv("CHUNKMILL_CACHE", str(folder))
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield folder


@pytest.fixture(scope="module")
def index(tmp_path_factory, postgres, cache):  # noqa: F811
    """The tiny corpus run, embedded with onnx and synced; torch's vectors beside them."""
    built = tiny_index.build(tmp_path_factory.mktemp("onnx"), postgres, backend="onnx")
    assert main(["embed", "--output", str(built.output), "--backend", "torch"]) == 0
    return built


def vectors(output, key: str) -> dict[str, np.ndarray]:
    table = pa.concat_tables(embedstore.read_vectors(str(output), key))
    hashes = table["chunk_hash"].to_pylist()
    return dict(zip(hashes, np.asarray(table["vector"].to_pylist(), np.float32), strict=True))


@pytest.mark.parametrize("backend", sorted(TOLERANCE))
def test_a_backend_stores_its_own_key_and_vectors_that_agree_with_torchs(index, backend, capsys):
    output = index.output
    if backend != "onnx":
        assert main(["embed", "--output", str(output), "--backend", backend]) == 0
    capsys.readouterr()
    model = embedding.describe(backend=backend)
    torch_key = embedding.describe().key
    assert model.key != torch_key
    assert {p.name for p in (output / "embeddings").iterdir()} >= {model.key, torch_key}
    info = embedstore.read_model_info(str(output), model.key)
    assert info is not None
    assert info["backend"] == backend and info["folder_key"] == torch_key

    got, expected = vectors(output, model.key), vectors(output, torch_key)
    assert got.keys() == expected.keys() and len(got) == len(index.manifest)
    kind, bound = TOLERANCE[backend]
    for chunk_hash, vector in got.items():
        reference = expected[chunk_hash]
        if kind == "abs":
            assert np.abs(vector - reference).max() < bound
        else:
            cosine = vector @ reference / np.linalg.norm(vector) / np.linalg.norm(reference)
            assert cosine >= bound


def test_query_embeds_with_the_tables_backend_and_refuses_another(index, capsys):
    base = ["query", tiny_index.QUESTION, "--to", index.url, "--json", "--k", "1"]
    # The store's model.json names the backend: no flag needed.
    assert main([*base, "--output", str(index.output)]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["model_key"] == index.model.key
    assert tiny_index.ANSWER in found["hits"][0]["text"]
    # The question's vector is onnx's: the score is the cosine with the chunk's stored vector.
    encoder = embedding.load_encoder(index.model)
    question = encoder.encode(tiny_index.QUESTION)
    stored = vectors(index.output, index.model.key)[found["hits"][0]["chunk_hash"]]
    cosine = question @ stored / np.linalg.norm(question) / np.linalg.norm(stored)
    assert abs(found["hits"][0]["score"] - cosine) < 1e-4

    # --model with the backend named: the same answer.
    folder = str(index.model.path)
    assert main([*base, "--model", folder, "--backend", "onnx"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"] == found["hits"]

    # Another backend, with --output or --model: one line naming the flag, exit 2.
    for given in (["--output", str(index.output)], ["--model", folder]):
        assert main([*base, *given, "--backend", "torch"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1
        assert "--backend onnx" in captured.err
    assert main([*base, "--backend", "tensorflow"]) == 2
    assert "--backend tensorflow" in capsys.readouterr().err


def test_an_export_is_made_from_the_local_folder_into_the_cache(index, cache):
    model = embedding.describe(backend="openvino-int8")
    embedding.load_encoder(model)
    folder = backends.export_dir(model.folder_key, backends.parse_backend("openvino-int8"))
    assert folder.is_relative_to(cache)
    assert (folder / backends.STATIC_INT8_FILE).is_file()
    export = json.loads((folder / "export.json").read_text())
    assert export["source"] == str(model.path)
    # Found again, not made again.
    made = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    embedding.load_encoder(model)
    assert {f.name: f.stat().st_mtime_ns for f in folder.iterdir()} == made
