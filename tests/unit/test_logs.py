"""Log levels per --log-level: chunkmill's own lines at the level asked, libraries quieter."""

from __future__ import annotations

import logging

import pytest

from chunkmill.pipeline import logs
from chunkmill.pipeline.options import UsageError

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
    assert effective("chunkmill.pipeline.cli") == effective("chunkmill.transforms.core") == ours
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
    from chunkmill.refusal import RunRefused

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
    from chunkmill.refusal import RunRefused

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


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # Beam's worker start-up line, relayed inside a proto's text (quotes escaped)
        (
            "message: \"Pipeline_options: {\\'runner\\': \\'x\\', "
            "\\'s3_secret_access_key\\': \\'SENTINEL1\\', "
            "\\'s3_session_token\\': \\'SENTINEL2\\'}\"",
            "message: \"Pipeline_options: {\\'runner\\': \\'x\\', "
            "\\'s3_secret_access_key\\': \\'***\\', \\'s3_session_token\\': \\'***\\'}\"",
        ),
        (
            "{'s3_access_key_id': 'SENTINEL', 'direct_num_workers': 2}",
            "{'s3_access_key_id': '***', 'direct_num_workers': 2}",
        ),
        ('{"client_secret": "SENTINEL", "a": 1}', '{"client_secret": "***", "a": 1}'),
        (
            "args: --s3_secret_access_key=SENTINEL --runner=X",
            "args: --s3_secret_access_key=*** --runner=X",
        ),
        ("db_password=SENTINEL;host=h", "db_password=***;host=h"),
        ("reading https://u:SENTINEL@h/a.md", "reading https://h/a.md"),
        (
            "reading https://h/a.md?X-Amz-Signature=SENTINEL",
            "reading https://h/a.md?X-Amz-Signature=***",
        ),
        # nothing secret: unchanged
        ("{'s3_session_token': None, 'runner': 'x'}", "{'s3_session_token': None, 'runner': 'x'}"),
        ("documents 6/6 (100%) failed 1", "documents 6/6 (100%) failed 1"),
        ("GroupByKey done", "GroupByKey done"),
    ],
)
def test_redact_message(message, expected):
    assert logs.redact_message(message) == expected


def test_every_record_of_the_process_is_redacted_whatever_its_logger(caplog):
    logs.configure("debug")
    options = {"s3_secret_access_key": "SENTINEL", "runner": "DirectRunner"}
    logging.getLogger("apache_beam.runners.worker.sdk_worker_main").info(
        "Pipeline_options: %s", options
    )
    logging.getLogger("some.library").debug("token=%s", "SENTINEL")
    try:
        raise RuntimeError("401 for https://u:SENTINEL@h/x")
    except RuntimeError:
        logging.getLogger("chunkmill.transforms.core").exception("failed")
    assert len(caplog.records) == 3
    assert "SENTINEL" not in caplog.text
    assert "'s3_secret_access_key': '***'" in caplog.text


def test_a_record_that_cannot_be_formatted_is_left_to_logging_s_own_error_path():
    logs.configure("info")
    make = logging.getLogRecordFactory()
    record = make("chunkmill.x", logging.INFO, "f.py", 1, "%d items", ("not a number",), None)
    assert (record.msg, record.args) == ("%d items", ("not a number",))
