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
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from chunkmill import embedding, index_guard
from chunkmill.pipeline import runners
from chunkmill.pipeline.options import (
    Parser,
    UsageError,
    absolute,
    beam_command_parser,
    parse_beam_command,
)

# Vectors committed per file: what a killed embed keeps (a few seconds of a CPU's work).
DEFAULT_TEXTS_PER_FILE = 1024


@dataclass(frozen=True)
class EmbedSettings:
    output: str
    run_id: str | None
    model: str
    batch_size: int
    texts_per_file: int
    dry_run: bool
    beam_args: tuple[str, ...]


def build_parser() -> Parser:
    parser = beam_command_parser(
        "embed", "Embed the chunks of a run that the embedding store lacks for a model."
    )
    parser.add_argument(
        "--model",
        default=embedding.DEFAULT_MODEL,
        help=f"{embedding.DEFAULT_MODEL} (default, from its package) or the path of a "
        "sentence-transformers folder",
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="texts per model call (default: 64)"
    )
    parser.add_argument(
        "--texts-per-file",
        type=int,
        default=DEFAULT_TEXTS_PER_FILE,
        help="vectors committed to the store per file, as they are made: what a killed "
        f"embed keeps (default: {DEFAULT_TEXTS_PER_FILE})",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be embedded, in tokens"
    )
    return parser


def parse_embed(argv: Sequence[str]) -> EmbedSettings:
    args, beam_args = parse_beam_command(build_parser(), argv)
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, not {args.batch_size}")
    if args.texts_per_file < 1:
        raise UsageError(f"--texts-per-file must be at least 1, not {args.texts_per_file}")
    output = absolute(args.output).rstrip("/") or "/"
    return EmbedSettings(
        output,
        args.run,
        args.model,
        args.batch_size,
        args.texts_per_file,
        args.dry_run,
        tuple(beam_args),
    )


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


def needed(output: str, run_id: str | None, key: str) -> Needed:
    """The hashes of ``run_id`` (default LATEST) that the store lacks for ``key``."""
    from chunkmill.pipeline.runs import state_files
    from chunkmill.transforms import embedstore, tables

    state = state_files(output, run_id)
    parts = list(tables.read_parquet_batches(state.manifest, ["chunk_hash", "token_count"]))
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
    )


def command(argv: Sequence[str]) -> int:
    """``chunkmill embed``."""
    settings = parse_embed(argv)
    try:
        model = embedding.describe(settings.model)
        if not settings.dry_run:
            embedding.check_runtime()
    except embedding.ModelUnavailable as e:
        raise UsageError(str(e)) from None
    if settings.dry_run:
        todo = needed(settings.output, settings.run_id, model.key)
        print(f"{_head(todo, model)}; would embed {len(todo.hashes)} chunks, {todo.tokens} tokens")
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
        return _embed_claimed(settings, model)


def _head(todo: Needed, model: embedding.Model) -> str:
    return (
        f"run {todo.run_id}, model {model.name} (key {model.key}): "
        f"{todo.live} chunks live, {todo.stored} embedded already"
        + (f", {len(todo.damaged)} damaged vector files" if todo.damaged else "")
    )


def _damaged_line(path: str) -> str:
    return f"{path} is damaged (it fails its checksum): its chunks count as not embedded"


def _embed_claimed(settings: EmbedSettings, model: embedding.Model) -> int:
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
        _embed(settings, model, todo)
        left = _not_in_files(settings.output, model.key, todo.hashes, before)
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


def _embed(settings: EmbedSettings, model: embedding.Model, todo: Needed) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from chunkmill.transforms.embed import EmbedTexts, ReadTextsToEmbed

    options = PipelineOptions(runners.local_engine(settings.beam_args))
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | "ReadTexts" >> ReadTextsToEmbed(todo.chunks_files, todo.hashes)
            | "EmbedAndStore"
            >> EmbedTexts(
                settings.output, model, todo.hashes, settings.batch_size, settings.texts_per_file
            )
        )
