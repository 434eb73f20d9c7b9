"""Chunking throughput, chunkmill against the splitters users would pick instead.

    python -m benchmarks.chunkers [--docs N] [--repeat R] [--seed S]

Every contender runs in this one process over the same synthetic Markdown corpus
(:mod:`benchmarks.corpus`), one document at a time, in interleaved order: each repeat runs
every contender once, starting one place further down the list than the previous repeat, so
drift in the machine's load spreads over all of them. Each timed run gets a fresh chunker
(no cache survives from one repeat to the next), after a short untimed warm-up pass and a
``gc.collect()``; the garbage collector stays on while timing, as it is in production.

The figure is MB/s per core: UTF-8 bytes of the corpus (1 MB = 10^6 bytes, the same
denominator for every row) over the *best* (smallest) CPU time of the process across repeats.
CPU time rather than wall time because this machine is shared and another tenant's load
inflates wall time only; the best rather than the median because noise only ever adds time.
The median is printed beside it, and a warning if a contender used more than one core.

Results are printed, never asserted: benchmarks do not gate CI.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import pkgutil
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpus_module

DEFAULT_DOCS = 3_000  # ~25 MB of Markdown with the default seed
DEFAULT_REPEAT = 9  # ~1-1.5 minutes in all on the 2-core benchmark machine
WARMUP_DOCS = 20

# chars4 turns token budgets into character budgets: ceil(len / 4) <= T  <=>  len <= 4 * T.
PARAGRAPH_MAX_CHARS = 700 * 4  # paragraph's max_tokens=700
PARAGRAPH_OVERLAP_CHARS = 80 * 4  # paragraph's overlap_tokens=80
SECTION_MAX_CHARS = 512 * 4  # section's max_tokens=512, no overlap
SEMCHUNK_TOKENS = 700

BASELINE = "langchain-recursive"
PARAGRAPH_FLOOR = 1.0  # paragraph, full per-document work, vs LangChain Recursive alone
SECTION_FLOOR = 5.0  # section, full per-document work, vs LangChain MarkdownHeader + Recursive

# A runner chunks the whole corpus and returns the number of chunks it produced.
Runner = Callable[[], int]


@dataclass(frozen=True)
class Corpus:
    names: list[str]
    texts: list[str]
    blobs: list[bytes]  # the UTF-8 bytes process_document receives, encoded before timing

    @property
    def n_bytes(self) -> int:
        return sum(map(len, self.blobs))

    def head(self, n: int) -> Corpus:
        return Corpus(self.names[:n], self.texts[:n], self.blobs[:n])


@dataclass
class Contender:
    key: str
    label: str
    config: str
    # Builds fresh chunker state and returns the runner; not timed.
    build: Callable[[Corpus], Runner]
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    chunks: set[int] = field(default_factory=set)


# -- chunkmill ---------------------------------------------------------------------------------


def chunkmill_strategies() -> list[str]:
    """Every registered strategy but ``auto``. The registry fills up as strategy modules are
    imported, so import every module of the package first: a strategy that a lazy loader
    does not (yet) know is still measured. A module that fails to import is reported."""
    import chunkmill.chunking as package
    from chunkmill.chunking import available

    for module in pkgutil.iter_modules(package.__path__):
        try:
            importlib.import_module(f"{package.__name__}.{module.name}")
        except Exception as e:  # a half-finished strategy must not stop the benchmark
            print(f"note: transforms.chunking.{module.name} not importable: {e}", file=sys.stderr)
    return [name for name in available() if name != "auto"]


def _params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def chunkmill_split(name: str) -> Contender:
    from chunkmill.chunking import make_chunker

    def build(corpus: Corpus) -> Runner:
        chunker = make_chunker(name)
        texts = corpus.texts
        return lambda: sum(len(chunker.split(text)) for text in texts)

    params = _params(make_chunker(name).params())
    return Contender(
        f"chunkmill-{name}", f"chunkmill `{name}`", f"split() only; {params}; chars4", build
    )


def chunkmill_full(name: str) -> Contender:
    """``process_document`` on a new document: SHA-256 of the bytes, decode and newline
    normalisation, chunking, SHA-256 and id per chunk, one record dict per chunk."""
    from chunkmill import ids
    from chunkmill.config import Chunking, ChunkingConfig
    from chunkmill.document import PROCESSED, process_document
    from chunkmill.items import WorkItem

    config = ChunkingConfig.create(name, tokenizer="chars4")

    def build(corpus: Corpus) -> Runner:
        chunking = Chunking(config)
        # The listing computes doc ids before process_document runs, so they are not timed.
        items = []
        for doc_name, data in zip(corpus.names, corpus.blobs, strict=True):
            uri = f"bench/{doc_name}"
            items.append((WorkItem(ids.doc_id(uri), uri, len(data)), data))

        def run() -> int:
            chunks = 0
            for item, data in items:
                outcome = process_document(item, data, chunking)
                if outcome.status != PROCESSED:
                    raise RuntimeError(f"{item.uri}: {outcome.status} {outcome.error}")
                chunks += len(outcome.occurrences)
            return chunks

        return run

    params = _params(config.description.get("params", {}))
    return Contender(
        f"chunkmill-{name}-full",
        f"chunkmill `{name}` full work",
        f"process_document: decode, chunk, SHA-256, records; {params}; chars4",
        build,
    )


# -- the alternatives ----------------------------------------------------------------------


def langchain_recursive() -> Contender:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    def build(corpus: Corpus) -> Runner:
        splitter = RecursiveCharacterTextSplitter(
            chunk_size=PARAGRAPH_MAX_CHARS, chunk_overlap=PARAGRAPH_OVERLAP_CHARS
        )
        texts = corpus.texts
        return lambda: sum(len(splitter.split_text(text)) for text in texts)

    return Contender(
        BASELINE,
        "LangChain RecursiveCharacterTextSplitter",
        f"chunk_size={PARAGRAPH_MAX_CHARS}, chunk_overlap={PARAGRAPH_OVERLAP_CHARS} (chars)",
        build,
    )


def langchain_markdown() -> Contender:
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    headers = [("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")]

    def build(corpus: Corpus) -> Runner:
        by_header = MarkdownHeaderTextSplitter(headers, strip_headers=False)
        by_size = RecursiveCharacterTextSplitter(chunk_size=SECTION_MAX_CHARS, chunk_overlap=0)
        texts = corpus.texts
        return lambda: sum(
            len(by_size.split_documents(by_header.split_text(text))) for text in texts
        )

    return Contender(
        "langchain-markdown",
        "LangChain MarkdownHeader + Recursive",
        f"headers # to ####, strip_headers=False; then chunk_size={SECTION_MAX_CHARS}, "
        "chunk_overlap=0",
        build,
    )


def chonkie_recursive() -> Contender:
    from chonkie import RecursiveChunker

    def build(corpus: Corpus) -> Runner:
        # The tokenizer goes positionally: chonkie 1.0.x named it tokenizer_or_token_counter.
        chunker = RecursiveChunker("character", chunk_size=PARAGRAPH_MAX_CHARS)
        texts = corpus.texts
        return lambda: sum(len(chunker.chunk(text)) for text in texts)

    return Contender(
        "chonkie-recursive",
        "chonkie RecursiveChunker",
        f"tokenizer=character, chunk_size={PARAGRAPH_MAX_CHARS} (no overlap option)",
        build,
    )


def chonkie_sentence() -> Contender:
    from chonkie import SentenceChunker

    def build(corpus: Corpus) -> Runner:
        chunker = SentenceChunker(
            "character",
            chunk_size=PARAGRAPH_MAX_CHARS,
            chunk_overlap=PARAGRAPH_OVERLAP_CHARS,
        )
        texts = corpus.texts
        return lambda: sum(len(chunker.chunk(text)) for text in texts)

    return Contender(
        "chonkie-sentence",
        "chonkie SentenceChunker",
        f"tokenizer=character, chunk_size={PARAGRAPH_MAX_CHARS}, "
        f"chunk_overlap={PARAGRAPH_OVERLAP_CHARS}",
        build,
    )


def semchunk_chunker() -> Contender:
    import semchunk

    from chunkmill.chunking.base import chars4

    def build(corpus: Corpus) -> Runner:
        # A fresh chunkerify per timed run: its memoized token counter must start empty.
        chunker = semchunk.chunkerify(chars4, chunk_size=SEMCHUNK_TOKENS)
        texts = corpus.texts
        return lambda: sum(len(chunker(text)) for text in texts)

    return Contender(
        "semchunk",
        "semchunk",
        f"token_counter=chars4, chunk_size={SEMCHUNK_TOKENS} (= {PARAGRAPH_MAX_CHARS} chars), "
        "no overlap",
        build,
    )


ALTERNATIVES = (
    langchain_recursive,
    langchain_markdown,
    chonkie_recursive,
    chonkie_sentence,
    semchunk_chunker,
)


# Strategies that run an embedding model: thousands of times slower, measured on their own
# (python -m benchmarks.semantic).
MODEL_STRATEGIES = frozenset({"semantic"})


def contenders() -> list[Contender]:
    names = [name for name in chunkmill_strategies() if name not in MODEL_STRATEGIES]
    found = [chunkmill_full(name) for name in ("paragraph", "section") if name in names]
    found += [chunkmill_split(name) for name in names]
    for make in ALTERNATIVES:
        try:
            found.append(make())
        except ImportError as e:
            print(f"note: skipping {make.__name__}: {e} (pip install chunkmill[bench])")
    return found


# -- measuring ---------------------------------------------------------------------------------


def measure(entries: list[Contender], corpus: Corpus, repeat: int) -> None:
    warmup = corpus.head(WARMUP_DOCS)
    for contender in entries:  # compile regexes, fill lazy imports
        contender.chunks.clear()
        contender.build(warmup)()
    for r in range(repeat):
        shift = r % len(entries)
        for contender in entries[shift:] + entries[:shift]:
            run = contender.build(corpus)
            gc.collect()
            wall0, cpu0 = time.perf_counter(), time.process_time()
            chunks = run()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            contender.cpu.append(cpu)
            contender.wall.append(wall)
            contender.chunks.add(chunks)
            del run
        print(f"  repeat {r + 1}/{repeat} done", file=sys.stderr, flush=True)


def mb_per_s(n_bytes: int, seconds: float) -> float:
    return n_bytes / 1e6 / seconds if seconds > 0 else float("inf")


def table(entries: list[Contender], n_bytes: int) -> str:
    base = next((c for c in entries if c.key == BASELINE), None)
    base_rate = mb_per_s(n_bytes, min(base.cpu)) if base else None
    rows = [
        "| contender | configuration | MB/s per core (best) | MB/s (median) "
        "| vs LangChain Recursive | chunks |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c in entries:
        rate = mb_per_s(n_bytes, min(c.cpu))
        ratio = f"{rate / base_rate:.2f}x" if base_rate else "n/a"
        chunks = "/".join(str(n) for n in sorted(c.chunks))  # one value unless nondeterministic
        config = c.config.replace("|", "\\|")  # a "|" would end the Markdown cell
        rows.append(
            f"| {c.label} | {config} | {rate:.1f} "
            f"| {mb_per_s(n_bytes, statistics.median(c.cpu)):.1f} | {ratio} | {chunks} |"
        )
    return "\n".join(rows)


def floor_line(
    what: str, entries: dict[str, Contender], key: str, base_key: str, floor: float, n: int
) -> str:
    if key not in entries or base_key not in entries:
        missing = key if key not in entries else base_key
        return f"SKIP  {what}: {missing} not measured"
    ratio = min(entries[base_key].cpu) / min(entries[key].cpu)
    verdict = "PASS" if ratio >= floor else "FAIL"
    rate, base = (mb_per_s(n, min(entries[k].cpu)) for k in (key, base_key))
    return f"{verdict}  {what}: {ratio:.2f}x (floor {floor:.1f}x; {rate:.1f} vs {base:.1f} MB/s)"


# -- environment -------------------------------------------------------------------------------

_LIBRARIES = (
    "chunkmill",
    "langchain-text-splitters",
    "langchain-core",
    "chonkie",
    "chonkie-core",
    "semchunk",
)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_revision() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev or "unknown"


def environment() -> list[str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return [
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}",
        f"cpu: {_cpu_model()}; {os.cpu_count()} cores, {usable} usable by this process; "
        "every contender runs on one core",
        "libraries: " + ", ".join(f"{d} {_version(d)}" for d in _LIBRARIES),
        f"chunkmill revision: {_git_revision()}",
    ]


# -- the command -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chunkers", description=__doc__)
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS, help="corpus size in documents")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="timed runs each")
    parser.add_argument("--seed", type=int, default=corpus_module.DEFAULT_SEED)
    args = parser.parse_args(argv)
    if args.docs < 1 or args.repeat < 1:
        parser.error("--docs and --repeat must be at least 1")

    started = time.perf_counter()
    docs = corpus_module.generate(args.docs, args.seed)
    corpus = Corpus(
        [name for name, _ in docs], [text for _, text in docs], [t.encode() for _, t in docs]
    )
    n_bytes = corpus.n_bytes
    sizes = sorted(map(len, corpus.blobs))
    entries = contenders()

    print("chunkmill chunking benchmark")
    for line in environment():
        print(f"  {line}")
    print(
        f"  corpus: {len(docs)} synthetic Markdown documents (seed {args.seed}), "
        f"{n_bytes / 1e6:.1f} MB; document size median {statistics.median(sizes) / 1e3:.1f} KB, "
        f"range {sizes[0] / 1e3:.1f}-{sizes[-1] / 1e3:.1f} KB"
    )
    print(
        f"  timing: {args.repeat} interleaved repeats; MB/s = corpus bytes / best CPU time "
        "(1 MB = 10^6 bytes)"
    )
    sys.stdout.flush()

    measure(entries, corpus, args.repeat)

    print()
    print(table(entries, n_bytes))
    print()
    by_key = {c.key: c for c in entries}
    print(
        floor_line(
            "paragraph full work vs LangChain Recursive alone",
            by_key,
            "chunkmill-paragraph-full",
            BASELINE,
            PARAGRAPH_FLOOR,
            n_bytes,
        )
    )
    print(
        floor_line(
            "section full work vs LangChain MarkdownHeader + Recursive",
            by_key,
            "chunkmill-section-full",
            "langchain-markdown",
            SECTION_FLOOR,
            n_bytes,
        )
    )
    print(
        floor_line(
            "(for reference) section split() only vs the same",
            by_key,
            "chunkmill-section",
            "langchain-markdown",
            SECTION_FLOOR,
            n_bytes,
        )
    )
    for c in entries:
        if any(cpu > 1.1 * wall for cpu, wall in zip(c.cpu, c.wall, strict=True)):
            print(f"warning: {c.label} used more than one core (CPU time > wall time)")
        if len(c.chunks) > 1:
            print(f"warning: {c.label} gave different chunk counts across runs: {c.chunks}")
    print(f"\n(total {time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
