"""Cost of each chunking strategy on adversarial inputs, per input size: is it linear?

    python -m benchmarks.adversarial [--sizes 1,2,4,8] [--strategies section,...] [--inputs ...]

Each case (strategy, input, size in MB) runs in a fresh process, so one case's heap does not
flatter the next: CPU time of ``split`` alone, its peak RSS growth (the text itself is built
before the baseline), and how many chunks it made. Linear means time and memory double with
the size. ``--rows`` times ``process_document`` instead (chunk rows included: the cost a
worker pays per document).

Results are printed, never asserted: benchmarks do not gate CI.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

STRATEGIES = ("section", "paragraph", "sentence", "recursive", "paragraph-window")


def make_input(kind: str, size: int) -> str:
    """``size`` characters of one adversarial shape."""
    units = {
        "headings": "# h\n",  # one section per 4 characters
        "deep-headings": "# h\n## h\n### h\n#### h\n",
        "one-line": "ab ",  # one giant line of words
        "no-spaces": "a",  # one giant word
        "blank-lines": "\n",
        "deep-lists": "".join("  " * depth + "- x\n" for depth in range(40)),
        "sentences": "A b. ",
    }
    unit = units[kind]
    return (unit * (size // len(unit) + 1))[:size]


INPUTS = ("headings", "deep-headings", "one-line", "no-spaces", "blank-lines", "deep-lists")


def measure(strategy: str, kind: str, megabytes: float, rows: bool) -> dict[str, float]:
    from chunkmill import document, ids
    from chunkmill.config import Chunking, ChunkingConfig
    from chunkmill.items import WorkItem

    text = make_input(kind, int(megabytes * 1024 * 1024))
    chunking = Chunking(ChunkingConfig.create(strategy))
    data = text.encode()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    if rows:
        item = WorkItem(ids.doc_id("/a.md"), "/a.md", len(data))
        chunks = len(document.process_document(item, data, chunking).occurrences)
    else:
        chunks = len(chunking.chunker_for("markdown", "/a.md").split(text))
    seconds = time.process_time() - started
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return {"seconds": seconds, "peak_mib": grown / 1024, "chunks": chunks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--inputs", default=",".join(INPUTS))
    parser.add_argument("--rows", action="store_true")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in a child process
    args = parser.parse_args()
    if args.case:
        strategy, kind, mb = args.case.split(":")
        print(json.dumps(measure(strategy, kind, float(mb), args.rows)))
        return
    print("| strategy | input | MB | CPU s | peak RSS MiB | chunks |")
    print("|---|---|---:|---:|---:|---:|")
    for strategy in args.strategies.split(","):
        for kind in args.inputs.split(","):
            for mb in args.sizes.split(","):
                argv = [sys.executable, "-m", "benchmarks.adversarial", "--case"]
                argv.append(f"{strategy}:{kind}:{mb}")
                done = subprocess.run(
                    argv + (["--rows"] if args.rows else []), capture_output=True, text=True
                )
                if done.returncode:
                    print(f"| {strategy} | {kind} | {mb} | failed: {done.stderr[-200:]!r} |||")
                    continue
                r = json.loads(done.stdout)
                print(
                    f"| {strategy} | {kind} | {mb} | {r['seconds']:.2f} | {r['peak_mib']:.0f} "
                    f"| {r['chunks']} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
