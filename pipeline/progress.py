"""Progress of a long local run: documents done of listed, MB/s read, documents failed so far
and an ETA, redrawn in place on a terminal and logged every ``LOG_EVERY_SECONDS`` otherwise.

The figures come from process-wide metric cells that ``transforms.counts`` updates; a reporter
thread reads them while the local runner runs the pipeline in this process (why: the
"Progress of a local run" section of docs/design.md). The formatting and the ETA are pure
functions; ``Reporter`` takes its clock and snapshot source as arguments.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TextIO

from apache_beam.metrics.execution import MetricsEnvironment
from apache_beam.options.pipeline_options import DirectOptions

from chunkmill.pipeline import graph, launch
from chunkmill.pipeline.options import RunSettings
from chunkmill.redact import redact_uri
from chunkmill.transforms.counts import (
    METRICS_NAMESPACE,
    PROGRESS_DONE,
    PROGRESS_LISTED,
    PROGRESS_READ,
)

_LOG = logging.getLogger(__name__)

# A terminal line is redrawn this often: smooth enough to see it move, rare enough to cost
# nothing next to the work.
REFRESH_SECONDS = 0.5
# Without a terminal (a log file, a scheduler's capture), one line this often: a night's log
# stays short, and a stalled run shows within a minute.
LOG_EVERY_SECONDS = 30.0
# Runners that execute the DoFns inside the launching process (when in memory).
IN_PROCESS_RUNNERS = {
    "DirectRunner",
    "SwitchingDirectRunner",
    "FnApiRunner",
    "BundleBasedDirectRunner",
}

_MB = 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    """Cumulative progress figures."""

    listed: int = 0
    listed_bytes: int = 0
    done: int = 0  # processed + carried over + failed
    failed: int = 0
    read: int = 0  # documents whose bytes were read
    read_bytes: int = 0

    def __sub__(self, other: Snapshot) -> Snapshot:
        return Snapshot(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


def process_snapshot() -> Snapshot:
    """The process-wide progress cells of ``chunkmill.transforms.counts``, as they are now
    (cumulative over every run in this process: subtract a snapshot taken at the start)."""
    updates = MetricsEnvironment.process_wide_container().get_cumulative()
    dist = {
        key.metric.name: value
        for key, value in updates.distributions.items()
        if key.metric.namespace == METRICS_NAMESPACE
    }

    def count_sum(name: str) -> tuple[int, int]:
        d = dist.get(name)
        return (int(d.count), int(d.sum)) if d is not None else (0, 0)

    listed, listed_bytes = count_sum(PROGRESS_LISTED)
    done, failed = count_sum(PROGRESS_DONE)
    read, read_bytes = count_sum(PROGRESS_READ)
    return Snapshot(listed, listed_bytes, done, failed, read, read_bytes)


def format_duration(seconds: float) -> str:
    """``45s``, ``3m05s``, ``2h04m``: precise enough for an ETA, short enough for one line."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_seconds(s: Snapshot, elapsed: float) -> float | None:
    """Seconds left at the average pace so far (documents done per second of ``elapsed``);
    None until a document is done or when none is listed; 0 once all are."""
    if s.listed <= 0 or s.done <= 0 or elapsed <= 0:
        return None
    left = max(0, s.listed - s.done)
    return left * elapsed / s.done


