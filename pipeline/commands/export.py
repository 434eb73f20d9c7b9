"""``chunkmill export``: a run's whole current state with its text, as one table at one path
(``chunkmill.pipeline.export``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkmill.pipeline.options import (
    Parser,
    UsageError,
    absolute,
    beam_command_parser,
    location,
    parse_beam_command,
)


@dataclass(frozen=True)
class ExportSettings:
    output: str
    destination: str
    run_id: str | None
    beam_args: tuple[str, ...]


def build_parser() -> Parser:
    parser = beam_command_parser("export", "Write a run's whole current state, with text.")
    parser.add_argument(
        "--to", required=True, type=location, metavar="DESTINATION", help="folder to write to"
    )
    return parser


def parse(argv: Sequence[str]) -> ExportSettings:
    parser = build_parser()
    args, beam_args = parse_beam_command(parser, argv)
    output = absolute(args.output).rstrip("/") or "/"
    destination = absolute(args.to).rstrip("/") or "/"
    if destination == output or destination.startswith(output + "/runs"):
        raise UsageError(f"--to {args.to}: inside the runs of --output; choose another folder")
    return ExportSettings(output, destination, args.run, tuple(beam_args))


def main(argv: Sequence[str]) -> int:
    from chunkmill.pipeline import export  # Beam: as the command always did, before parsing

    return export.export(parse(argv))
