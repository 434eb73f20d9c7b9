"""Parsing and validating a run's settings before any graph is built, so every mistake is a
one-line message naming the flag (``UsageError``), never a traceback from a worker.

Beam, pyarrow and the chunking and extraction modules are imported inside the functions that
use them, not here: building the parser (``--help``) and refusing a bad flag must not wait
for them (tests/unit/test_cli_startup.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from chunkmill import extras
from chunkmill.pipeline.usage import parser_flags, unrecognized
from chunkmill.versions import chunkmill_version

if TYPE_CHECKING:
    from chunkmill.config import ChunkingConfig
    from chunkmill.transforms import storage

SAMPLE_CORPUS = Path(__file__).parent / "sample_corpus"
DEFAULT_OUTPUT = "out"
# Without --runner, a local run; chunkmill defaults the way Beam does.
DEFAULT_RUNNER = "DirectRunner"


class UsageError(Exception):
    """A bad flag or argument; the CLI prints ``chunkmill: error: <message>`` and exits 2.
    A URI the message quotes (an ``--input`` pattern, an ``--output``) shows without
    credentials."""

    def __str__(self) -> str:
        from chunkmill.redact import redact_text

        return redact_text(super().__str__())


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):  # with the nearest flag chunkmill has
            raise UsageError(unrecognized(message[len(prefix) :].split(), parser_flags(self)))
        raise UsageError(message)


@dataclass(frozen=True)
class RunSettings:
    inputs: tuple[str, ...]
    output: str
    run_id: str
    prior_mode: str  # "auto" | "none" | "path"
    prior_manifest: str | None  # the prior manifest as given (a path or glob), or None
    prior_run_id: str | None
    config: ChunkingConfig
    beam_args: tuple[str, ...] = ()
    started_at: str = ""
    max_error_ratio: float | None = None  # None: off
    # The prior manifest's files, proven (pipeline.preflight): what the run reads, not a glob.
    prior_files: tuple[str, ...] = ()
    max_removed_ratio: float | None = None  # None: off
    billing_project: str | None = None  # requester-pays buckets: the project billed
    run_id_given: bool = False  # --run-id given: a taken id is an error, not the next free one
    # What the listing leaves out or brings back (transforms.storage.ListingRules).
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    follow_symlinks: bool = False
    retry_failed: bool = False  # --retry-failed: the prior run's failures are read again

    def listing_rules(self) -> storage.ListingRules:
        from chunkmill.transforms import storage

        return storage.ListingRules(
            include=self.include,
            exclude=self.exclude,
            follow_symlinks=self.follow_symlinks,
            output=self.output,
        )

    # The prior run's errors/ files: its failures not worth trying again are not read. Empty
    # with --retry-failed, or when the prior is not a run (a manifest folder or glob).
    prior_errors: tuple[str, ...] = ()
    # The run LATEST named at launch, whatever the prior (transforms.lineage: the run this one
    # comes after), and the run's place in that chain (lineage.chain_after); set by preflight.
    prior_after: str | None = None
    chain: dict[str, Any] | None = None


def build_parser() -> argparse.ArgumentParser:
    from chunkmill.config import strategies

    parser = Parser(
        prog="chunkmill",
        description="Incremental chunking of a document corpus into Parquet tables.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"chunkmill {chunkmill_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    run = sub.add_parser(
        "run",
        help="chunk a corpus and diff it against the prior run",
        description="Any option not listed here is passed to Beam (e.g. --runner, "
        "--direct_num_workers, --project, --temp_location).",
        allow_abbrev=False,
    )
    run.add_argument(
        "--config",
        metavar="FILE.toml",
        help="read flags from a TOML file (keys are flag names: max-tokens = 512, input = "
        '["docs/**"], Beam flags in a [beam] table); flags given here override it',
    )
    run.add_argument(
        "--input",
        action="append",
        type=location,
        metavar="PATTERN",
        help="glob of documents (local path, gs://...); repeatable; "
        "default: the bundled sample corpus",
    )
    run.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    run.add_argument("--run-id", help="name of this run (default: UTC timestamp)")
    run.add_argument(
        "--prior-manifest",
        default="auto",
        type=location,
        metavar="auto|none|PATH",
        help="manifest to diff against: auto (the run in OUTPUT/LATEST), none, or a run "
        "folder / manifest folder / Parquet glob",
    )
    run.add_argument(
        "--strategy",
        default="auto",
        choices=strategies(),
        help="chunking strategy (default auto: section for Markdown, paragraph for prose and "
        "PDF, recursive for code)",
    )
    run.add_argument(
        "--max-tokens",
        type=_positive_int,
        help="paragraph/section/semantic: chunk size limit in tokens",
    )
    run.add_argument(
        "--overlap-tokens", type=_non_negative_int, help="paragraph: tokens carried between chunks"
    )
    run.add_argument(
        "--overlap-sentences",
        type=_non_negative_int,
        help="paragraph: sentences carried where a chunk ends inside a line "
        "(with --overlap-tokens 0)",
    )
    run.add_argument(
        "--chunk-size", type=_positive_int, help="sentence/recursive: chunk size in characters"
    )
    run.add_argument(
        "--chunk-overlap",
        type=_non_negative_int,
        help="sentence/recursive: characters carried between chunks",
    )
    run.add_argument(
        "--semantic-model",
        metavar="NAME|PATH",
        help="semantic: the model that embeds sentences to find topic changes "
        "(default all-minilm-l6-v2; needs the embed extra)",
    )
    run.add_argument(
        "--breakpoint",
        metavar="KIND:AMOUNT",
        help="semantic: where the topic changes, percentile:P (default percentile:95), "
        "stddev:K or similarity:S of neighbouring sentences",
    )
    run.add_argument(
        "--sentence-buffer",
        type=_non_negative_int,
        metavar="N",
        help="semantic: sentences besides the nearest compared on each side of a boundary "
        "(default 1)",
    )
    run.add_argument(
        "--min-tokens",
        type=_non_negative_int,
        metavar="N",
        help="semantic: a topic segment under N tokens joins its closer neighbour "
        "(default --max-tokens / 4)",
    )
    run.add_argument(
        "--context-prev-chars",
        type=_non_negative_int,
        help="context window: characters of the chunks before (paragraph-window: 500)",
    )
    run.add_argument(
        "--context-next-chars",
        type=_non_negative_int,
        help="context window: characters of the chunks after (paragraph-window: 300)",
    )
    run.add_argument(
        "--heading-context",
        action="store_true",
        help='put the heading path at each chunk\'s start ("Guide > Install") before the text '
        "embedded (text_with_context), where it fits --max-embed-tokens; the chunk's span and "
        "text are unchanged",
    )
    run.add_argument(
        "--max-embed-tokens",
        type=_positive_int,
        metavar="N",
        help="the largest text handed to the embedder (a chunk with its context), in tokens "
        "of --tokenizer; context is trimmed to fit, a longer chunk of sentence, recursive or "
        "paragraph-window is cut (default: paragraph/section their --max-tokens, sentence/"
        "recursive 512 or --chunk-size / 2 if larger, paragraph-window 512)",
    )
    run.add_argument(
        "--min-chunk-tokens",
        type=_non_negative_int,
        metavar="N",
        help="a chunk under N tokens joins the previous chunk of its section, else the next, "
        "where the result fits; 0: never (default 16, paragraph-window 0)",
    )
    run.add_argument(
        "--tokenizer",
        default="chars4",
        metavar="chars4|whitespace|all-minilm-l6-v2|PATH",
        help="token counter: chars4 (characters / 4), whitespace (words), "
        "all-minilm-l6-v2, or a Hugging Face tokenizer.json; a tokenizer whose folder tells "
        "its model's input window (sentence_bert_config.json, tokenizer_config.json) fits "
        "every default to it",
    )
    run.add_argument(
        "--model",
        metavar="NAME|PATH",
        help="the embedding model the chunks are for, as embed takes it: all-MiniLM-L6-v2 "
        "(or sentence-transformers/all-MiniLM-L6-v2) or a sentence-transformers folder; "
        "counts with its tokenizer and fits every default to its input window",
    )
    _add_extraction_flags(run)
    _add_storage_flags(run)
    plan = sub.add_parser(
        "plan",
        help="what `run` would do with the same flags: documents new, changed, unchanged and "
        "removed, and the chunks and tokens to embed; reads no document, writes nothing",
        description="Takes the flags of `run`.",
        allow_abbrev=False,
    )
    # The same flags as `run` (so `run` can become `plan` on any command line), kept in step.
    for action in run._actions:
        if "-h" not in action.option_strings:
            plan._add_action(action)
    report = sub.add_parser(
        "report",
        help="summarise a finished run as an HTML page beside it (OUTPUT/runs/RUN/report.html)",
        description="Writes OUTPUT/runs/RUN/report.html, a self-contained page (no network "
        "needed to view it), and prints the same summary.",
        allow_abbrev=False,
    )
    report.add_argument(
        "run", nargs="?", metavar="RUN", help="run id (default: the run named in OUTPUT/LATEST)"
    )
    report.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    for command in (run, plan, report):
        _add_log_level(command)
    _add_runs_parser(sub)
    # Listed here for `chunkmill --help`; each parses its own flags (`chunkmill embed --help`).
    for name, text in INDEX_COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


INDEX_COMMANDS = {
    "embed": "embed the chunks of a run that the embedding store lacks for a model",
    "export": "write a run's whole current state, with its text, to one folder",
    "sync": "make a pgvector table equal to LATEST's state",
    "verify": "compare a pgvector table with LATEST's state; --repair mends it",
    "query": "print the chunks of a pgvector table nearest to a question",
    "eval": "measure how well chunks serve retrieval on questions with known evidence",
}


# --log-level: chunkmill's own lines at INFO by default; pypdf, Beam and client libraries
# only from WARNING unless `debug` (pipeline/logs.py).
LOG_LEVELS = ("debug", "info", "warning", "error")


def _add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="info (default): chunkmill's progress and notes; debug: also every library's",
    )


def _add_extraction_flags(run: argparse.ArgumentParser) -> None:
    """Extraction engine, isolation budgets and failure limits (chunkmill/isolation.py)."""
    from chunkmill.config import Limits
    from chunkmill.extract import OCR_MODES, PDF_ENGINES

    defaults = Limits()
    run.add_argument(
        "--pdf-engine",
        default="pypdf",
        choices=PDF_ENGINES,
        help="PDF text engine: pypdf (default), pdfium (pypdfium2, faster), or auto (pdfium; "
        "pypdf when pdfium cannot read a file or its text mixes writing directions on a line); "
        "part of the chunking fingerprint",
    )
    run.add_argument(
        "--ocr",
        default="auto",
        choices=OCR_MODES,
        help="OCR of PDF pages: auto (default: pages without a text layer, when the ocr "
        "extra is installed), never, or always (every page; needs chunkmill[ocr]); part of "
        "the chunking fingerprint",
    )
    run.add_argument(
        "--pdf-password-env",
        type=_variable_name,
        metavar="VAR",
        help="environment variable (set where documents are extracted) holding the password "
        "of encrypted PDFs; the password itself is never a flag, a log line or a record",
    )
    run.add_argument(
        "--doc-timeout-seconds",
        type=_positive_float,
        default=defaults.timeout_seconds,
        metavar="SECONDS",
        help="time one document may spend in a parser (or, over 256 KB, in decoding and "
        "chunking) before it is killed and recorded as a "
        f"timeout error (default {defaults.timeout_seconds:g})",
    )
    run.add_argument(
        "--doc-memory-mb",
        type=_positive_int,
        default=defaults.memory_mb,
        metavar="MB",
        help="memory one document's parser (or, over 256 KB, its decoding and chunking) may "
        "use before it is stopped and recorded as a "
        f"memory error (default {defaults.memory_mb})",
    )
    run.add_argument(
        "--max-document-bytes",
        type=_positive_int,
        default=defaults.max_document_bytes,
        metavar="BYTES",
        help="larger objects are too_large errors, never read "
        f"(default {defaults.max_document_bytes})",
    )
    run.add_argument(
        "--max-pdf-pages",
        type=_positive_int,
        default=defaults.max_pdf_pages,
        metavar="PAGES",
        help=f"PDFs with more pages are too_large errors (default {defaults.max_pdf_pages})",
    )
    run.add_argument(
        "--max-error-ratio",
        type=_ratio,
        default=None,
        metavar="RATIO",
        help="fail the run, publishing nothing, when more than this share (0 to 1) of listed "
        "documents failed (default: off)",
    )
    run.add_argument(
        "--max-removed-ratio",
        type=_ratio,
        default=DEFAULT_MAX_REMOVED_RATIO,
        metavar="RATIO",
        help="fail the run, publishing nothing, when it would remove (or empty) more than "
        "this share (0 to 1) of the prior run's documents, or, without LATEST's run as its "
        "prior, leave out more than this share of LATEST's documents; 1 allows any removal "
        f"(default {DEFAULT_MAX_REMOVED_RATIO:g})",
    )
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="read again every document that failed in the prior run (default: only those "
        "whose listing version, config, limits or parser versions changed since)",
    )


# A nightly run that removes half of the corpus is far more likely a broken input glob, a
# missing mount or a lost permission than half the documents deleted for real; published, its
# removals would reach the embedding index and every later run. Real large deletions are
# rare and deliberate, and a run told --max-removed-ratio 1 publishes them.
DEFAULT_MAX_REMOVED_RATIO = 0.5


def _add_runs_parser(sub: Any) -> None:
    runs = sub.add_parser(
        "runs", help="list the runs under an output prefix, or delete old ones", allow_abbrev=False
    )
    runs_sub = runs.add_subparsers(dest="runs_command", required=True, parser_class=Parser)
    listing = runs_sub.add_parser(
        "list", help="every run: finished or not, started_at, counts, LATEST", allow_abbrev=False
    )
    listing.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    gc = runs_sub.add_parser(
        "gc",
        help="delete old runs: keeps LATEST and the N newest finished runs",
        description="Never deletes LATEST or a run that may be in progress: a run without "
        "_SUCCESS is kept unless --grace-hours is given and it wrote nothing for that long.",
        allow_abbrev=False,
    )
    gc.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    gc.add_argument(
        "--keep", type=_non_negative_int, required=True, metavar="N",
        help="finished runs to keep besides LATEST (the N newest)",
    )  # fmt: skip
    gc.add_argument(
        "--grace-hours", type=_non_negative_float, metavar="H",
        help="also delete unfinished runs whose newest file is older than H hours, 0 "
        "included (default: never delete an unfinished run; refused and interrupted runs "
        "are deleted anyway, a run whose process is alive on this host never)",
    )  # fmt: skip
    gc.add_argument("--dry-run", action="store_true", help="print what would be deleted")


def _flag_names() -> dict[str, str]:
    """Each ``run`` flag by the config parameter it sets (its argparse ``dest``): how a
    config error, which names parameters (``chunkmill.chunking.base.ParameterError``),
    names the flags to change."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.option_strings[0] for a in sub.choices["run"]._actions if a.option_strings}


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {value!r}") from None


