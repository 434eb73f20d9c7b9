"""Logs a person can read: chunkmill's own lines at the level asked (INFO by default); pypdf,
Beam and the cloud client libraries only from WARNING (pypdf from ERROR), unless
``--log-level debug``, which shows every library's lines too."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence

from chunkmill.pipeline.options import LOG_LEVELS, Parser
from chunkmill.redact import MASK, redact_text
from chunkmill.refusal import line_in_text, refusal_line

# chunkmill's own loggers are named after its packages (logging.getLogger(__name__)).
OWN_LOGGERS = ("chunkmill",)
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
# a run stopped on purpose (transforms.refusal: --max-error-ratio, a corrupt prior, ...) that
# traceback says nothing the CLI's one line does not, so it is dropped unless --log-level debug.
BEAM_STEP_FAILURES = "apache_beam.runners.common"
# Where --direct_running_mode=multi_processing relays its workers' logs, the same traceback.
WORKER_LOG_RELAY = "apache_beam.runners.portability.local_job_service"


class _DropExpectedFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and refusal_line(exc) is not None:
            return False
        # A multi-process worker's log of the same failure, relayed as text.
        return line_in_text(record.getMessage()) is None


_DROP_EXPECTED = _DropExpectedFailures()
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%H:%M:%S"


# An option or field whose name says it holds a secret (s3_secret_access_key,
# s3_session_token, s3_access_key_id, a password, a credential...), then its value, in the
# forms log lines print them: a dict's repr ('name': 'value', quotes escaped as \\' when the
# repr is itself inside a proto's text, as Beam's relayed worker lines are), JSON
# ("name": "value") and flags (--name=value, name=value).
_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:key|secret|token|passw|credential)[A-Za-z0-9_.-]*"
_SECRET_VALUE = re.compile(
    rf"(?P<name>(?P<q>\\?['\"]?){_SECRET_NAME}(?P=q)\s*[:=]\s*)"
    r"(?:(?P<open>\\?['\"])(?P<quoted>.*?)(?P=open)|(?P<bare>[^\s,;&}\])'\"\\]+))",
    re.IGNORECASE,
)
_NOT_SECRET = frozenset({"None", "null", "True", "False", "true", "false", "''", ""})


def redact_message(message: str) -> str:
    """``message`` without the values of secret-named options or fields, nor credentials in
    the URIs it quotes (``chunkmill.redact``)."""
    return _SECRET_VALUE.sub(_mask_value, redact_text(message))


def _mask_value(match: re.Match[str]) -> str:
    if match.group("open") is not None:
        return f"{match.group('name')}{match.group('open')}{MASK}{match.group('open')}"
    if match.group("bare") in _NOT_SECRET:
        return match.group(0)
    return f"{match.group('name')}{MASK}"


class RedactSecrets(logging.Filter):
    """Rewrites a record's message (and traceback) with ``redact_message``; never drops one.

    Installed through the log record factory (``install_redaction``), so it sees every
    record of this process, whatever logger or handler it goes through: Beam relays its
    worker processes' lines (their pipeline options, S3 secret included, at start-up) through
    its own loggers, and a host program or a test may add handlers of its own.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it when the record is emitted
            return True
        redacted = redact_message(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_message(logging.Formatter().formatException(record.exc_info))
        return True


_REDACT = RedactSecrets()


def install_redaction() -> None:
    """Makes every log record of this process pass through ``RedactSecrets`` as it is made
    (once; later calls change nothing)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacts", False):
        return

    def redacting_factory(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        _REDACT.filter(record)
        return record

    redacting_factory.redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting_factory)


def level_from_argv(argv: Sequence[str]) -> str:
    """The ``--log-level`` of a command's arguments (``info`` if absent), found before the
    command parses them so that its own lines follow it; a bad value is a ``UsageError``."""
    parser = Parser(add_help=False, allow_abbrev=False)
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    args, _ = parser.parse_known_args(list(argv))
    return str(args.log_level)


def configure(level: str) -> None:
    """Sets the levels for one command. Adds a stderr handler to the root logger only if it
    has none (a host program's or pytest's handlers are kept). Every record is redacted
    (``install_redaction``)."""
    install_redaction()
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
    for name in (BEAM_STEP_FAILURES, WORKER_LOG_RELAY):
        step_failures = logging.getLogger(name)
        if own == logging.DEBUG:
            step_failures.removeFilter(_DROP_EXPECTED)
        else:
            step_failures.addFilter(_DROP_EXPECTED)  # addFilter ignores a filter already there
