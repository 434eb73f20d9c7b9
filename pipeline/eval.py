"""``chunkmill eval``: how well chunks serve retrieval, on questions whose evidence is
character ranges of the documents (docs/evaluation.md).

The documents are listed, read and extracted as a run does them (the extracted text is what
the questions' ranges refer to), chunked with one or several configurations, and every
configuration's chunks of all documents go into one index; or the chunks are a finished run's
state (``--run``). Each question retrieves its top k chunks, scored by
:mod:`chunkmill.evaluation`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chunkmill.pipeline.commands.eval import Configuration
from chunkmill.pipeline.options import UsageError

if TYPE_CHECKING:
    from chunkmill.config import ChunkingConfig
    from chunkmill.evaluation import EvalChunk, Question, Retriever, Scores
    from chunkmill.pipeline.commands.eval import EvalSettings


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
    from chunkmill.transforms import parquet_io

    state = runs.state_files(output, run_id)
    columns = ["source_uri", "chunk_hash", "char_start", "char_end"]
    rows = [
        r for t in parquet_io.read_parquet_batches(state.manifest, columns) for r in t.to_pylist()
    ]
    wanted = {r["chunk_hash"] for r in rows}
    texts: dict[str, str] = {}
    for t in parquet_io.read_parquet_batches(
        state.chunks, ["chunk_hash", "text", "text_with_context"]
    ):
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


def command(settings: EvalSettings) -> int:
    """``chunkmill eval`` with its settings parsed (``chunkmill.pipeline.commands.eval``)."""
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
