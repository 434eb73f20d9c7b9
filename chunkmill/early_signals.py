"""Ctrl-C or SIGTERM in the first moments of ``chunkmill``, before the command's own answer
(``chunkmill.pipeline.interrupts``) is in place, is answered the same way: one line, exit
130 / 143, no traceback. Python's default would print a ``KeyboardInterrupt`` traceback
from whichever import it interrupted (importing the CLI takes a tenth of a second or more),
or end silently on SIGTERM.

Installed by ``chunkmill/__init__.py`` before it imports anything else, and only when the
process is the chunkmill command (``python -m chunkmill`` or the console script): a program
that imports chunkmill keeps its own handlers. The few milliseconds of the interpreter's own
start-up, before any chunkmill code runs, are beyond reach.
"""

from __future__ import annotations

# The built-in module under ``signal``: ``signal`` imports ``enum``, which alone can take
# longer than the window this module closes.
import _signal
import os
import sys

SIGNAL_NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM"}
# The exit status of a process ended by a signal, as a shell reports it (128 + the number).
EXIT_CODES = {_signal.SIGINT: 130, _signal.SIGTERM: 143}
# The console script's file names (pip writes ``chunkmill``; ``.exe`` and ``-script.py`` on
# Windows).
_SCRIPT_NAMES = frozenset({"chunkmill", "chunkmill.exe", "chunkmill-script.py"})
# Interpreter flags that take a value as the next argument (``python -X importtime -m ...``).
_FLAGS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})


def is_the_command(argv: list[str], orig_argv: list[str]) -> bool:
    """Whether this process is ``chunkmill``: ``orig_argv`` (the interpreter's own command
    line) runs the module ``chunkmill``, or ``argv[0]`` is the console script."""
    if argv and os.path.basename(argv[0]) in _SCRIPT_NAMES:
        return True
    args = iter(orig_argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None) == "chunkmill"
        if arg.startswith("-m"):
            return arg[2:] == "chunkmill"
        if arg in _FLAGS_WITH_VALUE:
            next(args, None)
        elif arg == "-c" or not arg.startswith("-") or arg == "-":
            return False  # a command, a script or stdin runs, not the module
    return False


def answer(signum: int, frame: object) -> None:
    """One line on stderr, then the process ends as a signal would have ended it."""
    name = SIGNAL_NAMES.get(signum, f"signal {signum}")
    command = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].isalpha() else ""
    line = f"chunkmill: {command + ' ' if command else ''}interrupted ({name})\n"
    try:
        os.write(2, line.encode("utf-8", "backslashreplace"))
    finally:
        os._exit(EXIT_CODES.get(signum, 128 + signum))


def install_if_command() -> bool:
    """Installs ``answer`` for SIGINT and SIGTERM when this process is the chunkmill command
    (``is_the_command``) and signals are its main thread's to handle; returns whether it
    did."""
    if not is_the_command(sys.argv, list(getattr(sys, "orig_argv", []))):
        return False
    try:
        for signum in EXIT_CODES:
            _signal.signal(signum, answer)
    except ValueError:  # not the main thread of the main interpreter
        return False
    return True
