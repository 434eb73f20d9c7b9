"""``chunkmill embed``: the vectors of a run's current chunks, for one model, in the store.

What is embedded: every hash the run's manifest lists (its whole current state) that the
store holds no vector of for the model's key. On a nightly run with the same model that is
the run's new hashes; with another model (another key) it is the whole live set, which
``--dry-run`` prices in tokens first. Texts come from the chunks/ tables of the finished runs
(a hash's text is in the run that first chunked it; ``runs gc`` keeps those).

An embed works under the key's claim (``embedstore.claim``): a second embed of the same
model at once refuses in one line. Under it, what a killed embed left is tidied, and a vector
file that fails its check is moved aside (``KEY/damaged/``): its hashes count as not embedded
(``--dry-run`` says so too) and are embedded again.

``--backend`` picks what runs the model (``chunkmill.backends``: torch, ONNX Runtime,
OpenVINO, float32 or quantized); each backend but torch has its own key, so its vectors are a
store of their own. While it embeds, the command prints tokens per second and the time left
on stderr; at the end it records the rate it measured beside the vectors (``rate.json``),
which ``--dry-run`` uses to price the time of the next embed of that key.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import backends, embedding, index_guard
from chunkmill.pipeline import runners
from chunkmill.pipeline.options import UsageError

if TYPE_CHECKING:
    from chunkmill.pipeline.commands.embed import EmbedSettings

# The measured rate of the last embed of a key, beside its vectors.
RATE_FILE = "rate.json"
# Seconds between two progress lines on stderr.
PROGRESS_EVERY = 15.0


@dataclass(frozen=True)
class Needed:
    """What a run needs embedded for one key."""

    run_id: str
    live: int  # distinct hashes the run's manifest lists
    stored: int  # of those, held by the store already
    hashes: pa.Array  # the rest: to embed
    tokens: int  # their token count (as the run counted it)
    chunks_files: list[str]  # the chunks/ files of the finished runs, newest run first
    damaged: list[str]  # vector files that failed their check: their hashes count as absent
    token_counts: pa.Array  # the token count of each of ``hashes``


def needed(output: str, run_id: str | None, key: str) -> Needed:
    """The hashes of ``run_id`` (default LATEST) that the store lacks for ``key``."""
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import embedstore, parquet_io

    state = state_files(output, run_id)
    parts = list(parquet_io.read_parquet_batches(state.manifest, ["chunk_hash", "token_count"]))
    columns = {"chunk_hash": pa.array([], pa.string()), "token_count": pa.array([], pa.int32())}
    table = pa.concat_tables(parts) if parts else pa.table(columns)
    per_hash = table.group_by("chunk_hash").aggregate([("token_count", "min")])
    store = embedstore.scan(output, key)
    stored = store.hashes
    todo = per_hash.filter(pc.invert(pc.is_in(per_hash["chunk_hash"], value_set=stored)))
    return Needed(
        run_id=state.run_id,
        live=per_hash.num_rows,
        stored=per_hash.num_rows - todo.num_rows,
        hashes=todo["chunk_hash"].combine_chunks(),
        tokens=pc.sum(todo["token_count_min"]).as_py() or 0,
        chunks_files=state.chunks,
        damaged=store.damaged,
        token_counts=todo["token_count_min"].combine_chunks(),
    )


def embed(settings: EmbedSettings) -> int:
    """``chunkmill embed`` with its settings parsed (``chunkmill.pipeline.commands.embed``)."""
    try:
        model = embedding.describe(settings.model, settings.backend)
        if not settings.dry_run:
            embedding.check_runtime(settings.backend)
            device = backends.pick_device(settings.device)
            backends.check_device(backends.parse_backend(model.backend), device)
    except (embedding.ModelUnavailable, backends.BackendUnavailable) as e:
        raise UsageError(str(e)) from None
    if settings.dry_run:
        todo = needed(settings.output, settings.run_id, model.key)
        print(
            f"{_head(todo, model)}; would embed {len(todo.hashes)} chunks, {todo.tokens} tokens"
            + _priced(settings.output, model.key, todo.tokens)
        )
        for path in todo.damaged:
            print(f"chunkmill: {_damaged_line(path)}; embed moves it aside", file=sys.stderr)
        from chunkmill.transforms import embedstore

        try:
            embedstore.read_model_info(settings.output, model.key)
        except embedstore.StoreDamaged as e:
            print(f"chunkmill: {e}", file=sys.stderr)
        return 0
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import embedstore

    state_files(settings.output, settings.run_id)  # no run: one line, before the claim
    try:
        held = embedstore.claim(settings.output, model.key, model.name, settings.run_id or "")
    except embedstore.EmbedBusy as e:
        raise UsageError(str(e)) from None
    with embedstore.holding(held):
        return _embed_claimed(settings, model, device)


def _head(todo: Needed, model: embedding.Model) -> str:
    return (
        f"run {todo.run_id}, model {model.name}"
        + (f" on {model.backend}" if model.backend != backends.DEFAULT_BACKEND else "")
        + f" (key {model.key}): "
        f"{todo.live} chunks live, {todo.stored} embedded already"
        + (f", {len(todo.damaged)} damaged vector files" if todo.damaged else "")
    )


def _damaged_line(path: str) -> str:
    return f"{path} is damaged (it fails its checksum): its chunks count as not embedded"


def _priced(output: str, key: str, tokens: int) -> str:
    """``, about T at R tokens/s (measured DATE on BACKEND/DEVICE)`` from the rate the last
    embed of ``key`` recorded; a hint when none did."""
    if not tokens:
        return ""
    rate = read_rate(output, key)
    if rate is None:
        return " (no embed of this key has run yet: its time is priced after the first)"
    seconds = tokens / rate["tokens_per_second"]
    return (
        f", about {backends.format_seconds(seconds)} at {rate['tokens_per_second']:,.0f} "
        f"tokens/s (measured {rate['measured']} on {rate['device']})"
    )


def read_rate(output: str, key: str) -> dict | None:
    """The rate the last embed of ``key`` recorded, or None (none ran, or its record does
    not read)."""
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.transforms import embedstore, runstate

    path = FileSystems.join(embedstore.store_dir(output, key), RATE_FILE)
    try:
        rate = json.loads(runstate.read_text(path)) if FileSystems.exists(path) else None
        return rate if rate and float(rate["tokens_per_second"]) > 0 else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def write_rate(output: str, key: str, tokens: int, seconds: float, device: str) -> None:
    """Records the rate of an embed that embedded ``tokens`` in ``seconds`` (only a long
    enough one: a few texts measure the model's loading, not its speed)."""
    from datetime import datetime, timezone

    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.transforms import embedstore

    if tokens < 10_000 or seconds <= 0:
        return
    record = {
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "tokens_per_second": round(tokens / seconds, 1),
        "device": device,
        "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    }
    path = FileSystems.join(embedstore.store_dir(output, key), RATE_FILE)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(json.dumps(record).encode())


def _embed_claimed(settings: EmbedSettings, model: embedding.Model, device: str) -> int:
    """The embed, under the key's claim: the store tidied, damaged files set aside, the
    missing hashes embedded."""
    from chunkmill.transforms import embedstore

    started = time.monotonic()
    embedstore.tidy(settings.output, model.key)
    todo = needed(settings.output, settings.run_id, model.key)
    for path in todo.damaged:
        moved = embedstore.set_aside(settings.output, model.key, path)
        print(f"chunkmill: {_damaged_line(path)}; moved to {moved}", file=sys.stderr)
    head = _head(todo, model)
    _record_model(settings.output, model)
    left = todo.hashes
    if len(todo.hashes):
        before = set(embedstore.part_paths(settings.output, model.key))
        embedding_started = time.monotonic()
        with _progress(settings.output, model.key, before, todo):
            _embed(settings, model, todo, device)
        left = _not_in_files(settings.output, model.key, todo.hashes, before)
        if not len(left):
            spent = time.monotonic() - embedding_started
            write_rate(settings.output, model.key, todo.tokens, spent, device)
    seconds = time.monotonic() - started
    print(f"{head}; embedded {len(todo.hashes) - len(left)} chunks in {seconds:.1f} s")
    if len(left):
        print(
            f"chunkmill: {len(left)} live chunks have no text in any run's chunks/ "
            f"(a run folder was deleted by hand); {index_guard.LOST_TEXT_REMEDY}",
            file=sys.stderr,
        )
        return 1
    return 0


def _not_in_files(output: str, key: str, hashes: pa.Array, before: set[str]) -> pa.Array:
    """The hashes of ``hashes`` that no vector file written since ``before`` holds (each of
    those read back and checked; the files checked before the embed are not read again)."""
    from chunkmill.transforms import embedstore

    written = [
        chunk
        for path in embedstore.part_paths(output, key)
        if path not in before
        for chunk in embedstore.read_part(output, key, path, ["chunk_hash"])["chunk_hash"].chunks
    ]
    made = pa.chunked_array(written, pa.string())
    return hashes.filter(pc.invert(pc.is_in(hashes, value_set=made)))


def _record_model(output: str, model: embedding.Model) -> None:
    """``model.json`` before any vector; a damaged one written again (the key is the
    model's files: what it records is what the model says). A record of another dimension is
    replaced when the key holds no vector (a release that misread a ``Dense`` layer wrote it,
    then crashed), and refused when it does."""
    from chunkmill.transforms import embedstore

    try:
        recorded = embedstore.read_model_info(output, model.key)
    except embedstore.StoreDamaged as e:
        embedstore.replace_model_info(output, model.key, model.info())
        print(f"chunkmill: {e.path} was damaged; written again", file=sys.stderr)
        return
    if recorded is None:
        embedstore.write_model_info(output, model.key, model.info())
    elif recorded.get("dimension") != model.dimension:
        if embedstore.part_paths(output, model.key):
            raise UsageError(
                f"the store of model {model.name} (key {model.key}) records dimension "
                f"{recorded.get('dimension')}, the model makes {model.dimension}: move "
                f"{embedstore.store_dir(output, model.key)} aside and embed again"
            )
        embedstore.replace_model_info(output, model.key, model.info())


class _progress:  # noqa: N801 - used as a context manager
    """Prints tokens/s and the time left on stderr every ``PROGRESS_EVERY`` seconds while the
    pipeline runs: the tokens of the hashes in the vector files committed since ``before``
    (whatever runner, whichever process wrote them)."""

    def __init__(self, output: str, key: str, before: set[str], todo: Needed) -> None:
        self._output, self._key, self._before = output, key, before
        self._todo = todo
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        from chunkmill.transforms import embedstore

        counted: set[str] = set()
        tokens_of: dict[str, int] | None = None
        progress = backends.Progress(self._todo.tokens, every=0)
        while not self._stop.wait(PROGRESS_EVERY):
            try:
                new = [
                    p
                    for p in embedstore.part_paths(self._output, self._key)
                    if p not in self._before and p not in counted
                ]
                if tokens_of is None and new:
                    tokens_of = _token_counts(self._todo)
                for path in new:
                    hashes = embedstore.read_part(self._output, self._key, path, ["chunk_hash"])
                    progress.done += sum(
                        (tokens_of or {}).get(h, 0) for h in hashes["chunk_hash"].to_pylist()
                    )
                    counted.add(path)
            except Exception:  # a file renamed or tidied under us: counted next time
                continue
            print(progress.line(time.monotonic()), file=sys.stderr, flush=True)


def _token_counts(todo: Needed) -> dict[str, int]:
    """The token count of each hash to embed (as the run counted it)."""
    return dict(zip(todo.hashes.to_pylist(), todo.token_counts.to_pylist(), strict=True))


def _embed(
    settings: EmbedSettings, model: embedding.Model, todo: Needed, device: str = "cpu"
) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from chunkmill.transforms.embed import EmbedTexts, ReadTextsToEmbed

    runs_on = backends.parse_backend(model.backend)
    compiled = runs_on.runtime == "torch" and backends.should_compile(
        settings.compile,
        runs_on,
        device,
        todo.tokens,
        backends.inductor_cache_dir(model.folder_key or model.key),
    )
    options = PipelineOptions(runners.local_engine(settings.beam_args))
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | "ReadTexts" >> ReadTextsToEmbed(todo.chunks_files, todo.hashes)
            | "EmbedAndStore"
            >> EmbedTexts(
                settings.output,
                model,
                todo.hashes,
                settings.batch_size,
                settings.texts_per_file,
                device,
                settings.max_batch_tokens,
                compiled,
            )
        )
