"""Fixtures shared by every level of tests."""

from __future__ import annotations

import logging

import pytest


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
