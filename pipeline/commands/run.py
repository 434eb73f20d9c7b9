"""``chunkmill run``: chunk a corpus and diff it against the prior run.

``parse`` reads the command line into ``RunSettings`` without touching storage; ``main``
checks them against storage (``preflight.check_run``: buckets, inputs, output, the prior
proven), builds the graph, runs it and summarises.

Beam, pyarrow and the parsers take a second or more to import, so this module imports them
only inside ``main`` and after a command line parsed: ``--help`` and a usage error answer
at once (tests/unit/test_cli_startup.py).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import gc
import json
import logging
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from chunkmill.pipeline import options
from chunkmill.pipeline.options import (
    DEFAULT_OUTPUT,
    SAMPLE_CORPUS,
    Parser,
    RunSettings,
    UsageError,
    absolute,
    add_extraction_flags,
    add_log_level,
    add_storage_flags,
    location,
    model_tokenizer,
    non_negative_int,
    positive_int,
    refuse_stray_arguments,
    unknown_beam_flags,
)
from chunkmill.pipeline.usage import unrecognized
from chunkmill.refusal import refusal_line


def build_parser() -> Parser:
    from chunkmill.config import strategies

    run = Parser(
        prog="chunkmill run",
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
        type=positive_int,
        help="paragraph/section/semantic: chunk size limit in tokens",
    )
    run.add_argument(
        "--overlap-tokens", type=non_negative_int, help="paragraph: tokens carried between chunks"
    )
    run.add_argument(
        "--overlap-sentences",
        type=non_negative_int,
        help="paragraph: sentences carried where a chunk ends inside a line "
        "(with --overlap-tokens 0)",
    )
    run.add_argument(
        "--chunk-size", type=positive_int, help="sentence/recursive: chunk size in characters"
    )
    run.add_argument(
        "--chunk-overlap",
        type=non_negative_int,
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
        type=non_negative_int,
        metavar="N",
        help="semantic: sentences besides the nearest compared on each side of a boundary "
        "(default 1)",
    )
    run.add_argument(
        "--min-tokens",
        type=non_negative_int,
        metavar="N",
        help="semantic: a topic segment under N tokens joins its closer neighbour "
        "(default --max-tokens / 4)",
    )
    run.add_argument(
        "--context-prev-chars",
        type=non_negative_int,
        help="context window: characters of the chunks before (paragraph-window: 500)",
    )
    run.add_argument(
        "--context-next-chars",
        type=non_negative_int,
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
        type=positive_int,
        metavar="N",
        help="the largest text handed to the embedder (a chunk with its context), in tokens "
        "of --tokenizer; context is trimmed to fit, a longer chunk of sentence, recursive or "
        "paragraph-window is cut (default: paragraph/section their --max-tokens, sentence/"
        "recursive 512 or --chunk-size / 2 if larger, paragraph-window 512)",
    )
    run.add_argument(
        "--min-chunk-tokens",
        type=non_negative_int,
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
    add_extraction_flags(run)
    add_storage_flags(run)
    add_log_level(run)
    return run


def flag_names() -> dict[str, str]:
    """Each ``run`` flag by the config parameter it sets (its argparse ``dest``): how a
    config error, which names parameters (``chunkmill.chunking.base.ParameterError``),
    names the flags to change."""
    return {a.dest: a.option_strings[0] for a in build_parser()._actions if a.option_strings}


def parse(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """Parse and validate ``chunkmill run`` arguments (without the ``run`` word), touching no
    storage: the prior is not resolved yet (``prior_mode`` is ``--prior-manifest`` as given);
    ``preflight.check_run`` does that."""
    from chunkmill.pipeline import config_file, usage

    parser = build_parser()
    argv = config_file.apply(parser, argv)
    args, beam_args = parser.parse_known_args(list(argv))
    # Only now Beam and the rest: a mistake chunkmill's own parser finds is told without them.
    from chunkmill.chunking.base import ParameterError
    from chunkmill.config import ChunkingConfig, Limits
    from chunkmill.pipeline import runners
    from chunkmill.transforms import runstate, storage

    unknown = unknown_beam_flags(beam_args)
    if unknown:
        raise UsageError(unrecognized(unknown, usage.run_and_beam_flags(parser)))
    refuse_stray_arguments(beam_args, args.input or [])
    runners.check(beam_args)
    try:
        config = ChunkingConfig.create(
            args.strategy,
            tokenizer=model_tokenizer(args.model, args.tokenizer),
            **options.chunking_parameters(args),
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
        raise UsageError(e.render(flag_names())) from None
    except ValueError as e:
        raise UsageError(str(e)) from None

    now = now or options.launch_clock()
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


def run_settings(argv: Sequence[str], *, now: dt.datetime | None = None) -> RunSettings:
    """``parse``, then ``preflight.check_run``: the settings a run is built from."""
    settings = parse(argv, now=now)
    from chunkmill.pipeline import preflight  # imports Beam: after a usage error or --help

    return preflight.check_run(settings)


def main(argv: Sequence[str]) -> int:
    with _collector_for_a_run() as built:
        return _run(argv, built)


@contextlib.contextmanager
def _collector_for_a_run() -> Iterator[Callable[[], None]]:
    """Python's cyclic garbage collector, for a run; yields what to call once the graph is
    built.

    The collector costs a one-document run a fifth of its CPU, walking objects that live as
    long as the process: Beam's and pyarrow's modules while they are imported, the graph
    while it runs, all of them again at the interpreter's shutdown (docs/design.md,
    start-up). It is off until the graph is built, which makes next to no garbage, then on
    for the run with what start-up made left out (frozen); at the process's exit everything
    is frozen. A caller in the same process gets it back as it was; one that turned it off
    or froze objects of its own keeps it as it is, untouched."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield lambda: None
        return

    def built() -> None:
        gc.freeze()
        gc.enable()

    gc.disable()
    try:
        yield built
    finally:
        gc.unfreeze()
        gc.enable()
        atexit.unregister(gc.freeze)  # registered once, however many runs
        atexit.register(gc.freeze)


