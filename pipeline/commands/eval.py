"""``chunkmill eval``: how well chunks serve retrieval, on questions whose evidence is
character ranges of the documents (``chunkmill.pipeline.eval``, docs/evaluation.md). The
parser takes the chunking flags of ``run``; ``--compare`` specs are parsed here too."""

from __future__ import annotations

import argparse
import copy
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chunkmill.backends import BACKENDS
from chunkmill.pipeline.options import (
    DEFAULT_OUTPUT,
    Parser,
    UsageError,
    absolute,
    chunking_parameters,
    location,
    model_tokenizer,
)

if TYPE_CHECKING:
    from chunkmill.config import ChunkingConfig
    from chunkmill.evaluation.splitters import LangChainSplitter

RETRIEVERS = ("bm25", "model")
# The flags of `chunkmill run` that decide the chunks, which eval takes too (and --compare
# takes without their dashes).
CHUNKING_FLAGS = (
    "--strategy",
    "--max-tokens",
    "--overlap-tokens",
    "--overlap-sentences",
    "--chunk-size",
    "--chunk-overlap",
    "--semantic-model",
    "--breakpoint",
    "--sentence-buffer",
    "--min-tokens",
    "--context-prev-chars",
    "--context-next-chars",
    "--max-embed-tokens",
    "--min-chunk-tokens",
    "--heading-context",
    "--tokenizer",
    "--pdf-engine",
)


def build_parser() -> Parser:
    parser = Parser(
        prog="chunkmill eval",
        description="Measure how well chunks serve retrieval: recall, precision and IoU of "
        "the top k chunks retrieved for each question, and PΩ, against the evidence the "
        "questions give as character ranges of the documents' extracted text.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--input", action="append", type=location, metavar="PATTERN",
        help="glob of documents, as for run; repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--questions", required=True, metavar="FILE",
        help=".csv or .jsonl: question, references (JSON list of {start_index, end_index, "
        "content}), corpus_id (the end of a document's path, with or without extension)",
    )  # fmt: skip
    parser.add_argument(
        "--compare", nargs="+", metavar="SPEC",
        help='configurations side by side, each "STRATEGY [FLAG=VALUE ...]" with the chunking '
        'flags of run without their dashes, e.g. "paragraph max-tokens=256"; chunking flags '
        "given outside apply to each (default: one configuration, from the flags); "
        '"langchain [chunk-size=N] [chunk-overlap=N] [tokenizer=chars|cl100k|NAME] '
        "[separators=langchain|chroma]\" is LangChain's RecursiveCharacterTextSplitter",
    )  # fmt: skip
    parser.add_argument(
        "--retriever", action="append", choices=RETRIEVERS,
        help="bm25 (default; no model) or model (the embedding model, cosine); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--model", default=None, metavar="NAME|PATH",
        help="--retriever model: all-MiniLM-L6-v2 (default) or a sentence-transformers folder; "
        "without --tokenizer, also what the chunks are counted and fitted with, as run --model",
    )  # fmt: skip
    parser.add_argument(
        "--backend", default="torch", choices=BACKENDS,
        help="--retriever model: what runs the model (default torch; "
        "docs/embedding-backends.md)",
    )  # fmt: skip
    parser.add_argument(
        "-k", "--top-k", type=_positive_int, default=5, metavar="K",
        help="chunks retrieved per question (default 5)",
    )  # fmt: skip
    parser.add_argument(
        "--run", metavar="RUN_ID",
        help="score a finished run's chunks (its state) instead of chunking --input",
    )  # fmt: skip
    parser.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location,
        help="--run: the output prefix holding it (default: ./out)",
    )  # fmt: skip
    parser.add_argument(
        "--html", metavar="FILE", help="also write the results as an HTML page with a plot"
    )
    _add_chunking_flags(parser)
    return parser


def _chunking_actions() -> list[argparse.Action]:
    from chunkmill.pipeline.commands import run

    return [
        a
        for a in run.build_parser()._actions
        if a.option_strings and a.option_strings[0] in CHUNKING_FLAGS
    ]


def _add_chunking_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("chunking (as for run)")
    for action in _chunking_actions():
        group._add_action(action)


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return n


@dataclass(frozen=True)
class Configuration:
    """One row: chunkmill's chunking (``config``), or LangChain's splitter (``splitter``)."""

    label: str
    config: ChunkingConfig | None
    splitter: LangChainSplitter | None = None


@dataclass(frozen=True)
class EvalSettings:
    questions: str
    retrievers: tuple[str, ...]
    k: int
    model: str | None
    html: str | None
    inputs: tuple[str, ...] = ()
    configurations: tuple[Configuration, ...] = ()
    run_id: str | None = None
    output: str = DEFAULT_OUTPUT
    backend: str = "torch"


def parse(argv: Sequence[str]) -> EvalSettings:
    args = build_parser().parse_args(list(argv))
    retrievers = tuple(dict.fromkeys(args.retriever or ["bm25"]))
    common = dict(
        questions=args.questions, retrievers=retrievers, k=args.top_k, model=args.model,
        html=args.html, backend=args.backend,
    )  # fmt: skip
    if args.run is not None:
        if args.input or args.compare:
            raise UsageError("--run scores that run's chunks: give --input and --compare, or --run")
        given = [a.option_strings[0] for a in _chunking_actions()
                 if getattr(args, a.dest) != a.default]  # fmt: skip
        if given:
            raise UsageError(f"--run scores that run's chunks as they are: drop {given[0]}")
        return EvalSettings(**common, run_id=args.run, output=absolute(args.output).rstrip("/"))
    if not args.input:
        raise UsageError("--input: which documents? (or --run RUN_ID to score a run's chunks)")
    return EvalSettings(
        **common,
        inputs=tuple(absolute(p) for p in args.input),
        configurations=tuple(configurations(args, args.compare)),
    )


