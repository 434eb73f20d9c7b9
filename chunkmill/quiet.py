"""Warnings and progress bars no user can act on, dropped where they are made.

``import apache_beam`` imports its BigQuery client, which logs ``apitools not found, ...`` on
the root logger whenever the gcp extra is absent (a plain install, a local run): the run
does not use BigQuery, and nothing the user could do would make the line useful. It is
logged at import, before any command configures logging, so the filter is installed when
``chunkmill`` itself is imported; it drops that message only.
"""

from __future__ import annotations

import logging
import os

# The start of each message dropped, as its library logs it.
UNACTIONABLE = ("apitools not found, and bigquery client libraries are not available",)


class DropUnactionable(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        return not message.startswith(UNACTIONABLE)


_FILTER = DropUnactionable()


def install() -> None:
    """Adds the filter to the root logger (once: addFilter ignores a filter already there)."""
    logging.getLogger().addFilter(_FILTER)


def quiet_model_loading() -> None:
    """No library progress bars (a "Loading weights" bar on every model load, from
    transformers through huggingface_hub) on a command's stderr, where chunkmill prints its
    own progress; set for the command and the worker processes it starts, unless the user set
    it."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
