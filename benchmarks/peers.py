"""chunkmill against Beam's own RAG chunking (``apache_beam.ml.rag``), side by side on one machine.

Both run on Beam's FnApiRunner in their own process with one worker, over the same synthetic
Markdown corpus (``benchmarks.corpus``), in interleaved rounds (the order alternates each
round, so drift in the machine's speed falls on both alike); each figure is the best of the
rounds. chunkmill runs ``--strategy paragraph`` at its defaults (700 tokens, 80 of overlap);
the contender (``benchmarks/peers_mlrag.py``) splits with LangChain's recursive splitter at
the same sizes in characters and writes its chunks to Parquet. The contender does less (no
hashes, no diff against a prior run, one table), which is what the ratios are measured
against.

Figures: the first run's wall time; a one-document run (the fixed cost of a run: start-up,
imports, pipeline construction, teardown); the peak RSS of a first run, summed over the
process tree; and chunkmill's 1%-edited re-run, as a share of the first run's variable cost
(wall time less the fixed cost). The re-run's prior is a first run made before the rounds;
then 1% of the corpus is edited, and each round measures the first runs, the one-document
runs and the re-run together, so the three figures of the share meet the same drift.

    python -m benchmarks.peers --setup          # the contender's environment (once)
    python -m benchmarks.peers [--docs 7000] [--rounds 2]
    python -m benchmarks.peers --baseline TREE  # chunkmill's figures against another tree's

With ``--baseline`` (a source tree of chunkmill, e.g. ``git archive`` of an earlier commit),
the contender is chunkmill itself as that tree has it, all of it (``source_view``), in this
interpreter: the same figures
for both trees, interleaved, side by side, so that a change is measured as a ratio on the
shared machine.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import corpus as md
from benchmarks.pipeline import Measurement, measure

ROOT = Path(__file__).resolve().parents[1]
PEERS_VENV = ROOT / ".venv-peers"
CONTENDER = Path(__file__).with_name("peers_mlrag.py")
ONE_WORKER = ("--direct_num_workers=1", "--direct_running_mode=in_memory")

# The goals, as ratios of figures measured in the same run.
GOAL_WALL = 0.9  # first run: at most this times ml.rag's wall time
GOAL_FIXED_S = 0.5  # one-document run: at most ml.rag's plus this
GOAL_RSS = 1.0  # peak RSS of a first run: at most this times ml.rag's
GOAL_RERUN = 0.15  # 1%-edited re-run: fixed cost plus at most this share of the variable cost


def setup(venv: Path) -> None:
    """One environment for both: chunkmill as ``pip install chunkmill`` installs it (Beam at
    its pinned version, no cloud extra), and the contender's LangChain below 1.0."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--quiet", "--disable-pip-version-check"]
    # Editable: a run measures the working tree as it is now.
    # psutil: benchmarks.stages, run in this environment too.
    subprocess.run([*pip, "install", "-e", str(ROOT), "langchain<1", "psutil"], check=True)


def write_corpus(path: Path, n_docs: int) -> int:
    """``n_docs`` Markdown documents under ``path``; returns their bytes."""
    path.mkdir(parents=True)
    total = 0
    for name, text in md.iter_documents(n_docs):
        data = text.encode()
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
        total += len(data)
    return total


def edit_one_percent(path: Path) -> int:
    """Appends a paragraph to every hundredth document; returns how many were edited."""
    edited = sorted(path.rglob("*.md"))[::100]
    for i, doc in enumerate(edited):
        # Written beside and renamed over: a new file, so a hard-linked copy of the corpus
        # (``benchmarks.scale --keep``) keeps the document as it was.
        text = (
            doc.read_bytes()
            + f"\n\nA paragraph added by edit {i}, so this document changes.\n".encode()
        )
        doc.with_name(doc.name + ".edit").write_bytes(text)
        doc.with_name(doc.name + ".edit").replace(doc)
    return len(edited)


def chunkmill(python: Path, corpus: Path, output: Path, prior: str = "none") -> list[str]:
    return [
        str(python),
        "-m",
        "chunkmill",
        "run",
        "--input",
        f"{corpus}/**",
        "--output",
        str(output),
        "--strategy",
        "paragraph",
        "--prior-manifest",
        prior,
        *ONE_WORKER,
    ]


def contender(python: Path, corpus: Path, output: Path, flags: Sequence[str] = ()) -> list[str]:
    return [
        str(python), str(CONTENDER), "--input", f"{corpus}/**", "--output", str(output), *flags
    ]  # fmt: skip


