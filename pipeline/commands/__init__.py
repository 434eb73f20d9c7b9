"""The commands of ``chunkmill``, one module each. A command's module owns its parser
(``build_parser``: a ``chunkmill.pipeline.options.Parser``, the one parser class of every
command), its ``parse(argv)`` (the command line into settings, touching no storage) and its
``main(argv) -> int`` (checks against storage, ``chunkmill.pipeline.preflight``, then the
work). ``chunkmill.pipeline.cli`` imports a command's module only when that command runs:
``chunkmill --help`` lists them from ``COMMANDS`` alone.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from chunkmill.pipeline.options import Parser

# Every command, in the order `chunkmill --help` lists them, with its line there.
COMMANDS = {
    "run": "chunk a corpus and diff it against the prior run",
    "plan": "what `run` would do with the same flags: documents new, changed, unchanged and "
    "removed, and the chunks and tokens to embed; reads no document, writes nothing",
    "report": "summarise a finished run as an HTML page beside it (OUTPUT/runs/RUN/report.html)",
    "runs": "list the runs under an output prefix, or delete old ones",
    "embed": "embed the chunks of a run that the embedding store lacks for a model",
    "export": "write a run's whole current state, with its text, to one folder",
    "sync": "make a pgvector table equal to LATEST's state",
    "verify": "compare a pgvector table with LATEST's state; --repair mends it",
    "query": "print the chunks of a pgvector table nearest to a question",
    "eval": "measure how well chunks serve retrieval on questions with known evidence",
}


def build_parser() -> Parser:
    """``chunkmill`` itself: ``--version``, and the commands listed (each parses its own
    flags: ``chunkmill run --help``)."""
    from chunkmill.versions import chunkmill_version

    parser = Parser(
        prog="chunkmill",
        description="Incremental chunking of a document corpus into Parquet tables.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"chunkmill {chunkmill_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, text in COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def module(name: str) -> ModuleType:
    """The module of the command ``name`` (one of ``COMMANDS``)."""
    return importlib.import_module(f"{__name__}.{name}")
