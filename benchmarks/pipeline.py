"""End-to-end speed and scale of ``chunkmill run`` on the local runner, one command.

    python -m benchmarks.pipeline            # the full benchmark: ~10-15 minutes on 2 cores
    python -m benchmarks.pipeline --quick    # smoke test on a tiny corpus, well under a minute

Four measurements on a mixed-format corpus (:mod:`benchmarks.mixed_corpus`: Markdown, prose,
code, PDFs), each printed as a table, then one PASS/FAIL/SKIP line per floor of the issue:

1. **Throughput**: documents/s and MB/s of the whole pipeline (``python -m chunkmill run`` in
   a subprocess: start-up, listing, reading, extraction, chunking, hashing, the diff, Parquet,
   the run report), against the floor of the same per-document work in a plain
   single-process loop (:mod:`benchmarks.plain_loop`) on the same corpus, in the same run,
   interleaved. The ratio is of the best wall times.
2. **Scaling**: ``--direct_running_mode=multi_processing`` with ``--direct_num_workers`` 1
   and 2, interleaved with the rows above.
3. **Memory**: peak RSS of the whole process tree (the runner and every worker it starts) on
   first runs over nested corpora of 1x, 10x and 100x the base size.
4. **Incremental**: on the largest memory corpus, after its full run: a re-run with nothing
   changed, then a re-run after 1% of the documents were rewritten (nothing else touched);
   each as a share of the full run's wall time.

Every run is a subprocess measured from outside: wall time, CPU time of the process and all
its descendants (``RUSAGE_CHILDREN``), and the peak of the summed RSS of the process tree,
sampled every 50 ms with psutil. The machine is shared, so every figure carries the load
average seen while it ran; compare ratios measured side by side, not absolute figures across
runs. Results are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks import mixed_corpus

# The floors.
FLOOR_PIPELINE_VS_LOOP = 1.5  # one-worker pipeline wall time / plain-loop wall time, at most
FLOOR_SCALING = 1.6  # 1-worker / 2-worker wall time, at least
FLOOR_MEMORY = 1.3  # peak RSS at 100x / at 1x, at most
FLOOR_INCREMENTAL = 0.15  # 1%-changed re-run / full run wall time, at most
INCREMENTAL_MIN_FULL_S = 120.0  # ... on a corpus whose full run takes at least this long

_SAMPLE_S = 0.05  # RSS sampling period: a worker's peak lasts far longer than this

ONE_WORKER = ("--direct_num_workers=1", "--direct_running_mode=in_memory")
MP_ONE = ("--direct_num_workers=1", "--direct_running_mode=multi_processing")
MP_TWO = ("--direct_num_workers=2", "--direct_running_mode=multi_processing")


@dataclass
class Sizes:
    docs: int  # throughput and scaling corpus
    memory_docs: int  # the 1x memory corpus
    scales: tuple[int, ...]  # multiples of memory_docs; the largest also serves incremental
    repeat: int  # interleaved repeats of the throughput rows
    edit_fraction: float
    memory_mp: bool  # also measure the runner and a worker apart (multi_processing)


FULL = Sizes(
    docs=2_000, memory_docs=200, scales=(1, 10, 100), repeat=3, edit_fraction=0.01, memory_mp=True
)
QUICK = Sizes(
    docs=20, memory_docs=10, scales=(1, 2, 4), repeat=1, edit_fraction=0.1, memory_mp=False
)


@dataclass
class Measurement:
    wall_s: float
    cpu_s: float
    peak_rss: int  # bytes, summed over the process tree
    load: float  # 1-minute load average at the end of the run
    stdout: str = ""
    peak_root_rss: int = 0  # the process started (with multi_processing: the runner)
    peak_child_rss: int = 0  # its largest descendant (with multi_processing: a worker)


def _tree_rss(proc) -> tuple[int, int, int]:
    """RSS of ``proc`` and its descendants: (sum, ``proc``'s own, the largest descendant's)."""
    import psutil

    try:
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0, 0, 0
    own = largest = total = 0
    for p in [proc, *children]:
        with contextlib.suppress(psutil.Error):  # it ended between the listing and the read
            rss = p.memory_info().rss
            total += rss
            if p is proc:
                own = rss
            else:
                largest = max(largest, rss)
    return total, own, largest


class Capped(Exception):
    """A run stopped because its process tree grew past the cap."""

    def __init__(self, wall_s: float, peak_rss: int) -> None:
        super().__init__(f"stopped after {wall_s:.0f} s at {peak_rss / 2**20:,.0f} MB")
        self.wall_s = wall_s
        self.peak_rss = peak_rss


def measure(
    cmd: Sequence[str], *, cwd: str | None = None, rss_cap: int | None = None
) -> Measurement:
    """Run ``cmd`` to completion; raises ``RuntimeError`` with its stderr if it fails. With
    ``rss_cap`` (bytes), the process tree is killed once it grows past it (``Capped``)."""
    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = psutil.Popen(list(cmd), stdout=out, stderr=err, cwd=cwd)
        peak = peak_own = peak_child = 0
        while proc.poll() is None:
            total, own, child = _tree_rss(proc)
            peak, peak_own = max(peak, total), max(peak_own, own)
            peak_child = max(peak_child, child)
            if rss_cap is not None and total > rss_cap:
                for p in [*proc.children(recursive=True), proc]:
                    with contextlib.suppress(psutil.Error):
                        p.kill()
                proc.wait()
                raise Capped(time.perf_counter() - start, peak)
            time.sleep(_SAMPLE_S)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measurement(wall, cpu, peak, os.getloadavg()[0], stdout, peak_own, peak_child)


def chunkmill_cmd(corpus: str, output: str, beam_args: Sequence[str], *, prior: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chunkmill",
        "run",
        "--input",
        os.path.join(corpus, "**"),
        "--output",
        output,
        "--prior-manifest",
        prior,
        *beam_args,
    ]


def loop_cmd(corpus: str, output: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.plain_loop", corpus, output]


@dataclass
class Row:
    key: str
    label: str
    runs: list[Measurement] = field(default_factory=list)

    @property
    def best_wall(self) -> float:
        return min(m.wall_s for m in self.runs)

    @property
    def best_cpu(self) -> float:
        return min(m.cpu_s for m in self.runs)

    @property
    def peak_rss(self) -> int:
        return max(m.peak_rss for m in self.runs)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Corpora:
    """The corpora of one benchmark run under ``work``, generated once and reused."""

    def __init__(self, work: str, seed: int) -> None:
        self.work, self.seed = work, seed
        self._made: dict[int, str] = {}

    def path(self, n_docs: int) -> str:
        return os.path.join(self.work, f"corpus-{n_docs}")

    def get(self, n_docs: int) -> str:
        path = self.path(n_docs)
        done = path + ".done"  # beside the corpus, so the pipeline's glob does not list it
        if os.path.exists(done):  # made by an earlier call with the same --work-dir
            self._made[n_docs] = path
            return path
        shutil.rmtree(path, ignore_errors=True)
        # Any smaller corpus of this work dir, made now or by an earlier call, is a prefix.
        for name in os.listdir(self.work):
            m = re.fullmatch(r"corpus-(\d+)\.done", name)
            if m:
                self._made.setdefault(int(m.group(1)), self.path(int(m.group(1))))
        smaller = max((n for n in self._made if n < n_docs), default=0)
        start = time.perf_counter()
        if smaller:
            mixed_corpus.extend_corpus(self._made[smaller], path, smaller, n_docs, self.seed)
        else:
            mixed_corpus.write_corpus(path, n_docs, self.seed)
        _log(f"  corpus of {n_docs} documents in {time.perf_counter() - start:.1f} s")
        with open(done, "w") as f:
            f.write("done\n")
        self._made[n_docs] = path
        return path

    def next_edit(self, n_docs: int) -> int:
        """A fresh edit number for the ``n_docs`` corpus: a --work-dir reused by a later
        call has been edited before, and the same edit again would change no byte."""
        counter = self.path(n_docs) + ".edits"
        done = 0
        if os.path.exists(counter):
            with open(counter) as f:
                done = int(f.read())
        with open(counter, "w") as f:
            f.write(f"{done + 1}\n")
        return done + 1


def corpus_bytes(path: str) -> int:
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    return path


# -- the four measurements ---------------------------------------------------------------------


def throughput(corpora: Corpora, sizes: Sizes) -> tuple[list[Row], int]:
    corpus = corpora.get(sizes.docs)
    n_bytes = corpus_bytes(corpus)
    out = os.path.join(corpora.work, "out-throughput")
    rows = [
        Row("loop", "plain Python loop (floor): read, extract, chunk, hash, Parquet"),
        Row("one", "chunkmill run, 1 worker (in_memory)"),
        Row("mp1", "chunkmill run, multi_processing, 1 worker"),
        Row("mp2", "chunkmill run, multi_processing, 2 workers"),
    ]
    commands = {
        "loop": lambda: loop_cmd(corpus, _fresh(out)),
        "one": lambda: chunkmill_cmd(corpus, _fresh(out), ONE_WORKER, prior="none"),
        "mp1": lambda: chunkmill_cmd(corpus, _fresh(out), MP_ONE, prior="none"),
        "mp2": lambda: chunkmill_cmd(corpus, _fresh(out), MP_TWO, prior="none"),
    }
    for r in range(sizes.repeat):
        # Interleaved, each repeat starting one row further down: drift in the machine's load
        # spreads over every row.
        for k in range(len(rows)):
            row = rows[(r + k) % len(rows)]
            m = measure(commands[row.key]())
            row.runs.append(m)
            _log(f"  repeat {r + 1}: {row.label}: {m.wall_s:.1f} s wall, load {m.load:.1f}")
    shutil.rmtree(out, ignore_errors=True)
    return rows, n_bytes


@dataclass
class ScalePoint:
    scale: int
    docs: int
    n_bytes: int
    m: Measurement  # one worker, in_memory: the whole pipeline in one process
    mp: Measurement | None = None  # multi_processing, one worker: runner and worker apart


def memory(corpora: Corpora, sizes: Sizes) -> list[ScalePoint]:
    points = []
    for scale in sizes.scales:
        docs = sizes.memory_docs * scale
        corpus = corpora.get(docs)
        out = _fresh(os.path.join(corpora.work, f"out-memory-{docs}"))
        # The same first run with the worker in its own process, so the runner's memory (it
        # holds the data between stages) and a worker's (chunkmill's code) show apart. Run
        # first: the in_memory run's output is what the incremental re-runs diff against.
        mp = None
        if sizes.memory_mp:
            mp = measure(chunkmill_cmd(corpus, _fresh(out), MP_ONE, prior="none"))
            _log(
                f"  {scale}x ({docs} docs), multi_processing: runner "
                f"{mp.peak_root_rss / 1e6:.0f} MB, worker {mp.peak_child_rss / 1e6:.0f} MB"
            )
        m = measure(chunkmill_cmd(corpus, _fresh(out), ONE_WORKER, prior="none"))
        _log(f"  {scale}x ({docs} docs): peak {m.peak_rss / 1e6:.0f} MB, {m.wall_s:.1f} s")
        points.append(ScalePoint(scale, docs, corpus_bytes(corpus), m, mp))
    return points


@dataclass
class Incremental:
    docs: int
    edited: int
    full: Measurement
    unchanged: Measurement
    changed: Measurement


def incremental(corpora: Corpora, sizes: Sizes, full: ScalePoint) -> Incremental:
    """Re-runs against the full run ``full`` of the memory benchmark (its output is kept)."""
    corpus = corpora.get(full.docs)
    out = os.path.join(corpora.work, f"out-memory-{full.docs}")
    unchanged = measure(chunkmill_cmd(corpus, out, ONE_WORKER, prior="auto"))
    _log(f"  re-run, nothing changed: {unchanged.wall_s:.1f} s")
    edited = mixed_corpus.edit_documents(
        corpus, full.docs, sizes.edit_fraction, corpora.seed, edit=corpora.next_edit(full.docs)
    )
    changed = measure(chunkmill_cmd(corpus, out, ONE_WORKER, prior="auto"))
    _log(f"  re-run, {len(edited)} documents changed: {changed.wall_s:.1f} s")
    return Incremental(full.docs, len(edited), full.m, unchanged, changed)


# -- report ------------------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def throughput_table(rows: list[Row], n_docs: int, n_bytes: int) -> list[str]:
    floor = rows[0]
    lines = [
        f"Throughput: {n_docs} documents, {_mb(n_bytes)} MB, best of {len(floor.runs)} "
        "interleaved runs",
        "",
        "| what | docs/s | MB/s | wall s (best) | CPU s (best) | vs plain loop (wall) "
        "| vs plain loop (CPU) | peak RSS MB | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        wall = row.best_wall
        load = max(m.load for m in row.runs)
        lines.append(
            f"| {row.label} | {n_docs / wall:.0f} | {n_bytes / 1e6 / wall:.2f} | {wall:.1f} "
            f"| {row.best_cpu:.1f} | {wall / floor.best_wall:.2f}x "
            f"| {row.best_cpu / floor.best_cpu:.2f}x | {_mb(row.peak_rss)} | {load:.1f} |"
        )
    return lines


def memory_table(points: list[ScalePoint]) -> list[str]:
    base = points[0].m.peak_rss
    lines = [
        "Memory: first runs, 1 worker; peak RSS of the process tree (in_memory), and with "
        "multi_processing the runner's and the worker's apart",
        "",
        "| scale | docs | MB | wall s | peak RSS MB | vs 1x | multi_processing: runner MB "
        "| worker MB | worker vs 1x | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    worker_base = points[0].mp.peak_child_rss if points[0].mp else 0
    for p in points:
        runner = worker = worker_ratio = "-"
        if p.mp is not None:
            runner, worker = _mb(p.mp.peak_root_rss), _mb(p.mp.peak_child_rss)
            worker_ratio = f"{p.mp.peak_child_rss / worker_base:.2f}x" if worker_base else "-"
        lines.append(
            f"| {p.scale}x | {p.docs} | {_mb(p.n_bytes)} | {p.m.wall_s:.1f} "
            f"| {_mb(p.m.peak_rss)} | {p.m.peak_rss / base:.2f}x | {runner} | {worker} "
            f"| {worker_ratio} | {p.m.load:.1f} |"
        )
    return lines


def incremental_table(inc: Incremental) -> list[str]:
    lines = [
        f"Incremental: {inc.docs} documents, 1 worker",
        "",
        "| run | wall s | CPU s | share of full run (wall) | share (CPU) | load |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, m in (
        ("full run (no prior manifest)", inc.full),
        ("re-run, nothing changed", inc.unchanged),
        (f"re-run, {inc.edited} documents changed", inc.changed),
    ):
        lines.append(
            f"| {label} | {m.wall_s:.1f} | {m.cpu_s:.1f} | {m.wall_s / inc.full.wall_s:.1%} "
            f"| {m.cpu_s / inc.full.cpu_s:.1%} | {m.load:.1f} |"
        )
    return lines


def floors(
    rows: list[Row] | None, points: list[ScalePoint] | None, inc: Incremental | None
) -> list[str]:
    def line(ok: bool | None, text: str) -> str:
        return f"{'SKIP' if ok is None else 'PASS' if ok else 'FAIL'}  {text}"

    out = []
    if rows:
        by = {r.key: r for r in rows}
        ratio = by["one"].best_wall / by["loop"].best_wall
        out.append(
            line(
                ratio <= FLOOR_PIPELINE_VS_LOOP,
                f"pipeline, 1 worker, vs plain loop: {ratio:.2f}x the loop's wall time "
                f"(floor <= {FLOOR_PIPELINE_VS_LOOP}x; {by['one'].best_wall:.1f} vs "
                f"{by['loop'].best_wall:.1f} s; CPU time "
                f"{by['one'].best_cpu / by['loop'].best_cpu:.2f}x)",
            )
        )
        speedup = by["mp1"].best_wall / by["mp2"].best_wall
        out.append(
            line(
                speedup >= FLOOR_SCALING,
                f"2 workers vs 1 (multi_processing): {speedup:.2f}x faster "
                f"(floor >= {FLOOR_SCALING}x; {by['mp2'].best_wall:.1f} vs "
                f"{by['mp1'].best_wall:.1f} s)",
            )
        )
    if points:
        growth = points[-1].m.peak_rss / points[0].m.peak_rss
        out.append(
            line(
                growth <= FLOOR_MEMORY,
                f"peak RSS at {points[-1].scale}x vs 1x: {growth:.2f}x "
                f"(floor <= {FLOOR_MEMORY}x; {_mb(points[-1].m.peak_rss)} vs "
                f"{_mb(points[0].m.peak_rss)} MB)",
            )
        )
        first, last = points[0].mp, points[-1].mp
        if first is not None and last is not None and first.peak_child_rss:
            worker = last.peak_child_rss / first.peak_child_rss
            out.append(
                line(
                    worker <= FLOOR_MEMORY,
                    f"(for reference) the worker process alone, multi_processing, at "
                    f"{points[-1].scale}x vs 1x: {worker:.2f}x ({_mb(last.peak_child_rss)} vs "
                    f"{_mb(first.peak_child_rss)} MB; the runner: {_mb(last.peak_root_rss)} vs "
                    f"{_mb(first.peak_root_rss)} MB)",
                )
            )
    if inc:
        share = inc.changed.wall_s / inc.full.wall_s
        long_enough = inc.full.wall_s >= INCREMENTAL_MIN_FULL_S
        out.append(
            line(
                (share <= FLOOR_INCREMENTAL) if long_enough else None,
                f"{inc.edited}/{inc.docs}-changed re-run: {share:.1%} of the full run's wall "
                f"time, {inc.changed.cpu_s / inc.full.cpu_s:.1%} of its CPU "
                f"(floor <= {FLOOR_INCREMENTAL:.0%} on a full run >= "
                f"{INCREMENTAL_MIN_FULL_S:.0f} s; this one took {inc.full.wall_s:.1f} s)",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pipeline", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny corpora, one repeat")
    parser.add_argument("--docs", type=int, help="throughput corpus size")
    parser.add_argument("--memory-docs", type=int, help="the 1x memory corpus size")
    parser.add_argument("--scales", help="memory scales, comma-separated (default 1,10,100)")
    parser.add_argument("--repeat", type=int, help="interleaved repeats of the throughput rows")
    parser.add_argument("--edit-fraction", type=float, help="share of documents to change")
    parser.add_argument(
        "--memory-mp",
        action=argparse.BooleanOptionalAction,
        help="memory: also run multi_processing to show the runner and a worker apart "
        "(default: on, off with --quick)",
    )
    parser.add_argument("--seed", type=int, default=mixed_corpus.DEFAULT_SEED)
    parser.add_argument(
        "--only",
        default="throughput,memory,incremental",
        help="comma-separated subset of throughput,memory,incremental",
    )
    parser.add_argument(
        "--work-dir",
        help="where corpora and outputs go (kept, and corpora reused); else a temp dir",
    )
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = Sizes(
        docs=args.docs or base.docs,
        memory_docs=args.memory_docs or base.memory_docs,
        scales=tuple(int(s) for s in args.scales.split(",")) if args.scales else base.scales,
        repeat=args.repeat or base.repeat,
        edit_fraction=base.edit_fraction if args.edit_fraction is None else args.edit_fraction,
        memory_mp=base.memory_mp if args.memory_mp is None else args.memory_mp,
    )
    only = set(args.only.split(","))
    unknown = only - {"throughput", "memory", "incremental"}
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}")

    work = args.work_dir or tempfile.mkdtemp(prefix="chunkmill-bench-")
    os.makedirs(work, exist_ok=True)
    corpora = Corpora(work, args.seed)
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows = points = inc = None
    n_bytes = 0
    try:
        if "throughput" in only:
            _log("throughput and scaling")
            rows, n_bytes = throughput(corpora, sizes)
        if "memory" in only or "incremental" in only:
            _log("memory")
            points = memory(corpora, sizes)
        if "incremental" in only and points:
            _log("incremental")
            inc = incremental(corpora, sizes, points[-1])
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)

    print(
        f"# chunkmill end-to-end benchmark: {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} cores, load average "
        f"{load_before[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end, "
        f"{time.perf_counter() - started:.0f} s in all"
    )
    if rows:
        print()
        print("\n".join(throughput_table(rows, sizes.docs, n_bytes)))
    if points and "memory" in only:
        print()
        print("\n".join(memory_table(points)))
    if inc:
        print()
        print("\n".join(incremental_table(inc)))
    print()
    print("\n".join(floors(rows, points if "memory" in only else None, inc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