def _variable_name(value: str) -> str:
    # A name, never a value: the password must not be typed where shells and process
    # listings keep it. The message does not echo what was given (it may be the password).
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise argparse.ArgumentTypeError(
            "must name an environment variable (letters, digits, _), not hold the password"
        )
    return value


def _positive_float(value: str) -> float:
    x = _number(value)
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
    return x


def _non_negative_float(value: str) -> float:
    x = _number(value)
    if not (x >= 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a number, 0 or more, got {value!r}")
    return x


def _ratio(value: str) -> float:
    x = _number(value)
    if not 0 <= x <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value!r}")
    return x


@dataclass(frozen=True)
class RunsSettings:
    command: str  # "list" | "gc"
    output: str
    keep: int = 0
    grace_hours: float | None = None
    dry_run: bool = False


def parse_runs(argv: Sequence[str]) -> RunsSettings:
    """Parse ``chunkmill runs list|gc`` arguments (without the ``runs`` word)."""
    args = build_parser().parse_args(["runs", *argv])
    output = absolute(args.output).rstrip("/") or "/"
    if args.runs_command == "list":
        return RunsSettings(command="list", output=output)
    return RunsSettings(
        command="gc",
        output=output,
        keep=args.keep,
        grace_hours=args.grace_hours,
        dry_run=args.dry_run,
    )


