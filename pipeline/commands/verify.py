"""``chunkmill verify``: a pgvector index compared with LATEST's state; ``--repair`` mends
it (``chunkmill.pipeline.sync``). Its flags are ``sync``'s (``chunkmill.pipeline.commands.sync``)
but ``--full`` and ``--ann``, and ``--repair``."""

from __future__ import annotations

from collections.abc import Sequence

from chunkmill.pipeline.commands import sync
from chunkmill.pipeline.options import Parser


def build_parser() -> Parser:
    return sync.build_parser("verify")


def parse(argv: Sequence[str]) -> sync.SyncSettings:
    return sync.parse(argv, "verify")


def main(argv: Sequence[str]) -> int:
    return sync.main(argv, "verify")
