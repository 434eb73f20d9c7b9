"""Parsing and validating a run's settings before any graph is built, so every mistake is a
one-line message naming the flag (``UsageError``), never a traceback from a worker."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from transforms import io as tio
from transforms import storage
from transforms.config import ChunkingConfig, strategies
from transforms.extract import PDF_ENGINES
from transforms.isolation import Limits

SAMPLE_CORPUS = Path(__file__).parent / "sample_corpus"
DEFAULT_OUTPUT = "out"
# Run ids name a folder under OUTPUT/runs/: no separators, nothing that escapes the prefix.
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Without --runner, a local run; chunkmill defaults the way Beam does.
DEFAULT_RUNNER = "DirectRunner"


class UsageError(Exception):
    """A bad flag or argument; the CLI prints ``chunkmill: error: <message>`` and exits 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


@dataclass(frozen=True)
class RunSettings:
    inputs: tuple[str, ...]
    output: str
    run_id: str
    prior_mode: str  # "auto" | "none" | "path"
    prior_manifest: str | None  # a glob of manifest Parquet files, or None
    prior_run_id: str | None
    config: ChunkingConfig
    beam_args: tuple[str, ...] = ()
    started_at: str = ""
    max_error_ratio: float | None = None  # None: off
    billing_project: str | None = None  # requester-pays buckets: the project billed
    # The prior run's errors/ files: its failures not worth trying again are not read. Empty
    # with --retry-failed, or when the prior is not a run (a manifest folder or glob).
    prior_errors: tuple[str, ...] = ()

    def report(self) -> dict[str, Any]:
        """The run report's header: chunkmill's own config, never the raw pipeline options
        (they can carry credentials)."""
        from transforms.versions import chunkmill_version

        return {
            "run_id": self.run_id,
            "started_at": self.started_at,
            "chunkmill_version": chunkmill_version(),
            "schema_version": tio.schema.SCHEMA_VERSION,
            "inputs": list(self.inputs),
            "output": self.output,
            "prior": {
                "mode": self.prior_mode,
                "run_id": self.prior_run_id,
                "manifest": self.prior_manifest,
                "errors": list(self.prior_errors),
            },
            "chunking": {**self.config.description, "fingerprint": self.config.fingerprint},
            # transforms.io.publish reads max_error_ratio from here.
            "limits": {
                **dataclasses.asdict(self.config.limits),
                "max_error_ratio": self.max_error_ratio,
            },
        }


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="chunkmill",
        description="Incremental chunking of a document corpus into Parquet tables.",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="chunk a corpus and diff it against the prior run",
        description="Any option not listed here is passed to Beam (e.g. --runner, "
        "--direct_num_workers, --project, --temp_location).",
        allow_abbrev=False,
    )
    run.add_argument(
        "--input",
        action="append",
        metavar="PATTERN",
        help="glob of documents (local path, gs://...); repeatable; "
        "default: the bundled sample corpus",
    )
    run.add_argument("--output", default=DEFAULT_OUTPUT, help="output prefix (default: ./out)")
    run.add_argument("--run-id", help="name of this run (default: UTC timestamp)")
    run.add_argument(
        "--prior-manifest",
        default="auto",
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
        "--max-tokens", type=_positive_int, help="paragraph/section: chunk size limit in tokens"
    )
    run.add_argument(
        "--overlap-tokens", type=_non_negative_int, help="paragraph: tokens carried between chunks"
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
        "--tokenizer",
        default="chars4",
        metavar="chars4|whitespace|all-minilm-l6-v2|PATH",
        help="token counter: chars4 (characters / 4, ADR-0006), whitespace (words), "
        "all-minilm-l6-v2, or a Hugging Face tokenizer.json",
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
    report.add_argument("--output", default=DEFAULT_OUTPUT, help="output prefix (default: ./out)")
    for command in (run, plan, report):
        _add_log_level(command)
    _add_runs_parser(sub)
    return parser


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
    """Extraction engine, isolation budgets and failure limits (transforms/isolation.py)."""
    defaults = Limits()
    run.add_argument(
        "--pdf-engine",
        default="pypdf",
        choices=PDF_ENGINES,
        help="PDF text engine: pypdf (default), pdfium (pypdfium2, faster), or auto (pdfium, "
        "pypdf when pdfium cannot read a file); part of the chunking fingerprint",
    )
    run.add_argument(
        "--doc-timeout-seconds",
        type=_positive_float,
        default=defaults.timeout_seconds,
        metavar="SECONDS",
        help="time one document may spend in a parser before it is killed and recorded as a "
        f"timeout error (default {defaults.timeout_seconds:g})",
    )
    run.add_argument(
        "--doc-memory-mb",
        type=_positive_int,
        default=defaults.memory_mb,
        metavar="MB",
        help="memory one document's parser may use before it is stopped and recorded as a "
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
        "--retry-failed",
        action="store_true",
        help="read again every document that failed in the prior run (default: only those "
        "whose listing version, config, limits or parser versions changed since)",
    )


def _add_runs_parser(sub: Any) -> None:
    runs = sub.add_parser(
        "runs", help="list the runs under an output prefix, or delete old ones", allow_abbrev=False
    )
    runs_sub = runs.add_subparsers(dest="runs_command", required=True, parser_class=_Parser)
    listing = runs_sub.add_parser(
        "list", help="every run: finished or not, started_at, counts, LATEST", allow_abbrev=False
    )
    listing.add_argument("--output", default=DEFAULT_OUTPUT, help="output prefix (default: ./out)")
    gc = runs_sub.add_parser(
        "gc",
        help="delete old runs: keeps LATEST and the N newest finished runs",
        description="Never deletes LATEST or a run that may be in progress: a run without "
        "_SUCCESS is kept unless --grace-hours is given and it wrote nothing for that long.",
        allow_abbrev=False,
    )
    gc.add_argument("--output", default=DEFAULT_OUTPUT, help="output prefix (default: ./out)")
    gc.add_argument(
        "--keep", type=_non_negative_int, required=True, metavar="N",
        help="finished runs to keep besides LATEST (the N newest)",
    )  # fmt: skip
    gc.add_argument(
        "--grace-hours", type=_positive_float, metavar="H",
        help="also delete unfinished runs whose newest file is older than H hours "
        "(default: never delete an unfinished run)",
    )  # fmt: skip
    gc.add_argument("--dry-run", action="store_true", help="print what would be deleted")


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {value!r}") from None


def _positive_float(value: str) -> float:
    x = _number(value)
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
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
    output = _absolute(args.output).rstrip("/") or "/"
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
        "--billing-project",
        metavar="PROJECT",
        help="project billed for reading requester-pays gs:// buckets (on s3://: agree to pay "
        "as requester)",
    )


