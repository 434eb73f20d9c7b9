"""The real argparse parsers of the ``chunkmill`` console script, found the way a user finds
them: through ``--help``. Each command's parser is caught as it prints its help, so this
holds wherever a command keeps its parser."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points


class _Caught(BaseException):  # passes any "except Exception" on its way out
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def console_main() -> Callable[[list[str]], int]:
    (script,) = entry_points(group="console_scripts", name="chunkmill")
    main: Callable[[list[str]], int] = script.load()
    return main


def parser_of(command: list[str]) -> argparse.ArgumentParser:
    """The parser that answers ``chunkmill COMMAND --help`` (``[]``: the top level)."""
    original = argparse.ArgumentParser.print_help

    def catch(self: argparse.ArgumentParser, file: object = None) -> None:
        raise _Caught(self)

    argparse.ArgumentParser.print_help = catch  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            console_main()([*command, "--help"])
    except _Caught as caught:
        return caught.parser
    finally:
        argparse.ArgumentParser.print_help = original  # type: ignore[method-assign]
    raise AssertionError(f"chunkmill {' '.join(command)} --help printed no parser's help")


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def commands() -> Iterator[list[str]]:
    """Every command and sub-command: ``[run]``, ..., ``[runs, list]``, ``[runs, gc]``."""
    for name in _subcommands(parser_of([])):
        subs = _subcommands(parser_of([name]))
        if subs:
            yield from ([name, sub] for sub in subs)
        else:
            yield [name]


def flags(parser: argparse.ArgumentParser) -> list[str]:
    """The long flags a parser defines (``--help`` left out)."""
    return [
        f
        for action in parser._actions
        for f in action.option_strings
        if f.startswith("--") and f != "--help"
    ]


def beam_parser() -> argparse.ArgumentParser:
    """The parser Beam reads its pipeline options with."""
    from apache_beam.options.pipeline_options import PipelineOptions

    captured: list[argparse.ArgumentParser] = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=captured.append)
    return captured[0]


def passes_to_beam(parser: argparse.ArgumentParser) -> bool:
    """Whether the command hands the flags it does not know to Beam (its help says so)."""
    return "passed to Beam" in (parser.description or "")


def validate(argv: list[str]) -> None:
    """Parse ``chunkmill ARGV`` with the real parsers, as far as it can be without running it:
    the command's own flags and values by its parser, the rest by Beam's. Raises on any error."""
    words = [w for w in argv if not w.startswith("-")]
    command = words[:2] if words[:1] == ["runs"] else words[:1]
    parser = parser_of(command)
    rest = [w for w in argv]
    for word in command:
        rest.remove(word)
    known, unknown = parser.parse_known_args(rest)
    if unknown:
        assert passes_to_beam(parser), f"chunkmill {' '.join(command)}: unknown {unknown}"
        beam = beam_parser()
        beam.exit_on_error = False
        _, left = beam.parse_known_args(unknown)
        assert not left, f"neither chunkmill {' '.join(command)} nor Beam knows {left}"
    del known