def _add_storage_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="glob, relative to the input's folder (the part of --input before its first "
        "wildcard), of files to list even if their format is skipped by default (images, "
        "audio, video, archives, fonts, binaries); repeatable; ** is zero or more folders",
    )
    run.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="glob, relative to the input's folder, of files to leave out (counted as "
        "skipped); repeatable; wins over --include",
    )
    run.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="read symlinks whose target lies outside the input's folder (by default they "
        "are skipped): this may read files outside the input",
    )
    run.add_argument(
        "--billing-project",
        metavar="PROJECT",
        help="project billed for reading requester-pays gs:// buckets (on s3://: agree to pay "
        "as requester)",
    )


def model_tokenizer(model: str | None, tokenizer: str) -> str:
    """The ``--tokenizer`` spec to count with: ``tokenizer``, or, with ``--model``, the
    model's own (resolved as ``embed`` resolves ``--model``)."""
    if model is None:
        return tokenizer
    from chunkmill import embedding

    if tokenizer != "chars4":
        raise UsageError("--tokenizer: --model names the tokenizer already; give one of them")
    try:
        return embedding.model_tokenizer(model)
    except embedding.ModelUnavailable as e:
        raise UsageError(str(e)) from None


def location(value: str) -> str:
    """A location argument, refused when its store's extra is not installed."""
    missing = extras.missing_extra(value)
    if missing is not None:
        raise argparse.ArgumentTypeError(missing)
    return value


