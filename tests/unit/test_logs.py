"""Log levels per --log-level: chunkmill's own lines at the level asked, libraries quieter."""

from __future__ import annotations

import logging

import pytest

from pipeline import logs
from pipeline.options import UsageError

pytestmark = pytest.mark.usefixtures("restore_log_levels")


def effective(name: str) -> int:
    return logging.getLogger(name).getEffectiveLevel()


@pytest.mark.parametrize(
    ("level", "ours", "beam", "pypdf"),
    [
        ("info", logging.INFO, logging.WARNING, logging.ERROR),
        ("debug", logging.DEBUG, logging.DEBUG, logging.DEBUG),
        ("warning", logging.WARNING, logging.WARNING, logging.ERROR),
        ("error", logging.ERROR, logging.ERROR, logging.ERROR),
    ],
)
def test_levels(level, ours, beam, pypdf):
    logs.configure(level)
    assert effective("pipeline.cli") == effective("transforms.core") == ours
    assert effective("apache_beam.runners.portability.fn_api_runner") == beam
    assert effective("google.auth") == beam
    assert effective("pypdf._reader") == pypdf


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        ([], "info"),
        (["--input", "x", "--log-level", "debug"], "debug"),
        (["--log-level=warning", "--runner=DirectRunner"], "warning"),
    ],
)
def test_level_from_argv(argv, level):
    assert logs.level_from_argv(argv) == level


def test_bad_level_names_the_flag():
    with pytest.raises(UsageError, match="--log-level.*'loud'"):
        logs.level_from_argv(["--log-level", "loud"])


@pytest.mark.parametrize(("level", "shown"), [("info", False), ("debug", True)])
def test_beam_traceback_of_a_refused_run_is_dropped_unless_debug(level, shown, caplog):
    from transforms.refusal import RunRefused

    logs.configure(level)
    beam = logging.getLogger(logs.BEAM_STEP_FAILURES)
    try:
        raise RunRefused("3 of 4 listed documents failed")
    except RunRefused:
        beam.exception("step failed")
    try:  # as a runner re-raises it, wrapped
        raise RuntimeError(str(RunRefused("a prior file is corrupt")) + " [while running 'X']")
    except RuntimeError:
        beam.exception("wrapped step failed")
    try:
        raise ValueError("a real failure")
    except ValueError:
        beam.exception("another step failed")
    messages = [r.getMessage() for r in caplog.records if r.name == logs.BEAM_STEP_FAILURES]
    refused = ["step failed", "wrapped step failed"]
    assert messages == (refused if shown else []) + ["another step failed"]


def test_a_workers_relayed_log_of_a_refused_run_is_dropped_unless_debug(caplog):
    from transforms.refusal import RunRefused

    relay = logging.getLogger(logs.WORKER_LOG_RELAY)
    quoted = f'Worker: severity: ERROR message: "{RunRefused("too many removed")}\\nTraceback"'
    for level, shown in (("info", False), ("debug", True)):
        caplog.clear()
        logs.configure(level)
        relay.error(quoted)
        relay.error("Worker: severity: ERROR message: a real failure")
        messages = [r.getMessage() for r in caplog.records if r.name == logs.WORKER_LOG_RELAY]
        assert messages == ([quoted] if shown else []) + [
            "Worker: severity: ERROR message: a real failure"
        ]
