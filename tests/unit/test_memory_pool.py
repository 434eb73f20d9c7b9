"""The Arrow memory pool of chunkmill's commands (chunkmill.pipeline.memory_pool): chosen
before pyarrow allocates, unless the user chose one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chunkmill.pipeline import memory_pool

ROOT = Path(__file__).parents[2]
# A command that reads tables with pyarrow, then the pool pyarrow's allocations come from.
PROBE = """
import json, os, sys
from chunkmill.pipeline.cli import main
code = main(["runs", "list", "--output", sys.argv[1]])
import pyarrow as pa
print(json.dumps({"code": code, "pool": pa.default_memory_pool().backend_name,
                  "variable": os.environ.get("ARROW_DEFAULT_MEMORY_POOL")}))
"""


def probe(output: Path, **variables: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != memory_pool.VARIABLE} | variables
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    report: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return report


def test_a_command_allocates_from_the_chosen_pool(tmp_path):
    chosen = memory_pool.choose({})  # what a command on this system chooses
    report = probe(tmp_path)
    assert report["code"] == 0 and report["variable"] == (chosen or None)
    assert report["pool"] == (chosen or report["pool"])


def test_the_users_pool_wins(tmp_path):
    report = probe(tmp_path, ARROW_DEFAULT_MEMORY_POOL="system")
    assert report == {"code": 0, "pool": "system", "variable": "system"}


def test_choose_names_the_pool_on_linux_only_and_keeps_the_users():
    env: dict[str, str] = {}
    assert memory_pool.choose(env, "linux") == memory_pool.POOL
    assert env == {memory_pool.VARIABLE: memory_pool.POOL}
    env = {memory_pool.VARIABLE: "mimalloc"}
    assert memory_pool.choose(env, "linux") == "mimalloc"
    assert env == {memory_pool.VARIABLE: "mimalloc"}
    env = {}
    assert memory_pool.choose(env, "darwin") == "" and env == {}