@dataclass
class Figures:
    first: list[Measurement]
    one: list[Measurement]

    @property
    def wall(self) -> float:
        return min(m.wall_s for m in self.first)

    @property
    def fixed(self) -> float:
        return min(m.wall_s for m in self.one)

    @property
    def rss(self) -> int:
        return min(m.peak_rss for m in self.first)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Tree:
    """A source tree of chunkmill and its figures: ``python -m chunkmill`` run in it."""

    name: str
    root: Path
    figures: Figures
    reruns: list[Measurement]

    def best(self, runs: list[Measurement], cpu: bool) -> float:
        return min(m.cpu_s if cpu else m.wall_s for m in runs)

    def share(self, cpu: bool) -> float:
        fixed = self.best(self.figures.one, cpu)
        variable = max(self.best(self.figures.first, cpu) - fixed, 1e-9)
        return (self.best(self.reruns, cpu) - fixed) / variable


def source_view(tree: Path, folder: Path) -> Path:
    """A folder in which ``python -m chunkmill`` runs ``tree``'s code, all of it.

    ``chunkmill.pipeline`` and ``chunkmill.transforms`` live in ``pipeline/`` and
    ``transforms/`` (package-dir), so a tree's ``chunkmill/`` alone, found first on the path,
    would still import them from wherever chunkmill is installed. The view is a
    ``chunkmill/`` of links to the tree's files with ``pipeline`` and ``transforms`` linked
    inside it, found by the path before the installed package's finder is asked."""
    package = _fresh(folder) / "chunkmill"
    package.mkdir(parents=True)
    for entry in (tree / "chunkmill").iterdir():
        (package / entry.name).symlink_to(entry)
    for sub in ("pipeline", "transforms"):
        (package / sub).symlink_to(tree / sub)
    return folder