def format_line(s: Snapshot, elapsed: float) -> str:
    """One progress line, e.g. ``documents 120/7000 (2%)  read 14.2 MB, 4.7 MB/s  failed 3
    elapsed 3s  ETA 2m52s``."""
    if s.listed == 0 and s.done == 0:
        return f"listing documents  elapsed {format_duration(elapsed)}"
    pct = min(100, s.done * 100 // s.listed) if s.listed else 0
    rate = s.read_bytes / _MB / elapsed if elapsed > 0 else 0.0
    eta = eta_seconds(s, elapsed) if s.done < s.listed else None
    return (
        f"documents {s.done}/{s.listed} ({pct}%)  "
        f"read {_mb(s.read_bytes / _MB)} MB, {_mb(rate)} MB/s  "
        f"failed {s.failed}  elapsed {format_duration(elapsed)}"
        + (f"  ETA {format_duration(eta)}" if eta is not None else "")
        # Every document is done; the diff against the prior manifest and the writes remain.
        + ("  writing tables" if s.done >= s.listed else "")
    )


def _mb(x: float) -> str:
    # Two decimals below 1 MB, so a small run does not read as "0.0".
    return f"{x:.2f}" if x < 1 else f"{x:.1f}"


class Reporter:
    """Shows progress while a run goes on: on a terminal (``tty``) the line is redrawn in
    place with a carriage return on every ``tick``; otherwise a log line is written at most
    every ``log_every`` seconds. ``finish`` shows the last figures (and ends the terminal
    line). ``start``/``stop`` run ``tick`` on a daemon thread every ``refresh`` seconds."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        *,
        stream: TextIO,
        tty: bool,
        clock: Callable[[], float] = time.monotonic,
        refresh: float = REFRESH_SECONDS,
        log_every: float = LOG_EVERY_SECONDS,
        logger: logging.Logger = _LOG,
    ) -> None:
        self._snapshot, self._stream, self._tty = snapshot, stream, tty
        self._clock, self._refresh, self._log_every, self._logger = (
            clock,
            refresh,
            log_every,
            logger,
        )
        self._start = clock()
        self._base = snapshot()  # process-wide cells count every earlier run in this process
        self._last_log = self._start
        self._width = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        return format_line(self._snapshot() - self._base, self._clock() - self._start)

    def tick(self) -> None:
        if self._tty:
            self._draw(self.line())
        elif self._clock() - self._last_log >= self._log_every:
            self._last_log = self._clock()
            self._logger.info("%s", self.line())

    def finish(self) -> None:
        line = self.line()
        if self._tty:
            self._draw(line)
            self._stream.write("\n")
            self._stream.flush()
        else:
            self._logger.info("%s", line)

    def _draw(self, line: str) -> None:
        # Padded to the previous line's width, so a shorter line leaves no tail behind.
        self._stream.write("\r" + line.ljust(self._width))
        self._stream.flush()
        self._width = len(line)

    def start(self) -> Reporter:
        self._thread = threading.Thread(target=self._loop, name="chunkmill-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.finish()

    def _loop(self) -> None:
        while not self._stop.wait(self._refresh):
            self.tick()


class _NoProgress:
    def stop(self) -> None:
        pass


def in_process(settings: RunSettings) -> bool:
    """Whether this run's DoFns execute in this process, where their progress cells can be
    read: a local runner in memory (not ``--direct_running_mode=multi_processing``)."""
    options = graph.pipeline_options(settings)
    mode = options.view_as(DirectOptions).direct_running_mode
    return launch.runner_name(options) in IN_PROCESS_RUNNERS and mode != "multi_processing"


def start(settings: RunSettings, stream: TextIO | None = None) -> Reporter | _NoProgress:
    """Starts showing the run's progress on ``stream`` (stderr) if it can be seen from here
    and chunkmill logs at INFO; returns what to ``stop()`` when the pipeline has finished."""
    _LOG.info(
        "run %s: %s -> %s (prior: %s)",
        settings.run_id,
        ", ".join(redact_uri(p) for p in settings.inputs),
        redact_uri(settings.output),
        settings.prior_run_id or settings.prior_manifest or "none",
    )
    if not _LOG.isEnabledFor(logging.INFO):
        return _NoProgress()
    if not in_process(settings):
        _LOG.info(
            "no live progress with this runner: its UI shows the %s counters", METRICS_NAMESPACE
        )
        return _NoProgress()
    stream = stream or sys.stderr
    return Reporter(process_snapshot, stream=stream, tty=stream.isatty()).start()
