"""Where a ``chunkmill run`` spends its CPU: a py-spy profile summarised per Beam stage and per
function.

    python -m benchmarks.profiling --docs 5000      # generates the mixed corpus, then profiles
    python -m benchmarks.profiling --corpus DIR     # an existing corpus
    python -m benchmarks.profiling --raw FILE       # summarise an earlier ``py-spy record -f raw``

py-spy samples the running process from outside (50 samples/s, on-CPU samples only), so the
pipeline runs at full speed; a tracing profiler (cProfile, and to a lesser degree
pyinstrument) inflates the deep Python call chains of pypdf and Beam's coders several-fold
and skews the shares. The run is a first run (``--prior-manifest none``) on one worker
(``in_memory``), so every stage is in the one process py-spy watches.

A sample is charged to the first of these, searched from the innermost frame outwards:
chunkmill's DoFns (``ProcessDocuments`` split into PDF extraction, text extraction, chunking
and row building; ``PlanDocs``; ``MarkNew``), the Parquet sink (``WriteTables``), the
listing (``ListDocuments``), reading the prior manifest; everything else inside the runner is
"Beam: coders, shuffle, bundles", and outside it "start-up: imports, graph construction".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter

from benchmarks import mixed_corpus

# (stage, substring of a frame); the first match from the innermost frame outwards wins.
_STAGES: tuple[tuple[str, str], ...] = (
    # Parsed formats (PDF, HTML, DOCX) are extracted in a child process py-spy does not
    # watch; what shows here is text extraction in the worker and the wait for the child.
    ("ProcessDocuments: extraction", "(chunkmill/extract/"),
    ("ProcessDocuments: waiting on the parser child", "(chunkmill/isolation.py"),
    ("ProcessDocuments: chunking", ".split (chunkmill/chunking/"),
    ("ProcessDocuments: chunk rows (hash, ids, tokens)", "_chunk_rows (chunkmill/document.py"),
    ("ProcessDocuments: rows to Arrow batches", "_pack_occurrences ("),
    ("ProcessDocuments: other (read, sha256)", "_ProcessDocuments.process ("),
    ("PlanDocs", "_PlanBucket.process"),
    ("MarkNew", "_MarkNew.process"),
    ("ReadPriorManifest: summaries and hashes", "SummariseParts.process"),
    ("ApplyVerdicts: prior rows kept or removed", "ApplyVerdicts.process"),
    ("WriteTables: rows to Arrow", "transforms/parquet_batches.py"),
    ("WriteTables: Parquet files", "apache_beam/io/parquetio.py"),
    ("WriteTables: Parquet files", "apache_beam/io/iobase.py"),
    ("WriteTables: Parquet files", "apache_beam/io/filebasedsink.py"),
    ("ListDocuments", "transforms/storage.py"),
    ("Publish", "publish (transforms/publish.py"),
)
_RUNNER = "run_pipeline (apache_beam/runners/"


def stage_of(frames: list[str]) -> str:
    if not any(_RUNNER in f for f in frames):
        if any("_bootstrap (threading.py" in f for f in frames):
            # Not the main thread: the runner's gRPC server, data plane and state threads
            # (and the progress line's, which barely registers).
            return "Beam: runner threads (gRPC, data plane)"
        return "start-up: imports, graph construction"
    for frame in reversed(frames):
        for stage, marker in _STAGES:
            if marker in frame:
                return stage
    return "Beam: coders, shuffle, bundles"


def _function(frame: str) -> str:
    # "name (path/to/file.py:LINE)" -> "name (path/to/file.py)": one entry per function.
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if where else name


def summarise(raw_lines: list[str], top: int = 25) -> list[str]:
    stages: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw_lines:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        stages[stage_of(frames)] += count
        own[_function(frames[-1])] += count
        for fn in {_function(f) for f in frames}:
            inclusive[fn] += count
    if not total:
        return ["no samples"]
    out = [
        f"{total} samples",
        "",
        "| stage | share of CPU samples |",
        "|---|---:|",
    ]
    out += [f"| {stage} | {n / total:.1%} |" for stage, n in stages.most_common()]
    out += ["", "| function (self time) | share |", "|---|---:|"]
    out += [f"| `{fn}` | {n / total:.1%} |" for fn, n in own.most_common(top)]
    chunkmill = [
        (fn, n)
        for fn, n in inclusive.most_common()
        if ("chunkmill/" in fn or "transforms/" in fn) and "apache_beam" not in fn
    ]
    out += ["", "| chunkmill function (inclusive) | share |", "|---|---:|"]
    out += [f"| `{fn}` | {n / total:.1%} |" for fn, n in chunkmill[:top]]
    return out


def record(corpus: str, raw: str, beam_args: list[str]) -> None:
    out = tempfile.mkdtemp(prefix="chunkmill-profile-")
    cmd = [
        *("py-spy", "record", "--rate", "50", "--format", "raw", "--output", raw, "--"),
        *(sys.executable, "-m", "chunkmill", "run", "--input", os.path.join(corpus, "**")),
        *("--output", out, "--prior-manifest", "none", *beam_args),
    ]
    subprocess.run(cmd, check=True, stdout=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profiling", description=__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--docs", type=int, default=5_000, help="generate a corpus this size")
    source.add_argument("--corpus", help="profile a run over this corpus directory")
    source.add_argument("--raw", help="only summarise this py-spy raw file")
    parser.add_argument("--seed", type=int, default=mixed_corpus.DEFAULT_SEED)
    args = parser.parse_args(argv)
    raw = args.raw
    if raw is None:
        corpus = args.corpus
        if corpus is None:
            corpus = tempfile.mkdtemp(prefix="chunkmill-profile-corpus-")
            mixed_corpus.write_corpus(corpus, args.docs, args.seed)
        raw = os.path.join(tempfile.mkdtemp(prefix="chunkmill-profile-"), "profile.txt")
        record(corpus, raw, ["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    with open(raw) as f:
        print("\n".join(summarise(f.readlines())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