def compare_trees(work: Path, full: Path, one: Path, trees: list[Tree], rounds: int) -> list[str]:
    """The peers figures of chunkmill for each of ``trees`` (first run, one document, the
    1%-edited re-run and its share), interleaved round by round; the table of them. Each
    tree runs from its own ``source_view``."""
    python = Path(sys.executable)
    views = {t.name: str(source_view(t.root, work / f"view-{i}")) for i, t in enumerate(trees)}
    # Each tree's first run of the corpus as it was, the prior of its nights; then 1% edited,
    # and every figure measured in the same rounds, so a drift of the machine's speed moves
    # the night with the runs it is a share of.
    bases = {}
    for tree in trees:
        bases[tree.name] = _fresh(work / f"base-{tree.name}")
        measure(chunkmill(python, full, bases[tree.name]), cwd=views[tree.name])
    edited = edit_one_percent(full)
    for r in range(rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            for docs, runs in ((full, tree.figures.first), (one, tree.figures.one)):
                out = _fresh(work / f"out-{tree.name}")
                runs.append(m := measure(chunkmill(python, docs, out), cwd=views[tree.name]))
                _log(f"round {r + 1}: {tree.name} on {docs.name}: {m.wall_s:.1f} s wall")
            out = work / f"rerun-{tree.name}"
            shutil.copytree(bases[tree.name], _fresh(out))
            m = measure(chunkmill(python, full, out, prior="auto"), cwd=views[tree.name])
            tree.reruns.append(m)
            _log(f"round {r + 1}: {tree.name} re-run after {edited} edits: {m.wall_s:.1f} s")
    this, base = trees
    # CPU time beside wall time: on a machine shared with other jobs it moves less with
    # their load (one worker: the run's CPU time is nearly all on its critical path).
    rows = [
        f"| figure (best of {rounds}) | {this.name} | {base.name} | ratio |",
        "|---|---:|---:|---:|",
    ]
    for cpu, unit in ((False, "wall"), (True, "CPU")):
        for label, runs in (
            ("first run", lambda t: t.figures.first),
            ("one document (the fixed cost)", lambda t: t.figures.one),
            (f"1%-edited re-run ({edited} documents)", lambda t: t.reruns),
        ):
            a, b = this.best(runs(this), cpu), base.best(runs(base), cpu)
            rows.append(f"| {label}, {unit} | {a:.2f} s | {b:.2f} s | {a / b:.2f}x |")
        rows.append(
            f"| 1%-edited re-run: share of the first run's variable cost, {unit} "
            f"| {this.share(cpu):.0%} | {base.share(cpu):.0%} | goal ≤ {GOAL_RERUN:.0%} |"
        )
    return rows


def table(ours: Figures, theirs: Figures, rerun: float, corpus_mb: float, edited: int) -> list[str]:
    """The peers table, one row per goal, with whether it is met."""
    ours_var = max(ours.wall - ours.fixed, 1e-9)
    share = (rerun - ours.fixed) / ours_var
    rows = [
        "| figure (best of the rounds) | chunkmill | Beam ml.rag | ratio | goal | met |",
        "|---|---:|---:|---:|---|:-:|",
        f"| first run, wall | {ours.wall:.1f} s | {theirs.wall:.1f} s "
        f"| {ours.wall / theirs.wall:.2f}x | ≤ {GOAL_WALL:.1f}x "
        f"| {'yes' if ours.wall <= GOAL_WALL * theirs.wall else 'no'} |",
        f"| one document (the fixed cost of a run) | {ours.fixed:.1f} s | {theirs.fixed:.1f} s "
        f"| {ours.fixed - theirs.fixed:+.1f} s | ≤ +{GOAL_FIXED_S:.1f} s "
        f"| {'yes' if ours.fixed <= theirs.fixed + GOAL_FIXED_S else 'no'} |",
        f"| peak RSS of a first run | {ours.rss / 2**20:.0f} MB | {theirs.rss / 2**20:.0f} MB "
        f"| {ours.rss / theirs.rss:.2f}x | ≤ {GOAL_RSS:.1f}x "
        f"| {'yes' if ours.rss <= GOAL_RSS * theirs.rss else 'no'} |",
        f"| peak RSS per MB of corpus | {ours.rss / 2**20 / corpus_mb:.1f} "
        f"| {theirs.rss / 2**20 / corpus_mb:.1f} | | | |",
        f"| 1%-edited re-run ({edited} documents): wall | {rerun:.1f} s | (no incremental mode) "
        "| | | |",
        f"| 1%-edited re-run: share of the first run's variable cost | {share:.0%} | | "
        f"| ≤ {GOAL_RERUN:.0%} | {'yes' if share <= GOAL_RERUN else 'no'} |",
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--setup", action="store_true", help="build the contender's venv, exit")
    parser.add_argument("--docs", type=int, default=7000, help="documents in the corpus")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best of)")
    parser.add_argument("--venv", type=Path, default=PEERS_VENV, help="the contender's venv")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp folder")
    parser.add_argument(
        "--contender-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="a Beam flag for ml.rag's pipeline (e.g. --contender-flag=--no_pipeline_type_check, "
        "which chunkmill's local runs pass); repeatable",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="TREE",
        help="measure chunkmill against the chunkmill of this source tree, not ml.rag",
    )
    args = parser.parse_args(argv)
    if args.setup:
        setup(args.venv)
        return 0
    python = args.venv / "bin" / "python"
    if args.baseline is not None and not (args.baseline / "chunkmill").is_dir():
        parser.error(f"--baseline: no chunkmill source tree at {args.baseline}")
    if args.baseline is None and not python.exists():
        parser.error(f"no contender environment at {args.venv}: run with --setup first")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="peers-"))
    full, one = work / "corpus", work / "corpus-1"
    n_bytes = write_corpus(full, args.docs)
    write_corpus(one, 1)
    corpus_mb = n_bytes / 2**20
    _log(f"corpus: {args.docs} documents, {corpus_mb:.1f} MB of Markdown in {full}")
    if args.baseline is not None:
        trees = [
            Tree("this tree", ROOT, Figures([], []), []),
            Tree("baseline", args.baseline.resolve(), Figures([], []), []),
        ]
        print("\n".join(compare_trees(work, full, one, trees, args.rounds)))
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    # chunkmill's first run of the corpus as it was, the prior of its nights; then 1% edited,
    # and every figure measured in the same rounds (first runs, one document, the night), so a
    # drift of the machine's speed moves the night with the runs it is a share of.
    base = _fresh(work / "out-rerun")
    measure(chunkmill(python, full, base))
    edited = edit_one_percent(full)
    ours, theirs = Figures([], []), Figures([], [])
    reruns = []
    for r in range(args.rounds):
        theirs_cmd = functools.partial(contender, flags=args.contender_flag)
        contenders = [("chunkmill", ours, chunkmill), ("ml.rag", theirs, theirs_cmd)]
        if r % 2:
            contenders.reverse()
        for name, figures, command in contenders:
            for docs, runs in ((full, figures.first), (one, figures.one)):
                out = _fresh(work / f"out-{name}")
                cmd = command(python, docs, out)
                m = measure(cmd)
                runs.append(m)
                _log(
                    f"round {r + 1}: {name} on {docs.name}: {m.wall_s:.1f} s wall, "
                    f"{m.peak_rss / 2**20:.0f} MB peak RSS"
                )
        out = _fresh(work / "out-rerun-night")
        shutil.copytree(base, out)
        reruns.append(measure(chunkmill(python, full, out, prior="auto")).wall_s)
        _log(f"round {r + 1}: chunkmill re-run after {edited} edits: {reruns[-1]:.1f} s wall")
    print("\n".join(table(ours, theirs, min(reruns), corpus_mb, edited)))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