def _prepare_filesystems(beam_args: Sequence[str]) -> None:
    """Beam's filesystems need the pipeline options before a pipeline exists (s3:// reads its
    endpoint and keys from them); with a GCS emulator, no credential probing."""
    FileSystems.set_options(PipelineOptions(list(beam_args)))
    storage.use_anonymous_gcs_for_emulator()


def _check_storage(inputs: Sequence[str], output: str, billing_project: str | None) -> None:
    """Every bucket named by an input or the output exists and can be listed: otherwise one
    line naming the bucket and what was denied, before a graph is built."""
    seen: set[str] = set()
    for uri in (*inputs, output):
        if storage.kind(uri) not in ("gcs", "s3") or storage.bucket_url(uri) in seen:
            continue
        seen.add(storage.bucket_url(uri))
        flag = "--output" if uri == output else "--input"
        try:
            storage.check_bucket(uri, billing_project if flag == "--input" else None)
        except storage.StoreAccessError as e:
            raise UsageError(f"argument {flag}: {e}") from None
        except Exception as e:  # no credentials, no network: still one line
            raise UsageError(
                f"argument {flag}: cannot reach {storage.bucket_url(uri)}: "
                f"{type(e).__name__}: {storage.first_line(str(e))}"
            ) from None


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


def _is_local(path: str) -> bool:
    return "://" not in path


def _absolute(path: str) -> str:
    # Local paths are made absolute so doc_ids (a function of the URI) do not depend on the
    # directory chunkmill was started from.
    return os.path.abspath(path) if _is_local(path) else path


