"""``chunkmill eval``: how well chunks serve retrieval, on questions whose evidence is
character ranges of the documents (docs/evaluation.md).

The documents are listed, read and extracted as a run does them (the extracted text is what
the questions' ranges refer to), chunked with one or several configurations, and every
configuration's chunks of all documents go into one index; or the chunks are a finished run's
state (``--run``). Each question retrieves its top k chunks, scored by
:mod:`chunkmill.evaluation`.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chunkmill.backends import BACKENDS
from chunkmill.pipeline.options import (
    DEFAULT_OUTPUT,
    Parser,
    UsageError,
    absolute,
    location,
    model_tokenizer,
)
from chunkmill.pipeline.options import (
    build_parser as build_run_parser,
)

if TYPE_CHECKING:
    from chunkmill.config import ChunkingConfig
    from chunkmill.evaluation import EvalChunk, Question, Retriever, Scores
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
    run = next(
        a for a in build_run_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices["run"]
    return [a for a in run._actions if a.option_strings and a.option_strings[0] in CHUNKING_FLAGS]


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


def parse_eval(argv: Sequence[str]) -> EvalSettings:
    args = build_parser().parse_args(list(argv))
    retrievers = tuple(dict.fromkeys(args.retriever or ["bm25"]))
    if args.html is not None and not Path(args.html).resolve().parent.is_dir():
        raise UsageError(f"--html {args.html}: its folder does not exist")
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


# ---------------------------------------------------------------------------------------------
# Documents and questions


@dataclass(frozen=True)
class Document:
    uri: str
    extracted: Any  # chunkmill.extract.Extracted


def read_documents(inputs: Sequence[str]) -> list[Document]:
    """The documents ``inputs`` list, extracted as a run extracts them; one that cannot be
    read or extracted is left out with a line on stderr."""
    from chunkmill.api import ExtractionError, extract_text
    from chunkmill.items import ListingError, SourceFile
    from chunkmill.transforms import storage

    documents: dict[str, Document] = {}
    for pattern in inputs:
        for item in storage.plan(pattern):
            for listed in storage.list_shard(item):
                if isinstance(listed, ListingError):
                    raise UsageError(
                        f"--input {pattern}: cannot list {listed.uri}: {listed.message}"
                    )
                if not isinstance(listed, SourceFile) or listed.uri in documents:
                    continue
                try:
                    data = storage.read_object(listed.uri, listed.version)
                    extracted = extract_text(data, listed.uri)
                except ExtractionError as e:
                    _note(f"left out {listed.uri}: {e.reason}")
                    continue
                except OSError as e:
                    _note(f"left out {listed.uri}: {e}")
                    continue
                documents[listed.uri] = Document(listed.uri, extracted)
    if not documents:
        raise UsageError(f"--input {' '.join(inputs)}: no document to evaluate on")
    return list(documents.values())


def _note(line: str) -> None:
    print(f"chunkmill eval: {line}", file=sys.stderr)


def resolve(questions: Sequence[Question], uris: Sequence[str]) -> list[Question]:
    """Each question with the document its ``corpus_id`` names: the one document whose path,
    with or without its extension, ends with the corpus_id as whole path components."""
    found: dict[str, str] = {}
    for q in questions:
        if q.corpus_id not in found:
            found[q.corpus_id] = _named(q, uris)
    return [replace(q, doc=found[q.corpus_id]) for q in questions]


def _named(q: Question, uris: Sequence[str]) -> str:
    cid = q.corpus_id.strip("/")
    matches = [u for u in uris if any(_ends_with(n, cid) for n in (u, _no_extension(u)))]
    if len(matches) == 1:
        return matches[0]
    where = f"--questions line {q.line}: corpus_id {q.corpus_id!r}"
    if not matches:
        raise UsageError(
            f"{where} names no document of the {len(uris)} read (it must be the end of a "
            "document's path, with or without its extension)"
        )
    raise UsageError(
        f"{where} names {len(matches)} documents ({matches[0]}, {matches[1]}, ...); "
        "give more of its path"
    )


def _ends_with(path: str, cid: str) -> bool:
    return path == cid or path.endswith("/" + cid)


def _no_extension(uri: str) -> str:
    head, _, name = uri.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return f"{head}/{stem}" if head else stem


def load_questions(path: str) -> list[Question]:
    from chunkmill.evaluation import QuestionError, read_questions

    try:
        return read_questions(path)
    except QuestionError as e:
        raise UsageError(f"--questions {e}") from None


# ---------------------------------------------------------------------------------------------
# Chunks


def chunk_documents(documents: Sequence[Document], config: ChunkingConfig) -> list[EvalChunk]:
    """Every document's chunks under ``config``, as a run makes them; what the retriever
    indexes is what the embedder would receive (the chunk with its context, if any)."""
    from chunkmill import ids
    from chunkmill.config import Chunking
    from chunkmill.document import PROCESSED, chunk_extracted
    from chunkmill.evaluation import EvalChunk
    from chunkmill.items import WorkItem

    chunking = Chunking(config)
    chunks = []
    for d in documents:
        text = d.extracted.text
        item = WorkItem(doc_id=ids.doc_id(d.uri), uri=d.uri, size_bytes=len(text))
        outcome = chunk_extracted(item, d.extracted, ids.sha256_hex(text.encode()), chunking)
        if outcome.status != PROCESSED:
            continue  # whitespace only: no chunk, as in a run
        chunks += [
            EvalChunk(d.uri, r["char_start"], r["char_end"], r["text_with_context"] or r["text"])
            for r in outcome.occurrences
        ]
    return chunks


def configuration_chunks(documents: Sequence[Document], c: Configuration) -> list[EvalChunk]:
    """The chunks of one row: LangChain's splitter over the extracted texts, or chunkmill's."""
    if c.splitter is not None:
        return c.splitter.chunks({d.uri: d.extracted.text for d in documents})
    assert c.config is not None
    return chunk_documents(documents, c.config)


def run_chunks(output: str, run_id: str) -> list[EvalChunk]:
    """The chunks of a finished run's state: its manifest's occurrences, with their texts
    from the chunks/ tables of the runs up to it."""
    from chunkmill.evaluation import EvalChunk
    from chunkmill.pipeline import runs
    from chunkmill.transforms import tables

    state = runs.state_files(output, run_id)
    columns = ["source_uri", "chunk_hash", "char_start", "char_end"]
    rows = [r for t in tables.read_parquet_batches(state.manifest, columns) for r in t.to_pylist()]
    wanted = {r["chunk_hash"] for r in rows}
    texts: dict[str, str] = {}
    for t in tables.read_parquet_batches(state.chunks, ["chunk_hash", "text", "text_with_context"]):
        for r in t.to_pylist():
            if r["chunk_hash"] in wanted and r["chunk_hash"] not in texts:
                texts[r["chunk_hash"]] = r["text_with_context"] or r["text"]
    missing = wanted - texts.keys()
    if missing:
        raise UsageError(
            f"run {run_id}: the text of {len(missing)} chunks is missing from {output}"
        )
    rows.sort(key=lambda r: (r["source_uri"], r["char_start"], r["char_end"]))
    return [
        EvalChunk(r["source_uri"], r["char_start"], r["char_end"], texts[r["chunk_hash"]])
        for r in rows
    ]


# ---------------------------------------------------------------------------------------------
# The command


@dataclass(frozen=True)
class Result:
    label: str
    scores: dict[str, Scores]  # by retriever


def make_retrievers(settings: EvalSettings) -> dict[str, Retriever]:
    from chunkmill import embedding
    from chunkmill.evaluation import Bm25Retriever, ModelRetriever

    made: dict[str, Retriever] = {}
    for name in settings.retrievers:
        if name == "bm25":
            made[name] = Bm25Retriever()
            continue
        try:
            embedding.check_runtime(settings.backend)
            model = embedding.describe(settings.model or embedding.DEFAULT_MODEL, settings.backend)
            made[name] = ModelRetriever(model)
        except embedding.ModelUnavailable as e:
            raise UsageError(str(e)) from None
    return made


def evaluate(settings: EvalSettings) -> list[Result]:
    from chunkmill.evaluation import questions as q_file
    from chunkmill.evaluation import score

    questions = load_questions(settings.questions)
    if settings.run_id is not None:
        chunks = run_chunks(settings.output, settings.run_id)
        questions = resolve(questions, sorted({c.doc for c in chunks}))
        sets = [(f"run {settings.run_id}", chunks)]
        retrievers = make_retrievers(settings)
    else:
        retrievers = make_retrievers(settings)  # a missing model said before any reading
        documents = read_documents(settings.inputs)
        questions = resolve(questions, [d.uri for d in documents])
        wrong = q_file.check_contents(questions, {d.uri: d.extracted.text for d in documents})
        if wrong is not None:
            raise UsageError(
                f"--questions {wrong}: the ranges must be of the text chunkmill extracts"
            )
        sets = [(c.label, configuration_chunks(documents, c)) for c in settings.configurations]
    return [
        Result(label, {n: score(chunks, questions, r, settings.k) for n, r in retrievers.items()})
        for label, chunks in sets
    ]


def command(argv: Sequence[str]) -> int:
    settings = parse_eval(argv)
    from chunkmill.evaluation import report

    results = evaluate(settings)
    rows = [report.Row(r.label, r.scores) for r in results]
    print(report.table(rows, settings.k))
    if len(rows) > 1:  # the first configuration is what the others are measured against
        print(report.paired_table(rows, rows[0]))
    if settings.html is not None:
        Path(settings.html).write_text(report.html_page(rows, settings.k), encoding="utf-8")
        print(f"page       {settings.html}")
    return 0
