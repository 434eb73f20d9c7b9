"""Backends: each has its own model key, the device is chosen as documented, batches keep
to their token budget, and an export is made once, offline, and gives torch's vectors."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

from chunkmill import backends, embedding


def test_each_backend_has_its_own_key_and_torch_keeps_the_folders():
    keys = {b: embedding.describe(backend=b).key for b in backends.BACKENDS}
    assert len(set(keys.values())) == len(backends.BACKENDS)
    assert keys["torch"] == embedding.model_key(embedding.model_path())


@pytest.mark.parametrize(
    ("asked", "cuda", "picked"),
    [("cpu", True, "cpu"), ("auto", True, "cuda"), ("auto", False, "cpu"), ("cuda", True, "cuda")],
)
def test_the_device_choice(asked, cuda, picked):
    assert backends.pick_device(asked, lambda: cuda) == picked


def test_cuda_without_a_gpu_and_a_cpu_backend_on_cuda_are_refused():
    with pytest.raises(backends.BackendUnavailable, match="--device cuda"):
        backends.pick_device("cuda", lambda: False)
    with pytest.raises(backends.BackendUnavailable, match="--backend onnx"):
        backends.check_device(backends.parse_backend("onnx"), "cuda")


def test_batches_keep_to_the_token_budget_and_the_batch_size():
    lengths = [256, 200, 100, 100, 50, 10, 10, 10]
    batches = backends.token_batches(lengths, 3, 300)
    assert [list(b) for b in batches] == [[0], [1], [2, 3, 4], [5, 6, 7]]
    assert [i for b in batches for i in b] == list(range(len(lengths)))


def test_an_export_is_made_once_offline_and_matches_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKMILL_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*_args, **_kwargs):
        raise AssertionError("the export reached for the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    texts = ["a short one", "  a longer sentence about embedding chunks of text  ", "x" * 50]
    expected = embedding.load_encoder(embedding.describe()).encode(texts)
    model = embedding.describe(backend="onnx")
    got = embedding.load_encoder(model).encode(texts)
    assert np.abs(got - expected).max() < 1e-5  # docs/embedding-backends.md's tolerance
    graph = backends.export_dir(model.folder_key, backends.parse_backend("onnx"))
    assert graph.is_relative_to(tmp_path)
    assert json.loads((graph / "export.json").read_text())["source"] == str(model.path)
    made = (graph / backends.ONNX_FILE).stat().st_mtime_ns
    embedding.load_encoder(model)
    assert (graph / backends.ONNX_FILE).stat().st_mtime_ns == made  # found, not exported again


def test_int8_calibration_texts_are_the_sample_corpus_chunks_in_a_fixed_order():
    texts = backends.calibration_texts()
    assert 200 <= len(texts) <= 500 and all(t.strip() for t in texts)
    assert texts == backends.calibration_texts()
    sample = Path(__file__).parents[2] / "pipeline" / "sample_corpus"
    files = [p for p in sample.rglob("*") if p.is_file() and p.suffix != ".pdf"]
    documents = [p.read_text(errors="replace") for p in files]
    assert all(any(t in d for d in documents if d) for t in texts)
    assert len({len(t) // 200 for t in texts}) >= 3  # short and long chunks both


def test_graph_tokenizing_gives_transformers_ids_with_or_without_tokenizer_json(tmp_path):
    from transformers import AutoTokenizer

    path = embedding.model_path()
    texts = ["  Héllo, WORLD!  ", "short", "a long text " * 300, "naïve café\tdéjà vu"]
    fast = backends._GraphEncoder(path, backends.parse_backend("openvino"))
    assert fast._fast is not None  # the folder has a tokenizer.json
    without = tmp_path / "model"
    shutil.copytree(path, without)
    (without / "tokenizer.json").unlink()
    slow = backends._GraphEncoder(without, backends.parse_backend("openvino"))
    assert slow._fast is None
    reference = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    clean = [t.strip().lower() for t in texts]
    want = reference(clean, padding=True, truncation=True, max_length=256, return_tensors="np")
    for encoder in (fast, slow):
        got = encoder.tokenize(texts)
        assert sorted(got) == sorted(want)
        for name in want:
            assert got[name].tolist() == want[name].tolist(), name
        assert encoder.lengths(texts) == [int(m.sum()) for m in want["attention_mask"]]
    assert max(fast.lengths(texts)) == 256


def test_openvino_finds_its_compiled_model_in_the_cache_and_rebuilds_a_damaged_one(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CHUNKMILL_CACHE", str(tmp_path))
    model = embedding.describe(backend="openvino")
    texts = ["a short one", "a longer sentence about embedding chunks of text"]
    first = embedding.load_encoder(model)
    assert first.cache.is_relative_to(tmp_path)
    assert not first.compiled.get_property("LOADED_FROM_CACHE")
    expected = first.encode(texts)
    second = embedding.load_encoder(model)
    assert second.compiled.get_property("LOADED_FROM_CACHE")
    assert np.array_equal(second.encode(texts), expected)
    for blob in first.cache.iterdir():
        blob.write_bytes(b"not a compiled model")
    rebuilt = embedding.load_encoder(model)
    assert not rebuilt.compiled.get_property("LOADED_FROM_CACHE")
    assert np.array_equal(rebuilt.encode(texts), expected)
    assert embedding.load_encoder(model).compiled.get_property("LOADED_FROM_CACHE")


def test_each_backend_compiles_into_a_cache_of_its_own(tmp_path):
    graph = tmp_path / "model.xml"
    graph.write_text("<net/>")
    graph.with_suffix(".bin").write_bytes(b"weights")
    folders = {
        backends.compiled_cache_dir(graph, backends.parse_backend(name), "2026.1")
        for name in ("openvino", "openvino-bf16", "openvino-int8")
    }
    assert len(folders) == 3 and all(f.parent == tmp_path / "compiled" for f in folders)
    openvino = backends.parse_backend("openvino")
    before = backends.compiled_cache_dir(graph, openvino, "2026.1")
    assert before != backends.compiled_cache_dir(graph, openvino, "2027.0")
    graph.with_suffix(".bin").write_bytes(b"other weights")  # a new export, another blob
    assert before != backends.compiled_cache_dir(graph, openvino, "2026.1")


def test_a_cache_that_cannot_be_written_still_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKMILL_CACHE", str(tmp_path))
    model = embedding.describe(backend="openvino")
    cache = embedding.load_encoder(model).cache
    shutil.rmtree(cache)
    cache.write_text("a file where the cache folder goes")
    encoder = embedding.load_encoder(model)
    assert encoder.encode(["text"]).shape == (1, model.dimension)


def test_auto_compiles_torch_on_the_cpu_when_the_tokens_repay_the_compile(tmp_path):
    torch_, onnx = backends.parse_backend("torch"), backends.parse_backend("onnx")
    cold, warm = backends.compile_break_even(False), backends.compile_break_even(True)
    assert 0 < warm < cold
    saved = 1 / backends.EAGER_TOKENS_PER_SECOND * (1 - 1 / backends.COMPILED_SPEEDUP)
    assert cold == pytest.approx(backends.COMPILE_SECONDS_COLD / saved, rel=1e-6)
    empty = tmp_path / "never-compiled"
    assert not backends.should_compile("auto", torch_, "cpu", cold - 1, empty)
    assert backends.should_compile("auto", torch_, "cpu", cold, empty)
    built = tmp_path / "compiled-before"
    built.mkdir()
    (built / "a-build.so").write_bytes(b"")
    assert backends.should_compile("auto", torch_, "cpu", warm, built)
    assert not backends.should_compile("auto", torch_, "cpu", warm - 1, built)
    assert backends.should_compile("on", torch_, "cpu", 0, empty)
    assert not backends.should_compile("off", torch_, "cpu", 10 * cold, built)
    assert not backends.should_compile("on", torch_, "cuda", 10 * cold, built)
    assert not backends.should_compile("on", onnx, "cpu", 10 * cold, built)
    with pytest.raises(backends.BackendUnavailable, match="--compile fast"):
        backends.should_compile("fast", torch_, "cpu", 0, empty)


def test_a_compile_that_fails_leaves_torch_eager_in_one_line(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "before"))

    def no_compiler(_module, **_options):
        def run(*_tensors):
            raise RuntimeError("C++ compile error: g++ not found\n(the compiler's output)")

        return run

    monkeypatch.setattr(torch, "compile", no_compiler)
    texts = ["a short one", "a longer sentence about embedding chunks of text"]
    encoder = backends.TorchEncoder(embedding.model_path(), "cpu", tmp_path / "compiled")
    assert encoder.compiled is None
    said = [line for line in capsys.readouterr().err.splitlines() if "chunkmill" in line]
    assert said == [
        "chunkmill: torch.compile failed (C++ compile error: g++ not found); embedding eager"
    ]
    eager = backends.TorchEncoder(embedding.model_path(), "cpu")
    assert np.array_equal(encoder.encode(texts), eager.encode(texts))


# What docs/embedding-backends.md states for compiled torch against eager torch.
COMPILED_MAX_ABS = 1e-6
COMPILED_MIN_COSINE = 0.99999


@pytest.mark.slow  # runs inductor's compiler twice (about a minute each on 2 cores)
def test_compiled_torch_gives_eager_vectors_and_a_second_process_uses_the_cache(
    tmp_path, monkeypatch
):
    import os
    import subprocess
    import sys

    monkeypatch.setenv("CHUNKMILL_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    sample = Path(__file__).parents[2] / "pipeline" / "sample_corpus"
    paragraphs = [p for f in sorted(sample.rglob("*.md")) for p in f.read_text().split("\n\n")]
    texts = [p for p in paragraphs if p.strip()][:150] + ["one", "x"]
    model = embedding.describe()
    eager = embedding.load_encoder(model).encode(texts)
    compiled = embedding.load_encoder(model, compiled=True)
    assert compiled.compiled is not None
    got = compiled.encode(texts)
    cosine = (got * eager).sum(axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(eager, axis=1)
    assert np.abs(got - eager).max() < COMPILED_MAX_ABS and cosine.min() > COMPILED_MIN_COSINE
    cache = backends.inductor_cache_dir(model.folder_key)
    assert cache.is_relative_to(tmp_path) and backends.compile_cache_warm(cache)
    assert not list((tmp_path / "elsewhere").rglob("*.so"))  # loading the model makes it, empty
    builds = {p: p.stat().st_mtime_ns for p in cache.rglob("*.so")}
    assert builds  # the C++ builds are kept in the model's folder
    script = (
        "import sys, numpy as np\n"
        "from chunkmill import embedding\n"
        "encoder = embedding.load_encoder(embedding.describe(), compiled=True)\n"
        "assert encoder.compiled is not None\n"
        "np.save(sys.argv[1], encoder.encode(sys.argv[2:]))\n"
    )
    second = tmp_path / "second.npy"
    # Told to build elsewhere, the second process still builds in (and loads from) the
    # model's folder; new shapes may add builds there, the first process's are not rebuilt.
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "elsewhere")}
    subprocess.run([sys.executable, "-c", script, str(second), *texts[:20]], check=True, env=env)
    assert {p: p.stat().st_mtime_ns for p in builds} == builds
    assert not list((tmp_path / "elsewhere").rglob("*.so"))
    assert np.abs(np.load(second) - eager[:20]).max() < COMPILED_MAX_ABS


def test_a_wrong_compile_mode_is_one_line_naming_the_flag(tmp_path, capsys):
    from chunkmill.pipeline.cli import main

    assert main(["embed", "--output", str(tmp_path), "--compile", "fast"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--compile fast" in err
