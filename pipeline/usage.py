"""Usage errors that say what to type instead: the nearest flag or command to a misspelt one.

Light on purpose (standard library only): the CLI reports a usage error without importing
Beam whenever chunkmill's own parser can decide it.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence

# How alike a misspelling and a flag must be (difflib's ratio) to be offered: close enough
# that `--max-token` finds `--max-tokens` and `--runnr` finds `--runner`, far enough that a
# flag no one has finds nothing among Beam's hundreds.
CUTOFF = 0.8
# Among the few commands, a looser match (`rnu` finds `run`).
COMMAND_CUTOFF = 0.6


def _key(flag: str) -> str:
    # Beam spells its flags with underscores, chunkmill with hyphens: compare them alike.
    return flag.split("=", 1)[0].lstrip("-").lower().replace("_", "-")


def nearest(word: str, candidates: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The candidate most like ``word`` (ignoring dashes, underscores and case), if any is
    alike enough."""
    by_key: dict[str, str] = {}
    for candidate in candidates:
        by_key.setdefault(_key(candidate), candidate)
    match = difflib.get_close_matches(_key(word), list(by_key), n=1, cutoff=cutoff)
    return by_key[match[0]] if match else None


def did_you_mean(word: str, candidates: Iterable[str], cutoff: float = CUTOFF) -> str:
    """``"; did you mean X?"`` for the nearest candidate, else ``""``."""
    match = nearest(word, candidates, cutoff)
    return f"; did you mean {match}?" if match else ""


def unrecognized(unknown: Sequence[str], candidates: Iterable[str]) -> str:
    """The message for flags no parser knows, with the nearest known flag for each."""
    candidates = list(candidates)
    flags = [u.split("=", 1)[0] for u in unknown]
    if len(flags) == 1:
        return f"unrecognized argument {flags[0]}{did_you_mean(flags[0], candidates)}"
    hints = [f"{m} for {f}" for f in flags if (m := nearest(f, candidates))]
    return f"unrecognized arguments: {' '.join(flags)}" + (
        f"; did you mean {', '.join(hints)}?" if hints else ""
    )


def parser_flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` and of its sub-commands, recursively."""
    flags: list[str] = []
    for action in parser._actions:
        flags.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                flags.extend(f for f in parser_flags(sub) if f not in flags)
    return flags


def beam_parser() -> argparse.ArgumentParser:
    """The parser Beam reads its pipeline options with (every options class imported so far).

    Imports Beam: only for a command line that has flags chunkmill's parser left to Beam.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    captured: list[argparse.ArgumentParser] = []
    # No flags given, so Beam has none to log as discarded.
    PipelineOptions([]).get_all_options(add_extra_args_fn=captured.append)
    return captured[0]


def run_and_beam_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The flags ``chunkmill run`` takes (``parser`` is its own): its own and every flag Beam
    knows."""
    beam = [f for a in beam_parser()._actions for f in a.option_strings if f.startswith("--")]
    return [*parser_flags(parser), *beam]
