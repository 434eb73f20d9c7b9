"""``--config FILE.toml``: a run's flags kept in a file (the nightly command line).

Keys are the flag names without their dashes (``max-tokens = 512``, ``input = ["docs/**"]``,
``prior-manifest = "auto"``); Beam's flags go in a ``[beam]`` table (``runner =
"DataflowRunner"``, ``temp_location = "gs://..."``) or, verbatim, in a ``beam-args`` list. A
flag also given on the command line is taken from the command line, the file's value is
dropped (a repeatable flag such as ``--input`` included). The file becomes command-line
arguments read by the very same parser, so every flag ``chunkmill run`` has, including one
added later, works in the file with no code here, and is checked the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from chunkmill.pipeline.options import UsageError
from chunkmill.pipeline.usage import beam_parser, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (pyproject.toml installs tomli there)
    import tomli as tomllib

FLAG = "--config"
BEAM_TABLE = "beam"
BEAM_ARGS = "beam-args"
# Keys that would make no sense in a file.
_NOT_IN_FILE = frozenset({"config", "help"})


def config_path(argv: Sequence[str]) -> str | None:
    """The value of the last ``--config`` in ``argv``, if any."""
    path = None
    for i, arg in enumerate(argv):
        if arg == FLAG:
            if i + 1 >= len(argv):
                raise UsageError(f"argument {FLAG}: expected one argument")
            path = argv[i + 1]
        elif arg.startswith(FLAG + "="):
            path = arg.split("=", 1)[1]
    return path


def apply(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` of ``run``/``plan`` (without the command word) with the flags of its
    ``--config`` file put in front of it, except those the command line gives itself.
    ``parser`` is ``run``'s (``chunkmill.pipeline.commands.run``). Raises ``UsageError``
    naming the file and key."""
    path = config_path(argv)
    if path is None:
        return list(argv)
    table = _load(path)
    flags = {o: a for a in parser._actions for o in a.option_strings if o.startswith("--")}
    given = _given(argv)
    out: list[str] = []
    for key, value in table.items():
        where = f"argument {FLAG}: {path}: "
        if key == BEAM_TABLE:
            out += _beam_table(value, given, where)
            continue
        if key == BEAM_ARGS:
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise UsageError(where + f"{BEAM_ARGS} must be a list of strings")
            out += value
            continue
        action = flags.get("--" + key)
        if action is None or key in _NOT_IN_FILE:
            keys = [f[2:] for f in flags if f[2:] not in _NOT_IN_FILE] + [BEAM_TABLE, BEAM_ARGS]
            raise UsageError(where + f"unknown key {key!r}{did_you_mean(key, keys)}")
        if given & set(action.option_strings):
            continue  # the command line's value wins
        out += _tokens(f"--{key}", value, action, where)
    return [*out, *argv]


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise UsageError(f"argument {FLAG}: cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"argument {FLAG}: {path} is not valid TOML: {e}") from None


def _given(argv: Sequence[str]) -> set[str]:
    """The flags the command line names (``--x`` and ``--x=v`` alike)."""
    return {a.split("=", 1)[0] for a in argv if a.startswith("--")}


def _beam_table(table: Any, given: set[str], where: str) -> list[str]:
    if not isinstance(table, dict):
        raise UsageError(where + f"{BEAM_TABLE} must be a table ([{BEAM_TABLE}])")
    beam = {o: a for a in beam_parser()._actions for o in a.option_strings}
    out: list[str] = []
    for key, value in table.items():
        flag = f"--{key}"
        action = beam.get(flag)
        if action is None:
            hint = did_you_mean(key, [f[2:] for f in beam if f.startswith("--")])
            raise UsageError(where + f"[{BEAM_TABLE}] unknown Beam flag {key!r}{hint}")
        if given & set(action.option_strings):
            continue
        out += _tokens(flag, value, action, where)
    return out


def _tokens(flag: str, value: Any, action: argparse.Action, where: str) -> list[str]:
    """Command-line arguments for one key: ``--flag=value`` (``--flag=a --flag=b`` for a
    list, where the flag is repeatable); a flag that takes no value is written when true."""
    if action.nargs == 0:
        if not isinstance(value, bool):
            raise UsageError(where + f"{flag[2:]} takes true or false, got {value!r}")
        return [flag] if value else []
    # A plain store keeps its last value only; append-like actions (argparse's append,
    # Beam's comma-separated lists) gather every one.
    if isinstance(value, list) and isinstance(action, argparse._StoreAction):
        raise UsageError(where + f"{flag[2:]} takes one value, got a list")
    out = []
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, (dict, list)):
            raise UsageError(where + f"{flag[2:]} takes a value or a list of values, got {v!r}")
        # --flag=value, so that a value starting with "-" is not read as a flag.
        out.append(f"{flag}={v}")
    return out
