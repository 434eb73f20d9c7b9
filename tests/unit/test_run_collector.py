"""``chunkmill run`` and Python's cyclic garbage collector: off while the run starts, on with
start-up's objects frozen while it runs, everything frozen at the process's exit; a caller
in the same process gets the collector back as it was, whatever the run's end (the time it
saves is measured in benchmarks/README.md)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from chunkmill.pipeline.commands import run
from chunkmill.pipeline.options import UsageError


def _fail(output: Path) -> None:
    with pytest.raises(UsageError, match="--run-id"):
        run.main(["--output", str(output), "--run-id", "not a run id"])


def test_a_run_that_fails_leaves_the_collector_on_and_nothing_frozen(tmp_path: Path) -> None:
    assert gc.isenabled()
    _fail(tmp_path)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_caller_that_manages_the_collector_keeps_it_as_it_is(tmp_path: Path) -> None:
    gc.disable()
    try:
        _fail(tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    held = [object()]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        _fail(tmp_path)
        assert gc.get_freeze_count() == frozen  # not unfrozen by the run
    finally:
        gc.unfreeze()
    assert held
