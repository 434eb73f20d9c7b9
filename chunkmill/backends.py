"""Inference backends for the embedding model: torch (sentence-transformers), ONNX Runtime and
OpenVINO, in float32 or quantized (docs/embedding-backends.md).

A backend is named ``RUNTIME`` or ``RUNTIME-PRECISION``: ``torch``, ``onnx``, ``onnx-int8``,
``openvino``, ``openvino-bf16``, ``openvino-int8``. Every backend but ``torch`` runs a graph
exported from the model folder once, offline, into the cache (``cache_root``): the whole
sentence-transformers model (transformer, pooling, any ``Dense``, normalisation) as one ONNX
graph, so the vectors are the model's own and no pooling is re-implemented here. A second
load finds the export in the cache and does not export again. ``openvino-int8`` runs that
graph quantized statically by NNCF, calibrated on chunks of the bundled sample corpus
(``calibration_texts``), kept in the cache beside it.

Vectors of one backend are never mixed with another's: each backend but ``torch`` has its own
model key (``variant_key``), derived from the folder's key, so ``torch`` keeps the key stores
already hold.

All backends share one encoding loop (``Encoder.encode``): texts sorted by token length,
cut into batches of at most ``batch_size`` texts and ``max_batch_tokens`` padded tokens, so
that a batch of long texts fits memory the same as a batch of short ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import util
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_BACKEND = "torch"
# What each backend needs installed (module names), and the extra that brings it.
_RUNTIMES = {
    "torch": ("sentence_transformers", "torch"),
    "onnx": ("onnxruntime", "onnx", "torch"),
    "openvino": ("openvino", "onnx", "torch"),
}
_QUANTIZER = "nncf"  # what openvino-int8 needs besides its runtime's modules
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-bf16", "openvino-int8")
DEVICES = ("cpu", "cuda", "auto")
# Bumped when an export recipe changes what a backend computes: part of the variant's key.
EXPORT_RECIPE = 1
# Padded tokens per model call (texts x longest text in the batch): 64 texts of 256 tokens.
DEFAULT_MAX_BATCH_TOKENS = 16384
ONNX_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"
STATIC_INT8_FILE = "model-int8-static.xml"  # OpenVINO IR, beside its .bin
# Calibration of openvino-int8: chunks of the sample corpus at these chars4 token budgets,
# every CALIBRATION_STEP-th of them, in batches of CALIBRATION_BATCH texts.
CALIBRATION_BUDGETS = (40, 100, 200)
CALIBRATION_STEP = 3
CALIBRATION_BATCH = 4
# torch.compile of the torch backend (``--compile``; docs/embedding-backends.md, "Compiled
# torch"): auto compiles when the embed's tokens repay the compile. Measured on 2 cores with
# all-MiniLM-L6-v2: the compile costs COMPILE_SECONDS_COLD seconds in a fresh process, of
# which the C++ builds (kept in the inductor cache) are the difference to COMPILE_SECONDS_WARM;
# the compiled model then runs COMPILED_SPEEDUP times eager's EAGER_TOKENS_PER_SECOND.
COMPILE_MODES = ("auto", "on", "off")
COMPILE_SECONDS_COLD = 35.0
COMPILE_SECONDS_WARM = 27.0
EAGER_TOKENS_PER_SECOND = 4400.0
COMPILED_SPEEDUP = 1.27


class BackendUnavailable(ValueError):
    """A backend's libraries or a device are missing: one line naming the flag."""


@dataclass(frozen=True)
class Backend:
    runtime: str  # torch | onnx | openvino
    precision: str  # fp32 | int8 | bf16

    @property
    def name(self) -> str:
        return self.runtime if self.precision == "fp32" else f"{self.runtime}-{self.precision}"


def parse_backend(name: str) -> Backend:
    """``torch``, ``onnx``, ``onnx-int8``, ``openvino``, ``openvino-bf16`` or
    ``openvino-int8``."""
    if name not in BACKENDS:
        raise BackendUnavailable(f"--backend {name}: choose one of {', '.join(BACKENDS)}")
    runtime, _, precision = name.partition("-")
    return Backend(runtime, precision or "fp32")


