"""``chunkmill sync``: a pgvector index made equal to LATEST's state
(``chunkmill.pipeline.sync``). ``chunkmill verify`` takes the same flags but ``--full`` and
``--ann``, and ``--repair`` (``chunkmill.pipeline.commands.verify``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkmill import index_guard, vector_index
from chunkmill.pipeline.options import DEFAULT_OUTPUT, Parser, UsageError, absolute, location


@dataclass(frozen=True)
class SyncSettings:
    output: str
    url: str
    table: str
    model_key: str | None
    repair: bool
    full: bool = False
    max_delete_ratio: float = index_guard.DEFAULT_MAX_DELETE_RATIO
    allow_rewind: bool = False
    take_over: bool = False
    ann: str = index_guard.DEFAULT_ANN


def build_parser(command: str = "sync") -> Parser:
    """The parser of ``sync`` or, with ``command`` "verify", of ``verify``."""
    parser = Parser(prog=f"chunkmill {command}", allow_abbrev=False)
    parser.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    parser.add_argument(
        "--to", required=True, metavar="URL", help="the database: postgresql://USER@HOST/DB"
    )
    parser.add_argument(
        "--table", default=vector_index.DEFAULT_TABLE, help="the index table (default: %(default)s)"
    )
    parser.add_argument(
        "--model-key",
        help="the vectors to use: a key under OUTPUT/embeddings/ (default: the only one)",
    )
    if command == "verify":
        parser.add_argument("--repair", action="store_true", help="mend the drift found")
    else:
        parser.add_argument(
            "--full",
            action="store_true",
            help="compare the whole index with the whole state, even when the runs since the "
            "index's run could be applied alone",
        )
    _guard_flags(parser, command)
    return parser


def parse(argv: Sequence[str], command: str = "sync") -> SyncSettings:
    args = build_parser(command).parse_args(list(argv))
    if not args.to.startswith(("postgresql://", "postgres://")):
        raise UsageError(f"--to {args.to}: not a postgresql:// URL")
    if not 0 <= args.max_delete_ratio <= 1:
        raise UsageError(f"--max-delete-ratio {args.max_delete_ratio:g}: not between 0 and 1")
    output = absolute(args.output).rstrip("/") or "/"
    return SyncSettings(
        output,
        args.to,
        args.table,
        args.model_key,
        bool(getattr(args, "repair", False)),
        bool(getattr(args, "full", False)),
        1.0 if args.allow_mass_delete else args.max_delete_ratio,
        args.allow_rewind,
        args.take_over,
        getattr(args, "ann", "none"),
    )


def _guard_flags(parser: Parser, command: str) -> None:
    """The flags that let an apply past a guard (``chunkmill.index_guard``)."""
    parser.add_argument(
        "--max-delete-ratio",
        type=float,
        default=index_guard.DEFAULT_MAX_DELETE_RATIO,
        metavar="R",
        help="refuse to delete more than this share of the table's rows in one apply "
        f"(tables of {index_guard.MIN_GUARDED_ROWS} rows or more; default: %(default)s)",
    )
    parser.add_argument(
        "--allow-mass-delete", action="store_true", help="delete whatever the state says"
    )
    parser.add_argument(
        "--allow-rewind",
        action="store_true",
        help="apply LATEST's run even when it is older than the run the table holds",
    )
    parser.add_argument(
        "--take-over",
        action="store_true",
        help="make the table this output's when another output's sync made it",
    )
    if command == "sync":
        parser.add_argument(
            "--ann",
            choices=index_guard.ANN_METHODS,
            default=index_guard.DEFAULT_ANN,
            help="the ANN index built on the vectors when the table has none "
            "(default: %(default)s)",
        )


def main(argv: Sequence[str], command: str = "sync") -> int:
    import psycopg  # noqa: F401 - the postgres extra: without it, this fails first

    from chunkmill.pipeline import sync

    return sync.command(command, parse(argv, command))