def _run(argv: Sequence[str], built: Callable[[], None]) -> int:
    settings = run_settings(argv)
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems

    from chunkmill.pipeline import graph, interrupts, launch, progress, report, signatures
    from chunkmill.transforms import runstate

    signatures.memoize()

    if not launch.waits_for_job(graph.pipeline_options(settings)):
        # Dataflow, a Flink cluster: submit and return; the job publishes by itself.
        return launch.submit(settings)
    # Before anything is built: no two runs share a folder.
    settings = launch.claim(settings)
    interrupts.on_interrupt(
        lambda signal: runstate.mark_interrupted(settings.output, settings.run_id, signal)
    )
    started = time.monotonic()
    shown = progress.start(settings)  # live progress of a local run (pipeline/progress.py)
    try:
        with beam.Pipeline(options=graph.pipeline_options(settings)) as p:
            graph.build(p, settings)
            built()
    except Exception as e:
        shown.stop()  # its last line before the failure's, not after (stop is idempotent)
        refused = refusal_line(e)
        if refused is not None:
            # Stopped on purpose (--max-error-ratio, --max-removed-ratio, a corrupt prior):
            # one line saying what to change, no traceback; exit 2 like any other refusal
            # to go on as asked, so a schedule can tell it from a crash (1). Its folder says
            # so (runs list shows it refused, runs gc deletes it without a grace period).
            try:
                runstate.mark_ended(settings.output, settings.run_id, runstate.REFUSED, refused)
            except Exception as marking:
                logging.debug("cannot mark run %s refused: %s", settings.run_id, marking)
            print(f"chunkmill: run {settings.run_id} failed: {refused}", file=sys.stderr)
            return 2
        # Not a bad document (those are errors/ rows): the run itself broke. Nothing was
        # published, so the next run diffs against what LATEST names now (read now: another
        # run may have published, or gc deleted this run's prior, while this one ran).
        logging.exception("pipeline failed")
        print(
            f"chunkmill: run {settings.run_id} failed before publishing; "
            f"LATEST names {runstate.describe_latest(settings.output)}",
            file=sys.stderr,
        )
        return 1
    finally:
        shown.stop()
    success = FileSystems.join(runstate.run_dir(settings.output, settings.run_id), runstate.SUCCESS)
    run_report = json.loads(runstate.read_text(success))
    print(report.summary(run_report, time.monotonic() - started))
    if settings.inputs == (str(SAMPLE_CORPUS / "**"),):  # the demo: show where to go next
        print(next_steps(settings.output, settings.run_id))
    return 0


def _shell_word(text: str) -> str:
    """``text`` as one shell word, in double quotes when that needs no escaping (easier to
    read than shlex's quoting of the single quotes inside)."""
    return f'"{text}"' if not any(c in text for c in '"$`\\!') else shlex.quote(text)


def next_steps(output: str, run_id: str) -> str:
    """Where a run's tables are and what to type next: printed after a run on the bundled
    sample corpus (``make demo``), a newcomer's first run. The current chunks, with their
    text, are read through ``chunkmill.api.read_state``."""
    columns = ["source_uri", "token_count", "text"]
    read = (
        f"import chunkmill.api as c; t = c.read_state({output!r}); "
        f"print(t.num_rows, 'current chunks'); print(t.select({columns!r}))"
    )
    out = shlex.quote(output)
    return "\n".join(
        [
            f"tables     {output}/runs/{run_id}/: chunks/ (what to embed), manifest/, "
            "removed/, errors/ (Parquet)",
            f"read them  python -c {_shell_word(read)}",
            f"next       chunkmill report --output {out}   # this run as an HTML page",
            f"           chunkmill run --output {out}   # again: nothing changed, nothing to embed",
        ]
    )