def check_backend(backend: Backend) -> None:
    """``BackendUnavailable`` when the libraries ``backend`` runs on are not installed."""
    needed = _RUNTIMES[backend.runtime]
    if backend.name == "openvino-int8":
        needed += (_QUANTIZER,)
    missing = [m for m in needed if util.find_spec(m) is None]
    if missing:
        extra = "embed" if backend.runtime == "torch" else "backends"
        raise BackendUnavailable(
            f"--backend {backend.name} needs {', '.join(missing)}: pip install 'chunkmill[{extra}]'"
        )


def variant_key(base_key: str, backend: Backend) -> str:
    """The model key of the vectors ``backend`` makes from the folder whose key is
    ``base_key``: the folder's key itself for ``torch``, else a digest of it, the backend and
    the export recipe."""
    if backend.name == DEFAULT_BACKEND:
        return base_key
    seed = f"{base_key}\0{backend.name}\0recipe-{EXPORT_RECIPE}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def pick_device(asked: str, cuda_available: Callable[[], bool] | None = None) -> str:
    """``cpu`` or ``cuda``: ``auto`` is CUDA when torch sees a GPU, else the CPU; ``cuda``
    without one is refused in one line."""
    if asked not in DEVICES:
        raise BackendUnavailable(f"--device {asked}: choose one of {', '.join(DEVICES)}")
    if asked == "cpu":
        return "cpu"
    if cuda_available is None:
        cuda_available = _torch_cuda_available
    if cuda_available():
        return "cuda"
    if asked == "cuda":
        raise BackendUnavailable("--device cuda: torch sees no CUDA device here (try auto)")
    return "cpu"


def _torch_cuda_available() -> bool:
    if util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def check_device(backend: Backend, device: str) -> None:
    """Only torch runs on CUDA here (the ONNX and OpenVINO exports run on the CPU)."""
    if device == "cuda" and backend.runtime != "torch":
        raise BackendUnavailable(
            f"--backend {backend.name} runs on the CPU: use --device cpu, or --backend torch"
        )


# ---------------------------------------------------------------------------------------------
# The cache of exports


