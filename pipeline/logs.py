"""Logs a person can read: chunkmill's own lines at the level asked (INFO by default); pypdf,
Beam and the cloud client libraries only from WARNING (pypdf from ERROR), unless
``--log-level debug``, which shows every library's lines too."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from pipeline.options import LOG_LEVELS, _Parser

# chunkmill's own loggers are named after its packages (logging.getLogger(__name__)).
OWN_LOGGERS = ("pipeline", "transforms")
# pypdf logs every repaired cross-reference and odd object at WARNING: on a corpus of PDFs
# that is thousands of lines a person cannot act on. A PDF that really fails becomes an
# errors/ row with pypdf's message, so its warnings wait for --log-level debug.
QUIET_LOGGERS = {
    "pypdf": logging.ERROR,
    # Relays the log of --direct_running_mode=multi_processing workers at their own severity:
    # every worker's start-up warnings (no semi_persistent_directory, discarded options) say
    # nothing about the run; a worker's errors still show.
    "apache_beam.runners.portability.local_job_service": logging.ERROR,
}
# Beam logs an exception that fails a step with its whole traceback before re-raising it. For
# a run stopped on purpose by --max-error-ratio that traceback says nothing the CLI's one line
# does not (it names the counts and the flag), so it is dropped unless --log-level debug.
BEAM_STEP_FAILURES = "apache_beam.runners.common"


class _DropExpectedFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        # Imported here: configuring the logs must not import Beam (transforms.io does).
        from transforms.io import ErrorRatioExceeded

        return not (record.exc_info and isinstance(record.exc_info[1], ErrorRatioExceeded))


_DROP_EXPECTED = _DropExpectedFailures()
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%H:%M:%S"


def level_from_argv(argv: Sequence[str]) -> str:
    """The ``--log-level`` of a command's arguments (``info`` if absent), found before the
    command parses them so that its own lines follow it; a bad value is a ``UsageError``."""
    parser = _Parser(add_help=False, allow_abbrev=False)
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    args, _ = parser.parse_known_args(list(argv))
    return str(args.log_level)


def configure(level: str) -> None:
    """Sets the levels for one command. Adds a stderr handler to the root logger only if it
    has none (a host program's or pytest's handlers are kept)."""
    own = logging.getLevelName(level.upper())
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
        root.addHandler(handler)
    # Libraries log through the root's level unless they set their own.
    root.setLevel(logging.DEBUG if own == logging.DEBUG else max(own, logging.WARNING))
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(own)
    for name, quiet in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(logging.DEBUG if own == logging.DEBUG else max(own, quiet))
    step_failures = logging.getLogger(BEAM_STEP_FAILURES)
    if own == logging.DEBUG:
        step_failures.removeFilter(_DROP_EXPECTED)
    else:
        step_failures.addFilter(_DROP_EXPECTED)  # addFilter ignores a filter already there
