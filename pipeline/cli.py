"""``chunkmill`` (and ``python -m chunkmill``): finds the command and hands it its arguments.
Each command parses, checks and runs in its own module (``chunkmill.pipeline.commands``).

Beam, pyarrow and the parsers take a second or more to import, so this module imports a
command's module only when that command runs, and the commands import them only once their
command line parsed: ``--help``, ``--version`` and a usage error answer at once
(tests/unit/test_cli_startup.py keeps it so).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from chunkmill.pipeline import commands
from chunkmill.pipeline.commands import COMMANDS
from chunkmill.pipeline.options import UsageError
from chunkmill.pipeline.usage import COMMAND_CUTOFF, did_you_mean


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["--version"]:
            from chunkmill.versions import chunkmill_version

            print(f"chunkmill {chunkmill_version()}")
            return 0
        if not argv or argv[0] in ("-h", "--help"):
            commands.build_parser().parse_args(argv or ["--help"])
        from chunkmill.pipeline import logs

        logs.configure(logs.level_from_argv(argv[1:]))
        from chunkmill import quiet

        quiet.quiet_model_loading()
        if argv[0] not in COMMANDS:
            raise UsageError(
                f"unknown command {argv[0]!r}{did_you_mean(argv[0], COMMANDS, COMMAND_CUTOFF)} "
                f"(commands: {', '.join(COMMANDS)})"
            )
        from chunkmill.pipeline import interrupts, memory_pool

        memory_pool.choose()  # before any command imports pyarrow
        with interrupts.handled(argv[0]):
            return int(commands.module(argv[0]).main(argv[1:]))
    except UsageError as e:
        print(f"chunkmill: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