def cache_root() -> Path:
    """Where exports are kept: ``$CHUNKMILL_CACHE``, else ``$XDG_CACHE_HOME/chunkmill``, else
    ``~/.cache/chunkmill``."""
    if os.environ.get("CHUNKMILL_CACHE"):
        return Path(os.environ["CHUNKMILL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "chunkmill"


def export_dir(base_key: str, backend: Backend) -> Path:
    """The cache folder of ``backend``'s export of the model keyed ``base_key``."""
    return cache_root() / "models" / base_key / f"onnx-recipe-{EXPORT_RECIPE}"


def onnx_export(path: Path, base_key: str, backend: Backend) -> Path:
    """The ONNX file ``backend`` runs, exported from the folder ``path`` (keyed ``base_key``)
    into the cache on first use; later calls find it there. Written whole (a temporary folder
    renamed), so a killed export leaves nothing half-done."""
    folder = export_dir(base_key, backend)
    fp32 = folder / ONNX_FILE
    if not fp32.is_file():
        _export_fp32(path, folder)
    if backend.precision != "int8":
        return fp32
    int8 = folder / INT8_FILE
    if not int8.is_file():
        _quantize_int8(fp32, int8)
    return int8


def _export_fp32(path: Path, folder: Path) -> None:
    import torch

    from chunkmill import embedding

    print(f"chunkmill: exporting {path} to ONNX in {folder} (once)", file=sys.stderr)
    model = embedding.load(path, "cpu")
    model.eval()
    names = _input_names(model)
    sample = model.tokenize(["an example sentence to trace", "two"])
    args = tuple(sample[n] for n in names)
    graph = _WholeModel(model, names)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=folder.parent))
    try:
        dynamic = {n: {0: "batch", 1: "tokens"} for n in names}
        with torch.no_grad():
            torch.onnx.export(
                graph,
                args,
                str(work / ONNX_FILE),
                input_names=list(names),
                output_names=["sentence_embedding"],
                dynamic_axes={**dynamic, "sentence_embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        (work / "export.json").write_text(
            json.dumps({"inputs": list(names), "source": str(path), "recipe": EXPORT_RECIPE})
        )
        if folder.exists():  # another process finished first
            shutil.rmtree(work)
        else:
            work.rename(folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _input_names(model: Any) -> tuple[str, ...]:
    tokens = model.tokenize(["x"])
    return tuple(n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokens)


def _whole_model_class() -> type:
    import torch

    class WholeModel(torch.nn.Module):
        """The sentence-transformers model as a function of its token tensors."""

        def __init__(self, model: Any, names: Sequence[str]) -> None:
            super().__init__()
            self.model = model
            self.names = list(names)

        def forward(self, *tensors: Any) -> Any:
            features = dict(zip(self.names, tensors, strict=True))
            return self.model(features)["sentence_embedding"]

    return WholeModel


def _WholeModel(model: Any, names: Sequence[str]) -> Any:  # noqa: N802 - a class, made late
    return _whole_model_class()(model, names)


def _quantize_int8(fp32: Path, int8: Path) -> None:
    """Dynamic int8 quantization of the weights of the matrix products, per output channel
    (docs/embedding-backends.md says which choices were measured)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    print(f"chunkmill: quantizing {fp32} to int8 (once)", file=sys.stderr)
    partial = int8.with_name(f".{int8.name}.{os.getpid()}.tmp")
    quantize_dynamic(
        str(fp32),
        str(partial),
        per_channel=True,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
    )
    partial.replace(int8)


def static_int8_export(path: Path, base_key: str) -> Path:
    """The OpenVINO IR ``openvino-int8`` runs: the float32 ONNX export of ``path`` (keyed
    ``base_key``), quantized statically into the cache on first use; later calls find it."""
    fp32_backend = Backend("onnx", "fp32")
    folder = export_dir(base_key, fp32_backend)
    fp32 = onnx_export(path, base_key, fp32_backend)
    ir = folder / STATIC_INT8_FILE
    if not ir.is_file():
        _quantize_static(path, fp32, ir)
    return ir


def calibration_texts() -> list[str]:
    """The texts ``openvino-int8`` is calibrated on: the bundled sample corpus's text files
    (PDFs left out) cut by the ``paragraph`` strategy at several budgets, so that short and
    long chunks are both seen; every ``CALIBRATION_STEP``-th, in a fixed order."""
    import chunkmill.pipeline
    from chunkmill.chunking import make_chunker

    sample = Path(chunkmill.pipeline.__file__).resolve().parent / "sample_corpus"
    files = sorted(p for p in sample.rglob("*") if p.is_file() and p.suffix != ".pdf")
    if not files:  # a broken install: calibrating on nothing is no quantization
        raise BackendUnavailable(
            f"openvino-int8 is calibrated on the sample corpus: {sample} is empty"
        )
    documents = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    texts = []
    for budget in CALIBRATION_BUDGETS:
        chunker = make_chunker("paragraph", max_tokens=budget, overlap_tokens=0)
        for document in documents:
            texts += [document[s.start : s.end] for s in chunker.split(document)]
    return [t for t in texts if t.strip()][::CALIBRATION_STEP]


def _quantize_static(path: Path, fp32: Path, ir: Path) -> None:
    """Post-training static int8 quantization with NNCF (its transformer recipe: SmoothQuant,
    int8 weights per channel and activations per tensor on the matrix products, fast bias
    correction; softmax, layer norm and GELU kept in float), calibrated on
    ``calibration_texts``. docs/embedding-backends.md says which choices were measured."""
    import contextlib
    import logging

    import nncf
    import openvino as ov

    print(f"chunkmill: quantizing {fp32} to static int8 (once, about a minute)", file=sys.stderr)
    nncf.set_log_level(logging.ERROR)
    tokenizer = _GraphEncoder(path, Backend("openvino", "int8"))
    model = ov.Core().read_model(str(fp32))
    names = [i.get_any_name() for i in model.inputs]
    texts = calibration_texts()
    batches = [texts[i : i + CALIBRATION_BATCH] for i in range(0, len(texts), CALIBRATION_BATCH)]

    def feed(batch: list[str]) -> dict[str, np.ndarray]:
        tokens = tokenizer.tokenize(batch)
        return {n: tokens[n].astype(np.int64) for n in names}

    work = Path(tempfile.mkdtemp(prefix=".quantize-", dir=ir.parent))
    try:
        with contextlib.redirect_stdout(sys.stderr):  # NNCF's progress bars
            quantized = nncf.quantize(
                model,
                nncf.Dataset(batches, feed),
                model_type=nncf.ModelType.TRANSFORMER,
                subset_size=len(batches),
            )
        ov.save_model(quantized, str(work / ir.name))
        bin_file = ir.with_suffix(".bin")
        (work / bin_file.name).replace(bin_file)
        (work / ir.name).replace(ir)  # last: the .xml's presence says the pair is whole
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Encoders


class Encoder:
    """Encodes texts with one backend; ``encode`` is sentence-transformers' own signature, for
    callers written against it. A call tokenizes its texts once (``tokenize``): their lengths
    sort and cut the batches, and each batch is a slice of those tokens."""

    backend: Backend
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        """The model's inputs for ``texts``, truncated to its window and padded to the longest
        (``attention_mask`` marks the tokens)."""
        raise NotImplementedError

    def run_tokens(self, tokens: dict[str, Any]) -> np.ndarray:
        """The vectors of one batch, from its slice of ``tokenize``'s inputs."""
        raise NotImplementedError

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in the model's tokens, truncated to its window."""
        return [int(n) for n in np.asarray(self.tokenize(texts)["attention_mask"]).sum(axis=1)]

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
        **_: Any,
    ) -> np.ndarray:
        one = isinstance(sentences, str)
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        vectors = np.zeros((0, 0), np.float32)
        if texts:
            tokens = self.tokenize(texts)
            lengths = np.asarray(tokens["attention_mask"]).sum(axis=1)
            order = np.argsort(-lengths, kind="stable")
            sorted_lengths = [int(n) for n in lengths[order]]
            parts = []
            for batch in token_batches(sorted_lengths, batch_size, self.max_batch_tokens):
                rows = order[batch.start : batch.stop]
                width = max(sorted_lengths[batch.start], 1)
                parts.append(self.run_tokens(_rows(tokens, rows, width, len(texts))))
            ordered = np.concatenate(parts).astype(np.float32, copy=False)
            vectors = np.empty_like(ordered)
            vectors[order] = ordered
        if normalize_embeddings and len(vectors):
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors[0] if one else vectors


def _rows(tokens: dict[str, Any], rows: np.ndarray, width: int, count: int) -> dict[str, Any]:
    """The inputs of the texts ``rows`` of ``tokens`` (``count`` texts), cut to ``width``
    tokens: what tokenizing those texts alone, padded to their longest, gives. Entries that
    are not per text (a modality name) are kept whole."""
    batch = {}
    for name, value in tokens.items():
        shape: tuple[int, ...] = tuple(getattr(value, "shape", ()))
        if shape[:1] == (count,):
            value = value[rows]
            if len(shape) >= 2:
                value = value[:, :width]
        batch[name] = value
    return batch


def token_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[range]:
    """Consecutive index ranges of ``lengths`` (sorted longest first), each at most
    ``batch_size`` texts and at most ``max_tokens`` padded tokens (texts times the first
    text's length); a text longer than ``max_tokens`` alone is a batch of one."""
    batches: list[range] = []
    start = 0
    while start < len(lengths):
        longest = max(lengths[start], 1)
        count = max(1, min(batch_size, max_tokens // longest))
        batches.append(range(start, min(start + count, len(lengths))))
        start += count
    return batches


def compile_break_even(warm: bool) -> int:
    """The tokens an embed must have for the compile to repay itself: the compile's seconds
    (``warm``: its C++ builds found in the cache) over the seconds a token saves."""
    seconds = COMPILE_SECONDS_WARM if warm else COMPILE_SECONDS_COLD
    saved = 1 / EAGER_TOKENS_PER_SECOND - 1 / (EAGER_TOKENS_PER_SECOND * COMPILED_SPEEDUP)
    return int(seconds / saved)


def check_compile_mode(mode: str) -> None:
    """``BackendUnavailable``, naming the flag, unless ``mode`` is one of ``COMPILE_MODES``."""
    if mode not in COMPILE_MODES:
        raise BackendUnavailable(f"--compile {mode}: choose one of {', '.join(COMPILE_MODES)}")


def should_compile(mode: str, backend: Backend, device: str, tokens: int, cache: Path) -> bool:
    """Whether ``backend`` on ``device`` runs compiled (``TorchEncoder``): ``on`` and ``off``
    as said; ``auto`` when the embed's ``tokens`` repay the compile, its cost the smaller
    when ``cache`` holds a former compile's builds (``compile_break_even``). Only torch on
    the CPU compiles."""
    check_compile_mode(mode)
    if backend.runtime != "torch" or device != "cpu" or mode == "off":
        return False
    return mode == "on" or tokens >= compile_break_even(compile_cache_warm(cache))


def inductor_cache_dir(base_key: str) -> Path:
    """Where the compiled torch model of the folder keyed ``base_key`` keeps inductor's
    on-disk caches (its C++ builds): beside the folder's exports, per torch version."""
    import torch

    digest = hashlib.sha256(f"torch\0{torch.__version__}".encode()).hexdigest()[:16]
    return cache_root() / "models" / base_key / "compiled" / f"torch-inductor-{digest}"


def compile_cache_warm(cache: Path) -> bool:
    """Whether ``cache`` holds a former compile's builds."""
    return cache.is_dir() and any(cache.iterdir())


class TorchEncoder(Encoder):
    """sentence-transformers on torch: its own tokenizing (``preprocess``) and forward pass,
    as its ``encode`` runs them, on the device the model was loaded on.

    With ``compile_cache`` (a folder, ``inductor_cache_dir``), the forward pass runs through
    ``torch.compile`` (inductor, frozen weights, shapes dynamic), compiled at load on a
    sample batch with inductor's caches in that folder, so a second process finds the C++
    builds there. A compile that fails (no C compiler, an operator inductor cannot lower)
    leaves the model eager, in one line on stderr. Batches of one text or of one token run
    eager: compiled, they would be compiled again for that shape."""

    def __init__(self, path: Path, device: str, compile_cache: Path | None = None) -> None:
        from chunkmill import embedding

        self.backend = Backend("torch", "fp32")
        self.model = embedding.load(path, device)
        self.model.eval()
        self.tokenizer = self.model.tokenizer
        self.max_seq_length = self.model.max_seq_length
        self.names = _input_names(self.model)
        self.compiled: Any = None
        if compile_cache is not None:
            self.compiled = self._compile(compile_cache)

    def _compile(self, cache: Path) -> Any:
        import torch

        started = time.monotonic()
        try:
            cache.mkdir(parents=True, exist_ok=True)
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
            compiled = torch.compile(_WholeModel(self.model, self.names), dynamic=True)
            sample = self.tokenize(["a sample text to compile the model on", "and another"])
            self._run_compiled(compiled, sample)
        except Exception as e:  # noqa: BLE001 - any failure of the compiler leaves eager
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            print(f"chunkmill: torch.compile failed ({reason}); embedding eager", file=sys.stderr)
            return None
        seconds = time.monotonic() - started
        print(f"chunkmill: compiled the model in {seconds:.0f} s (cache {cache})", file=sys.stderr)
        return compiled

    def _run_compiled(self, compiled: Any, tokens: dict[str, Any]) -> Any:
        import torch
        import torch._inductor.config

        with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
            return compiled(*(tokens[n] for n in self.names))

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        return dict(self.model.preprocess(list(texts)))

    def run_tokens(self, tokens: dict[str, Any]) -> np.ndarray:
        import torch

        device = self.model.device
        features = {k: v.to(device) if hasattr(v, "to") else v for k, v in tokens.items()}
        if self.compiled is not None and min(features[self.names[0]].shape) >= 2:
            vectors = self._run_compiled(self.compiled, features)
        else:
            with torch.inference_mode():
                vectors = self.model(features)["sentence_embedding"]
        return vectors.float().cpu().numpy()


class _GraphEncoder(Encoder):
    """An exported graph: texts tokenized as sentence-transformers tokenizes them (stripped,
    truncated to the model's window, padded to the batch's longest). A folder with a
    ``tokenizer.json`` is tokenized by the ``tokenizers`` library directly, the same ids as
    transformers' fast tokenizer gives without the seconds of importing transformers
    (docs/embedding-backends.md, "Fixed costs"); any other folder by transformers."""

    def __init__(self, path: Path, backend: Backend) -> None:
        self.backend = backend
        bert = path / "sentence_bert_config.json"
        config = json.loads(bert.read_text()) if bert.is_file() else {}
        self.lowercase = bool(config.get("do_lower_case"))
        self._fast: Any = None
        self.tokenizer: Any = None
        if (path / "tokenizer.json").is_file():
            self._fast, window, self._pad = _fast_tokenizer(path)
        else:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            window = self.tokenizer.model_max_length
        self.max_seq_length = int(config.get("max_seq_length") or window)
        if self._fast is not None:
            self._fast.enable_truncation(self.max_seq_length)
            self._fast.enable_padding(pad_id=self._pad[0], pad_token=self._pad[1])

    def _clean(self, texts: Sequence[str]) -> list[str]:
        return [t.strip().lower() if self.lowercase else t.strip() for t in texts]

    def tokenize(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        if self._fast is not None:
            encodings = self._fast.encode_batch(self._clean(texts))
            return {
                "input_ids": np.array([e.ids for e in encodings], np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], np.int64),
            }
        return dict(
            self.tokenizer(
                self._clean(texts),
                padding=True,
                truncation="longest_first",
                max_length=self.max_seq_length,
                return_tensors="np",
            )
        )


def _fast_tokenizer(path: Path) -> tuple[Any, int, tuple[int, str]]:
    """The folder's ``tokenizer.json`` as the ``tokenizers`` library reads it, its window
    (``model_max_length`` of ``tokenizer_config.json``) and its padding token (id, token), as
    transformers would set them."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    settings_file = path / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
    pad = settings.get("pad_token") or "[PAD]"
    pad = pad.get("content", "[PAD]") if isinstance(pad, dict) else str(pad)
    pad_id = tokenizer.token_to_id(pad)
    window = int(settings.get("model_max_length") or 512)
    return tokenizer, window, (pad_id if pad_id is not None else 0, pad)


class OnnxEncoder(_GraphEncoder):
    def __init__(self, path: Path, base_key: str, backend: Backend, threads: int = 0) -> None:
        import onnxruntime as ort

        super().__init__(path, backend)
        graph = onnx_export(path, base_key, backend)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def run_tokens(self, tokens: dict[str, Any]) -> np.ndarray:
        feed = {n: np.ascontiguousarray(tokens[n], np.int64) for n in self.inputs}
        return np.asarray(self.session.run(None, feed)[0])


class OpenVinoEncoder(_GraphEncoder):
    """OpenVINO's CPU plugin on the ONNX export, in float32 (pinned: the plugin would pick
    bf16 by itself on a CPU that has it) or bf16; or on its static int8 quantization
    (``int8``), whose operators left in float run in float32."""

    def __init__(self, path: Path, base_key: str, backend: Backend, threads: int = 0) -> None:
        import openvino as ov

        super().__init__(path, backend)
        if backend.precision == "int8":
            graph = static_int8_export(path, base_key)
        else:
            graph = onnx_export(path, base_key, Backend("onnx", "fp32"))
        core = ov.Core()
        config: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": "bf16" if backend.precision == "bf16" else "f32",
            "PERFORMANCE_HINT": "LATENCY",
        }
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        if backend.precision == "bf16" and "BF16" not in core.get_property(
            "CPU", "OPTIMIZATION_CAPABILITIES"
        ):
            raise BackendUnavailable("--backend openvino-bf16: this CPU has no bf16 support")
        self.cache = compiled_cache_dir(graph, backend, ov.get_version())
        self.compiled = _compile_cached(core, graph, config, self.cache)
        self.inputs = [i.get_any_name() for i in self.compiled.inputs]

    def run_tokens(self, tokens: dict[str, Any]) -> np.ndarray:
        feed = {n: np.ascontiguousarray(tokens[n], np.int64) for n in self.inputs}
        return np.asarray(self.compiled(feed)[0])


def compiled_cache_dir(graph: Path, backend: Backend, runtime_version: str) -> Path:
    """Where OpenVINO keeps ``backend``'s compiled ``graph`` (its ``CACHE_DIR``): beside the
    export, in a folder of its own per backend, named by a digest of the graph's files (name,
    size, modification time), the backend and the runtime's version, so that one backend or
    quantization never loads another's blob, nor a blob of an older export or runtime."""
    files = [graph, graph.with_suffix(".bin")] if graph.suffix == ".xml" else [graph]
    stats = [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    seed = "\0".join([backend.name, runtime_version, *stats])
    digest = hashlib.sha256(seed.encode()).hexdigest()[:16]
    return graph.parent / "compiled" / f"{backend.name}-{digest}"


def _compile_cached(core: Any, graph: Path, config: dict[str, Any], cache: Path) -> Any:
    """``graph`` compiled for the CPU through OpenVINO's cache in ``cache``: the first load
    compiles it and writes the blob, later ones import the blob (docs/embedding-backends.md,
    "Fixed costs"). A cache that does not load (a blob cut short, a folder that cannot be
    written) is emptied and the graph compiled again; without a cache as a last resort."""
    for _ in range(2):  # a cache that fails twice: compile without one
        try:
            cache.mkdir(parents=True, exist_ok=True)
            return core.compile_model(str(graph), "CPU", {**config, "CACHE_DIR": str(cache)})
        except (RuntimeError, OSError) as e:
            reason = (str(e).splitlines() or [type(e).__name__])[0]
            print(
                f"chunkmill: the compiled model in {cache} did not load ({reason}); "
                "compiling again",
                file=sys.stderr,
            )
            shutil.rmtree(cache, ignore_errors=True)
    return core.compile_model(str(graph), "CPU", config)


def load_encoder(
    path: Path,
    base_key: str,
    backend: Backend,
    device: str = "cpu",
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    compiled: bool = False,
) -> Encoder:
    """The model in ``path`` ready to encode with ``backend`` on ``device``; torch through
    ``torch.compile`` when ``compiled`` (``should_compile``)."""
    check_backend(backend)
    check_device(backend, device)
    encoder: Encoder
    if backend.runtime == "torch":
        cache = inductor_cache_dir(base_key) if compiled else None
        encoder = TorchEncoder(path, device, cache)
    elif backend.runtime == "onnx":
        encoder = OnnxEncoder(path, base_key, backend)
    else:
        encoder = OpenVinoEncoder(path, base_key, backend)
    encoder.max_batch_tokens = max_batch_tokens
    return encoder


class Progress:
    """Tokens per second and the time left, on stderr, at most every ``every`` seconds."""

    def __init__(self, total_tokens: int, every: float = 10.0, out: Any = None) -> None:
        self.total = total_tokens
        self.done = 0
        self.every = every
        self.started = time.monotonic()
        self.shown = self.started
        self.out = out if out is not None else sys.stderr

    def add(self, tokens: int) -> None:
        self.done += tokens
        now = time.monotonic()
        if now - self.shown >= self.every:
            self.shown = now
            print(self.line(now), file=self.out, flush=True)

    def rate(self, now: float | None = None) -> float:
        seconds = (now if now is not None else time.monotonic()) - self.started
        return self.done / seconds if seconds > 0 else 0.0

    def line(self, now: float) -> str:
        rate = self.rate(now)
        left = (self.total - self.done) / rate if rate else float("inf")
        return (
            f"chunkmill: embedded {self.done:,} of {self.total:,} tokens, "
            f"{rate:,.0f} tokens/s, about {format_seconds(left)} left"
        )


def format_seconds(seconds: float) -> str:
    if seconds == float("inf"):
        return "? s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