def configurations(base: argparse.Namespace, specs: Sequence[str] | None) -> list[Configuration]:
    """One configuration from the chunking flags, or one per ``--compare`` spec, each on top
    of those flags."""
    if not specs:
        return [Configuration(_label(base), chunking_config(base))]
    found = []
    for spec in specs:
        splitter = _langchain_spec(spec)
        if splitter is not None:
            found.append(Configuration(spec, None, splitter))
            continue
        args = _spec_args(base, spec)
        found.append(Configuration(spec, chunking_config(args, f"--compare {spec!r}")))
    return found


def _langchain_spec(spec: str) -> LangChainSplitter | None:
    """``langchain [chunk-size=N] [chunk-overlap=N] [tokenizer=T] [separators=S]``: LangChain's
    recursive splitter (chunkmill.evaluation.splitters); None for chunkmill's own specs."""
    from chunkmill.evaluation import splitters

    try:
        words = shlex.split(spec)
    except ValueError:
        return None  # said by _spec_args
    if not words or words[0].lower() != "langchain":
        return None
    try:
        splitter = splitters.parse(words[1:])
        splitter.check()
    except splitters.SplitterError as e:
        raise UsageError(f"--compare {spec!r}: {e}") from None
    return splitter


def _label(args: argparse.Namespace) -> str:
    """The configuration the chunking flags make, in the words of a spec:
    ``paragraph max-tokens=256``."""
    given = [
        f"{a.option_strings[0][2:]}={getattr(args, a.dest)}"
        for a in _chunking_actions()
        if a.dest != "strategy" and getattr(args, a.dest) != a.default
    ]
    return " ".join([args.strategy, *given])


def spec_config(spec: str) -> ChunkingConfig:
    """The configuration of one ``--compare`` spec on its own (every other flag at run's
    default)."""
    return chunking_config(_spec_args(argparse.Namespace(), spec), f"--compare {spec!r}")


def _spec_args(base: argparse.Namespace, spec: str) -> argparse.Namespace:
    """``base`` with the flags of ``spec`` ("STRATEGY [FLAG=VALUE ...]") applied."""
    try:
        words = shlex.split(spec)
    except ValueError as e:  # an unclosed quote
        raise UsageError(f"--compare {spec!r}: {e}") from None
    if not words:
        raise UsageError("--compare: an empty configuration")
    argv = ["--strategy", words[0]]
    switches = {
        a.option_strings[0] for a in _chunking_actions() if isinstance(a, argparse._StoreTrueAction)
    }
    for word in words[1:]:
        name, equals, value = word.partition("=")
        if not equals:
            raise UsageError(f"--compare {spec!r}: {word!r} is not FLAG=VALUE")
        flag = "--" + name.lstrip("-").replace("_", "-")
        if flag not in switches:
            argv += [flag, value]
        elif value.lower() in ("true", "yes", "1"):
            argv.append(flag)
        elif value.lower() not in ("false", "no", "0"):
            raise UsageError(f"--compare {spec!r}: {flag} takes true or false, not {value!r}")
    parser = Parser(prog=f"chunkmill eval --compare {spec!r}", allow_abbrev=False, add_help=False)
    for action in _chunking_actions():
        parser._add_action(action)
    try:
        return parser.parse_args(argv, namespace=copy.copy(base))
    except UsageError as e:
        raise UsageError(f"--compare {spec!r}: {e}") from None


def chunking_config(args: argparse.Namespace, where: str | None = None) -> ChunkingConfig:
    """The ``ChunkingConfig`` of parsed chunking flags, as run builds it; ``where`` prefixes
    an error (which spec)."""
    from chunkmill.chunking.base import ParameterError
    from chunkmill.config import ChunkingConfig

    try:
        return ChunkingConfig.create(
            args.strategy,
            tokenizer=_tokenizer(args),
            **chunking_parameters(args),
        )
    except ParameterError as e:
        flags = {a.dest: a.option_strings[0] for a in _chunking_actions()}
        message = e.render(flags)
    except ValueError as e:
        message = str(e)
    raise UsageError(message if where is None else f"{where}: {message}")


def _tokenizer(args: argparse.Namespace) -> str:
    """``--tokenizer``; without it, the tokenizer of ``--model`` when one is named, so that
    the chunks are those ``run --model`` makes for the model that retrieves."""
    model = getattr(args, "model", None)
    if model is None or args.tokenizer != "chars4":
        return str(args.tokenizer)
    return model_tokenizer(model, args.tokenizer)


def main(argv: Sequence[str]) -> int:
    settings = parse(argv)
    if settings.html is not None and not Path(settings.html).resolve().parent.is_dir():
        raise UsageError(f"--html {settings.html}: its folder does not exist")
    from chunkmill.pipeline import eval as evaluation

    return evaluation.command(settings)
