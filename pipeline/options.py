"""What the commands share (``chunkmill.pipeline.commands``): the usage error and the parser
class every command parses with, a run's settings, the flag groups of ``run`` and ``plan``
(extraction, storage, log level) and the argument types, so every mistake is a one-line
message naming the flag (``UsageError``), never a traceback from a worker. Nothing here
touches storage: ``chunkmill.pipeline.preflight`` does.

Beam, pyarrow and the chunking and extraction modules are imported inside the functions that
use them, not here: building a parser (``--help``) and refusing a bad flag must not wait
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

from chunkmill import extras, stores
from chunkmill.pipeline.usage import parser_flags, unrecognized

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


# --log-level: chunkmill's own lines at INFO by default; pypdf, Beam and client libraries
# only from WARNING unless `debug` (pipeline/logs.py).
LOG_LEVELS = ("debug", "info", "warning", "error")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="info (default): chunkmill's progress and notes; debug: also every library's",
    )


def add_extraction_flags(run: argparse.ArgumentParser) -> None:
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
        type=variable_name,
        metavar="VAR",
        help="environment variable (set where documents are extracted) holding the password "
        "of encrypted PDFs; the password itself is never a flag, a log line or a record",
    )
    run.add_argument(
        "--doc-timeout-seconds",
        type=positive_float,
        default=defaults.timeout_seconds,
        metavar="SECONDS",
        help="time one document may spend in a parser (or, over 256 KB, in decoding and "
        "chunking) before it is killed and recorded as a "
        f"timeout error (default {defaults.timeout_seconds:g})",
    )
    run.add_argument(
        "--doc-memory-mb",
        type=positive_int,
        default=defaults.memory_mb,
        metavar="MB",
        help="memory one document's parser (or, over 256 KB, its decoding and chunking) may "
        "use before it is stopped and recorded as a "
        f"memory error (default {defaults.memory_mb})",
    )
    run.add_argument(
        "--max-document-bytes",
        type=positive_int,
        default=defaults.max_document_bytes,
        metavar="BYTES",
        help="larger objects are too_large errors, never read "
        f"(default {defaults.max_document_bytes})",
    )
    run.add_argument(
        "--max-pdf-pages",
        type=positive_int,
        default=defaults.max_pdf_pages,
        metavar="PAGES",
        help=f"PDFs with more pages are too_large errors (default {defaults.max_pdf_pages})",
    )
    run.add_argument(
        "--max-error-ratio",
        type=ratio,
        default=None,
        metavar="RATIO",
        help="fail the run, publishing nothing, when more than this share (0 to 1) of listed "
        "documents failed (default: off)",
    )
    run.add_argument(
        "--max-removed-ratio",
        type=ratio,
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


def number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {value!r}") from None


def variable_name(value: str) -> str:
    # A name, never a value: the password must not be typed where shells and process
    # listings keep it. The message does not echo what was given (it may be the password).
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise argparse.ArgumentTypeError(
            "must name an environment variable (letters, digits, _), not hold the password"
        )
    return value


def positive_float(value: str) -> float:
    x = number(value)
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
    return x


def non_negative_float(value: str) -> float:
    x = number(value)
    if not (x >= 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a number, 0 or more, got {value!r}")
    return x


def ratio(value: str) -> float:
    x = number(value)
    if not 0 <= x <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value!r}")
    return x


def add_storage_flags(run: argparse.ArgumentParser) -> None:
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


# The chunking flags `run` and `eval` both pass to ChunkingConfig.create as they are.
_CHUNKING_PARAMETERS = (
    "context_prev_chars", "context_next_chars", "max_embed_tokens", "min_chunk_tokens",
    "heading_context", "max_tokens", "overlap_tokens", "overlap_sentences", "chunk_size",
    "chunk_overlap", "semantic_model", "breakpoint", "sentence_buffer", "min_tokens",
    "pdf_engine",
)  # fmt: skip


def chunking_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The chunking flags of a parsed command line, by ``ChunkingConfig.create``'s names."""
    return {name: getattr(args, name) for name in _CHUNKING_PARAMETERS}


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


def positive_int(value: str) -> int:
    n = non_negative_int(value)
    if n == 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return n


def non_negative_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value!r}")
    return n


def absolute(path: str) -> str:
    # Local paths are made absolute so doc_ids (a function of the URI) do not depend on the
    # directory chunkmill was started from.
    return os.path.abspath(path) if stores.is_local(path) else path


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


def refuse_stray_arguments(beam_args: Sequence[str], inputs: Sequence[str]) -> None:
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


def launch_clock() -> dt.datetime:
    """The time a run is launched at, in UTC: its started_at and default id."""
    return dt.datetime.now(dt.timezone.utc)
