"""``chunkmill query``: the chunks of a pgvector index nearest to a question
(``chunkmill.pipeline.query``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkmill import backends, vector_index
from chunkmill.pipeline.options import DEFAULT_OUTPUT, Parser, UsageError, absolute, location


@dataclass(frozen=True)
class QuerySettings:
    question: str
    url: str
    table: str
    k: int
    output: str
    model: str | None
    as_json: bool
    backend: str | None = None  # None: the store's model.json's, else torch


def build_parser() -> Parser:
    parser = Parser(
        prog="chunkmill query",
        description="Print the chunks of a pgvector table nearest to TEXT, embedded with the "
        "model the table's vectors were made with. Reads only.",
        allow_abbrev=False,
    )
    parser.add_argument("question", metavar="TEXT", help="the question")
    parser.add_argument(
        "--to", required=True, metavar="URL", help="the database: postgresql://USER@HOST/DB"
    )
    parser.add_argument(
        "--table", default=vector_index.DEFAULT_TABLE, help="the index table (default: %(default)s)"
    )
    parser.add_argument("--k", type=int, default=5, help="hits to print (default: 5)")
    model = parser.add_mutually_exclusive_group()
    model.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        type=location,
        help="the output the table was synced from: its embedding store names the model "
        "(default: ./out)",
    )
    model.add_argument(
        "--model", help="the model's folder (a sentence-transformers folder), instead of --output"
    )
    parser.add_argument(
        "--backend",
        help="what runs the model, as the vectors were embedded (chunkmill embed --backend: "
        f"{', '.join(backends.BACKENDS)}; default: the one the embedding store records, else "
        "torch)",
    )
    parser.add_argument("--json", action="store_true", help="print the hits as JSON")
    return parser


def parse(argv: Sequence[str]) -> QuerySettings:
    args = build_parser().parse_args(list(argv))
    if args.backend is not None:
        try:
            backends.parse_backend(args.backend)
        except backends.BackendUnavailable as e:
            raise UsageError(str(e)) from None
    if not args.to.startswith(("postgresql://", "postgres://")):
        raise UsageError(f"--to {args.to}: not a postgresql:// URL")
    if args.k < 1:
        raise UsageError(f"--k must be at least 1, not {args.k}")
    if not args.question.strip():
        raise UsageError("TEXT is empty: give the question to search for")
    output = absolute(args.output).rstrip("/") or "/"
    return QuerySettings(
        args.question,
        args.to,
        args.table,
        args.k,
        output,
        args.model,
        bool(args.json),
        args.backend,
    )


def main(argv: Sequence[str]) -> int:
    settings = parse(argv)
    from chunkmill.pipeline import query

    return query.query(settings)
