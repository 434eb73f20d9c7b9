"""Fixtures shared by every level of tests."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """The tests test this tree: an editable install of another checkout would map
    chunkmill.pipeline and chunkmill.transforms to its folders (docs/packaging.md)."""
    for folder in ("pipeline", "transforms"):
        try:
            module = importlib.import_module(f"chunkmill.{folder}")
        except ImportError:
            pytest.exit(f"chunkmill.{folder} is not importable: pip install -e {ROOT}", 2)
        where = Path(module.__file__ or "").resolve().parent
        if where != ROOT / folder:
            pytest.exit(f"chunkmill.{folder} is {where}, not this tree's: pip install -e {ROOT}", 2)


@pytest.fixture
def restore_log_levels():
    """Puts back the log levels and filters that ``chunkmill.pipeline.logs.configure`` changes, so a
    test of one --log-level does not leak into the next test."""
    from chunkmill.pipeline import logs

    names = ["", *logs.OWN_LOGGERS, *logs.QUIET_LOGGERS, logs.BEAM_STEP_FAILURES]
    saved = {n: (logging.getLogger(n).level, list(logging.getLogger(n).filters)) for n in names}
    yield
    for n, (level, filters) in saved.items():
        logger = logging.getLogger(n)
        logger.setLevel(level)
        logger.filters[:] = filters