def unknown_beam_flags(flags: Sequence[str]) -> list[str]:
    """The flags no Beam options class knows (Beam itself would only log and drop them)."""
    captured: list[argparse.ArgumentParser] = []
    PipelineOptions(list(flags)).get_all_options(add_extra_args_fn=captured.append)
    try:
        _, unknown = captured[0].parse_known_args(list(flags))
    except SystemExit:
        raise UsageError(f"invalid Beam option in: {' '.join(flags)}") from None
    return [u for u in unknown if u.startswith("-")]


def _has_match(pattern: str) -> bool:
    try:
        result = FileSystems.match([pattern], limits=[1])[0]
    except Exception:
        return False
    return bool(result.metadata_list)


def _resolve_prior(mode: str, output: str) -> tuple[str, str | None, str | None]:
    """(mode, manifest glob or None, prior run id or None)."""
    if mode == "none":
        return "none", None, None
    if mode == "auto":
        latest = FileSystems.join(output, tio.LATEST)
        if not FileSystems.exists(latest):
            return "auto", None, None
        prior_run = tio.read_text(latest).strip()
        if not _RUN_ID.match(prior_run):
            raise UsageError(f"{latest} names no valid run ({prior_run!r}); use --prior-manifest")
        glob = FileSystems.join(tio.table_dir(output, prior_run, "manifest"), "*.parquet")
        if not _has_match(glob):
            raise UsageError(
                f"{latest} names run {prior_run!r} but {glob} matches no file; "
                "pass --prior-manifest PATH or none"
            )
        _check_manifest_version(glob)
        return "auto", glob, prior_run
    path = _absolute(mode)
    candidates = (
        [path]
        if path.endswith(".parquet") or any(c in path for c in "*?[")
        else [
            FileSystems.join(path, "manifest", "*.parquet"),
            FileSystems.join(path, "*.parquet"),
        ]
    )
    for glob in candidates:
        if _has_match(glob):
            _check_manifest_version(glob)
            return "path", glob, None
    raise UsageError(f"--prior-manifest {mode!r}: no manifest Parquet file found there")


def _check_manifest_version(glob: str) -> None:
    """A prior manifest must have been written with this schema version: reading another
    would fail on a worker, or worse, diff against columns that mean something else."""
    path = FileSystems.match([glob], limits=[1])[0].metadata_list[0].path
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            meta = pq.read_schema(f).metadata or {}
    except Exception as e:
        raise UsageError(f"prior manifest {path} is not a readable Parquet file: {e}") from None
    found = meta.get(b"chunkmill.schema_version", b"?").decode(errors="replace")
    if found in tio.schema.READABLE_MANIFEST_VERSIONS:
        return
    writer = meta.get(b"chunkmill.version", b"").decode(errors="replace")
    raise UsageError(
        f"prior manifest {path} has schema version {found}"
        + (f" (written by chunkmill {writer})" if writer else "")
        + f"; this chunkmill reads version {tio.schema.SCHEMA_VERSION}. Run once with "
        "--prior-manifest none (every chunk is written again; chunk hashes are unchanged, so "
        "embeddings keyed by hash can be reused), or use the chunkmill release that wrote it"
    )


def _prior_error_files(prior_run_id: str | None, mode: str, output: str) -> tuple[str, ...]:
    """The errors/ files of the prior run, when the prior is a run: the one in LATEST, or a
    run folder given to --prior-manifest (a manifest folder or glob has none)."""
    if prior_run_id is not None:
        return tio.error_files_of_run(tio.run_dir(output, prior_run_id))
    if mode in ("auto", "none"):
        return ()
    path = _absolute(mode)
    if path.endswith(".parquet") or any(c in path for c in "*?["):
        return ()
    return tio.error_files_of_run(path)


def _check_writable(output: str) -> None:
    """A local output prefix must be a folder chunkmill can write in, or one it can create:
    found now, not when the first table is written after the whole corpus is chunked.
    (An object store prefix is checked by its first write: a probe would need write access a
    plan does not.)"""
    if not _is_local(output):
        return
    existing = output
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UsageError(
            f"argument --output: cannot write under {output}: {existing} is a file, not a folder"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"argument --output: cannot write under {output}: {existing} is read-only")


@dataclass(frozen=True)
class ReportSettings:
    output: str
    run_id: str


