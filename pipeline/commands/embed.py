"""``chunkmill embed``: the vectors of a run's current chunks, for one model, in the store
(what is embedded and how: ``chunkmill.pipeline.embed``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkmill import backends, embedding
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
    backend: str = backends.DEFAULT_BACKEND
    device: str = "auto"
    max_batch_tokens: int = backends.DEFAULT_MAX_BATCH_TOKENS
    compile: str = "auto"


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
        "--backend",
        default=backends.DEFAULT_BACKEND,
        help="what runs the model: torch (default), onnx, onnx-int8, openvino, openvino-bf16 "
        "or openvino-int8 (exported once into the cache; each has its own model key: "
        "docs/embedding-backends.md)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda, or auto (default: cuda when torch sees a GPU, else cpu)",
    )
    parser.add_argument(
        "--compile",
        default="auto",
        help="auto (default), on or off: run torch on the CPU through torch.compile, the same "
        "vectors faster after a compile of about half a minute; auto compiles when the "
        "embed's tokens repay it (docs/embedding-backends.md)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="most texts per model call (default: 64)"
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=backends.DEFAULT_MAX_BATCH_TOKENS,
        help="most padded tokens per model call, texts sorted by length: bounds a batch's "
        f"memory (default: {backends.DEFAULT_MAX_BATCH_TOKENS})",
    )
    parser.add_argument(
        "--texts-per-file",
        type=int,
        default=DEFAULT_TEXTS_PER_FILE,
        help="vectors committed to the store per file, as they are made: what a killed "
        f"embed keeps (default: {DEFAULT_TEXTS_PER_FILE})",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be embedded, in tokens and in time at the rate measured last",
    )
    return parser


def parse(argv: Sequence[str]) -> EmbedSettings:
    args, beam_args = parse_beam_command(build_parser(), argv)
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, not {args.batch_size}")
    if args.texts_per_file < 1:
        raise UsageError(f"--texts-per-file must be at least 1, not {args.texts_per_file}")
    if args.max_batch_tokens < 1:
        raise UsageError(f"--max-batch-tokens must be at least 1, not {args.max_batch_tokens}")
    try:
        backends.parse_backend(args.backend)
        if args.device not in backends.DEVICES:
            backends.pick_device(args.device)  # refuses in one line
        backends.check_compile_mode(args.compile)
    except backends.BackendUnavailable as e:
        raise UsageError(str(e)) from None
    output = absolute(args.output).rstrip("/") or "/"
    return EmbedSettings(
        output,
        args.run,
        args.model,
        args.batch_size,
        args.texts_per_file,
        args.dry_run,
        tuple(beam_args),
        args.backend,
        args.device,
        args.max_batch_tokens,
        args.compile,
    )


def main(argv: Sequence[str]) -> int:
    settings = parse(argv)
    from chunkmill.pipeline import embed

    return embed.embed(settings)
