"""Where a local ``chunkmill run`` spends its wall time and memory, stage by stage.

    python -m benchmarks.stages run --input 'DIR/**' --output OUT [chunkmill run flags]

Runs the command in this process with a timer around each bundle Beam's FnApiRunner runs
(on the local engine with one worker, a bundle is a fused stage's whole input) and a thread
sampling this process's RSS every 10 ms, then prints each stage's wall time, the RSS when it
started and its peak, slowest first. Beside py-spy's CPU samples (``benchmarks.profiling``),
it says what a stage costs in wall time, which sampling inflates, and which stage holds the
memory.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any

import psutil
from apache_beam.runners.portability.fn_api_runner import fn_runner

from chunkmill.pipeline import cli

_MB = 2**20


def _short(stage: str) -> str:
    """A fused stage's name by its steps, without Beam's generated prefixes and numbers."""
    steps = re.findall(
        r"ref_AppliedPTransform_([A-Za-z0-9-]+?)(?:_\d+)?\)|([A-Za-z]+/[\w/]+)", stage
    )
    names = [a or b for a, b in steps]
    return " + ".join(dict.fromkeys(n.split("-")[-1] if "-" in n else n for n in names))[:150]


def main(argv: list[str]) -> int:
    process = psutil.Process()
    peak = [0]
    rows: list[tuple[float, float, float, str]] = []

    def sample() -> None:
        while True:
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.01)

    threading.Thread(target=sample, daemon=True).start()
    run_bundle = fn_runner.FnApiRunner._run_bundle

    def timed(self: Any, context: Any, bundle: Any, *args: Any, **kwargs: Any) -> Any:
        start_rss = peak[0] = process.memory_info().rss
        start = time.perf_counter()
        result = run_bundle(self, context, bundle, *args, **kwargs)
        rows.append(
            (time.perf_counter() - start, start_rss / _MB, peak[0] / _MB, bundle.stage.name)
        )
        return result

    fn_runner.FnApiRunner._run_bundle = timed
    code = cli.main(argv)
    total = sum(r[0] for r in rows)
    print(f"\n{len(rows)} bundles, {total:.2f} s in all\n")
    print("| stage | wall s | RSS at start MB | peak RSS MB |")
    print("|---|---:|---:|---:|")
    for wall, start_mb, peak_mb, stage in sorted(rows, reverse=True):
        print(f"| {_short(stage)} | {wall:.3f} | {start_mb:.0f} | {peak_mb:.0f} |")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