def parse_report(argv: Sequence[str]) -> ReportSettings:
    """Parse ``chunkmill report`` arguments (without the ``report`` word) and find the run: the
    one named, else the one in ``OUTPUT/LATEST``. Only a finished run (with ``_SUCCESS``) can
    be reported."""
    args = build_parser().parse_args(["report", *argv])
    _prepare_filesystems([])
    output = _absolute(args.output).rstrip("/") or "/"
    latest = FileSystems.join(output, tio.LATEST)
    run_id = args.run
    if run_id is None:
        if not FileSystems.exists(latest):
            raise UsageError(f"no run in {output} yet; run `chunkmill run --output {output}` first")
        run_id = tio.read_text(latest).strip()
        if not _RUN_ID.match(run_id):
            raise UsageError(f"{latest} names no valid run ({run_id!r}); pass a run id as RUN")
    elif not _RUN_ID.match(run_id):
        raise UsageError(f"argument RUN: {run_id!r} is not a run id")
    if FileSystems.exists(FileSystems.join(tio.run_dir(output, run_id), tio.SUCCESS)):
        return ReportSettings(output=output, run_id=run_id)
    if _has_match(FileSystems.join(tio.run_dir(output, run_id), "**")):
        raise UsageError(
            f"run {run_id!r} in {output} did not finish (it has no {tio.SUCCESS}); "
            "there is nothing to report"
        )
    hint = (
        f" (LATEST names {tio.read_text(latest).strip()!r})" if FileSystems.exists(latest) else ""
    )
    raise UsageError(f"no run {run_id!r} in {output}{hint}")


def parse_plan(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse ``chunkmill plan`` arguments: the flags of ``run``, validated the same way."""
    build_parser().parse_known_args(["plan", *argv])  # for `plan --help`
    return parse_run(argv, now=now)


def parse_run(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse ``chunkmill run`` arguments (without the ``run`` word) and validate them."""
    args, beam_args = build_parser().parse_known_args(["run", *argv])
    unknown = unknown_beam_flags(beam_args)
    if unknown:
        raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")

    try:
        config = ChunkingConfig.create(
            args.strategy,
            tokenizer=args.tokenizer,
            context_prev_chars=args.context_prev_chars,
            context_next_chars=args.context_next_chars,
            max_tokens=args.max_tokens,
            overlap_tokens=args.overlap_tokens,
            chunk_size=args.chunk_size,
            chunk_overlap=args.chunk_overlap,
            pdf_engine=args.pdf_engine,
            limits=Limits(
                timeout_seconds=args.doc_timeout_seconds,
                memory_mb=args.doc_memory_mb,
                max_document_bytes=args.max_document_bytes,
                max_pdf_pages=args.max_pdf_pages,
            ),
        )
    except ValueError as e:
        raise UsageError(str(e)) from None

    now = now or dt.datetime.now(dt.timezone.utc)
    run_id = args.run_id or now.strftime("%Y%m%dT%H%M%SZ")
    if not _RUN_ID.match(run_id):
        raise UsageError(
            f"argument --run-id: {run_id!r} must be letters, digits, '.', '_' or '-' "
            "(at most 128, starting with a letter or digit)"
        )

    output = _absolute(args.output).rstrip("/") or "/"
    inputs = tuple(_absolute(p) for p in (args.input or [str(SAMPLE_CORPUS / "**")]))
    _prepare_filesystems(beam_args)
    _check_storage(inputs, output, args.billing_project)
    for pattern in inputs:
        if not storage.has_match(pattern, args.billing_project):
            raise UsageError(f"argument --input: {pattern!r} matches no file")

    _check_writable(output)
    if _has_match(FileSystems.join(tio.run_dir(output, run_id), "**")):
        raise UsageError(
            f"argument --run-id: run {run_id!r} already exists in {output}; choose another"
        )
    prior_mode, prior_manifest, prior_run_id = _resolve_prior(args.prior_manifest, output)

    return RunSettings(
        inputs=inputs,
        output=output,
        run_id=run_id,
        prior_mode=prior_mode,
        prior_manifest=prior_manifest,
        prior_run_id=prior_run_id,
        config=config,
        beam_args=tuple(beam_args),
        started_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        max_error_ratio=args.max_error_ratio,
        billing_project=args.billing_project,
        prior_errors=()
        if args.retry_failed
        else _prior_error_files(prior_run_id, args.prior_manifest, output),
    )