def _positive_int(value: str) -> int:
    n = _non_negative_int(value)
    if n == 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return n


def _non_negative_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value!r}")
    return n


def is_local(path: str) -> bool:
    return "://" not in path


def absolute(path: str) -> str:
    # Local paths are made absolute so doc_ids (a function of the URI) do not depend on the
    # directory chunkmill was started from.
    return os.path.abspath(path) if is_local(path) else path


def beam_command_parser(command: str, description: str) -> Parser:
    """The parser of a command that runs a Beam job of its own (``embed``, ``export``):
    ``--output`` and ``--run`` here, its own flags added by the caller, and any other flag
    passed to Beam (``parse_beam_command``)."""
    parser = Parser(
        prog=f"chunkmill {command}",
        description=f"{description} Any option not listed here is passed to Beam (e.g. --runner).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--output", default=DEFAULT_OUTPUT, type=location, help="output prefix (default: ./out)"
    )
    parser.add_argument(
        "--run", metavar="RUN_ID", help=f"the run to {command} (default: the one LATEST names)"
    )
    return parser


def parse_beam_command(parser: Parser, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """``parser``'s arguments and Beam's flags; a flag neither knows is one line naming the
    nearest, a runner outside the allow-list one line too."""
    from chunkmill.pipeline import runners
    from chunkmill.pipeline.usage import unrecognized

    args, beam_args = parser.parse_known_args(list(argv))
    unknown = unknown_beam_flags(beam_args)
    if unknown:
        flags = [f for a in parser._actions for f in a.option_strings if f.startswith("--")]
        raise UsageError(unrecognized(unknown, flags))
    runners.check(beam_args)
    return args, beam_args


def unknown_beam_flags(flags: Sequence[str]) -> list[str]:
    """The flags no Beam options class knows (Beam itself would only log and drop them)."""
    return [u for u in _not_parsed_by_beam(flags) if u.startswith("-")]


def _not_parsed_by_beam(flags: Sequence[str]) -> list[str]:
    """What Beam's own option parser leaves over: unknown flags, and arguments that are not
    the value of a flag (``--runner X`` takes ``X``; a bare ``notes/b.md`` is left over)."""
    from chunkmill.pipeline.usage import beam_parser

    try:
        _, unknown = beam_parser().parse_known_args(list(flags))
    except SystemExit:
        raise UsageError(f"invalid Beam option in: {' '.join(flags)}") from None
    return list(unknown)


def _refuse_stray_arguments(beam_args: Sequence[str], inputs: Sequence[str]) -> None:
    """``run`` and ``plan`` take no positional argument. One here is nearly always a shell
    that expanded an unquoted ``--input`` glob: ``--input`` got the first file, and Beam
    would drop the rest with a warning, so the run would remove most of the corpus."""
    stray = [a for a in _not_parsed_by_beam(beam_args) if not a.startswith("-")]
    if not stray:
        return
    hint = (
        f": quote the --input glob ({_glob_hint([*inputs, *stray])}) so the shell does not "
        "expand it"
        if inputs
        else ""
    )
    raise UsageError(f"unexpected argument {stray[0]!r}{hint}")


def _glob_hint(paths: Sequence[str]) -> str:
    """The quoted glob the user probably meant for ``paths`` (what a shell expanded)."""
    folders = {os.path.dirname(p) for p in paths}
    suffixes = {os.path.splitext(p)[1] for p in paths}
    folder = folders.pop() if len(folders) == 1 else "docs"
    suffix = suffixes.pop() if len(suffixes) == 1 else ""
    return "'" + (f"{folder}/*{suffix}" if folder else f"*{suffix}") + "'"


@dataclass(frozen=True)
class ReportSettings:
    output: str
    run_id: str


def parse_report(argv: Sequence[str]) -> ReportSettings:
    """Parse ``chunkmill report`` arguments (without the ``report`` word) and find the run: the
    one named, else the one in ``OUTPUT/LATEST`` (``preflight.finished_run``)."""
    args = build_parser().parse_args(["report", *argv])
    from chunkmill.pipeline import preflight

    output = absolute(args.output).rstrip("/") or "/"
    return ReportSettings(output=output, run_id=preflight.finished_run(output, args.run))


def parse_plan(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse ``chunkmill plan`` arguments: the flags of ``run``, validated the same way."""
    build_parser().parse_known_args(["plan", *argv])  # for `plan --help`
    return parse_run(argv, now=now)


def parse_run(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse ``chunkmill run`` arguments (without the ``run`` word), then check them against
    storage (``preflight.check_run``): the settings a run is built from."""
    settings = parse_run_args(argv, now=now)
    from chunkmill.pipeline import preflight  # imports Beam: after a usage error or --help

    return preflight.check_run(settings)


def launch_clock() -> dt.datetime:
    """The time a run is launched at, in UTC: its started_at and default id."""
    return dt.datetime.now(dt.timezone.utc)


def parse_run_args(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse and validate ``chunkmill run`` arguments without touching storage: the prior
    is not resolved yet (``prior_mode`` is ``--prior-manifest`` as given)."""
    from chunkmill.pipeline import config_file, usage

    parser = build_parser()
    argv = config_file.apply(parser, argv)
    args, beam_args = parser.parse_known_args(["run", *argv])
    # Only now Beam and the rest: a mistake chunkmill's own parser finds is told without them.
    from chunkmill.chunking.base import ParameterError
    from chunkmill.config import ChunkingConfig, Limits
    from chunkmill.pipeline import runners
    from chunkmill.transforms import runstate, storage

    unknown = unknown_beam_flags(beam_args)
    if unknown:
        raise UsageError(unrecognized(unknown, usage.run_and_beam_flags(parser)))
    _refuse_stray_arguments(beam_args, args.input or [])
    runners.check(beam_args)

    try:
        config = ChunkingConfig.create(
            args.strategy,
            tokenizer=model_tokenizer(args.model, args.tokenizer),
            context_prev_chars=args.context_prev_chars,
            context_next_chars=args.context_next_chars,
            max_embed_tokens=args.max_embed_tokens,
            min_chunk_tokens=args.min_chunk_tokens,
            heading_context=args.heading_context,
            max_tokens=args.max_tokens,
            overlap_tokens=args.overlap_tokens,
            overlap_sentences=args.overlap_sentences,
            chunk_size=args.chunk_size,
            chunk_overlap=args.chunk_overlap,
            semantic_model=args.semantic_model,
            breakpoint=args.breakpoint,
            sentence_buffer=args.sentence_buffer,
            min_tokens=args.min_tokens,
            pdf_engine=args.pdf_engine,
            ocr=args.ocr,
            pdf_password_env=args.pdf_password_env,
            limits=Limits(
                timeout_seconds=args.doc_timeout_seconds,
                memory_mb=args.doc_memory_mb,
                max_document_bytes=args.max_document_bytes,
                max_pdf_pages=args.max_pdf_pages,
            ),
        )
    except ParameterError as e:  # it names parameters: name the flags that set them
        raise UsageError(e.render(_flag_names())) from None
    except ValueError as e:
        raise UsageError(str(e)) from None

    now = now or launch_clock()
    # The default id is the second the run starts; launching claims it, or ID-2, ID-3, ...
    # when another launch took it in the same second (transforms.runstate.claim_run).
    run_id = args.run_id or now.strftime("%Y%m%dT%H%M%SZ")
    if not runstate.is_run_id(run_id):
        raise UsageError(f"argument --run-id: {run_id!r} must be {runstate.RUN_ID_RULE}")

    output = absolute(args.output).rstrip("/") or "/"
    inputs = tuple(absolute(p) for p in (args.input or [str(SAMPLE_CORPUS / "**")]))
    try:
        storage.ListingRules(include=tuple(args.include), exclude=tuple(args.exclude))
    except ValueError as e:
        flag = "--include" if "include" in str(e) else "--exclude"
        raise UsageError(f"argument {flag}: {e}") from None
    return RunSettings(
        inputs=inputs,
        output=output,
        run_id=run_id,
        prior_mode=args.prior_manifest,
        prior_manifest=None,
        prior_run_id=None,
        config=config,
        beam_args=tuple(beam_args),
        started_at=now.strftime(runstate.STARTED_AT_FORMAT),
        max_error_ratio=args.max_error_ratio,
        max_removed_ratio=args.max_removed_ratio,
        billing_project=args.billing_project,
        run_id_given=args.run_id is not None,
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        follow_symlinks=args.follow_symlinks,
        retry_failed=args.retry_failed,
    )
