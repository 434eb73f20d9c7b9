"""Progress of a local run: the line, the ETA, and the reporter on a fake clock."""

from __future__ import annotations

import io
import logging

import pytest

from chunkmill.pipeline import progress
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.pipeline.progress import (
    Reporter,
    Snapshot,
    eta_seconds,
    format_duration,
    format_line,
)
from chunkmill.transforms import counts

MB = 1024 * 1024


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.4, "0s"),
        (59.4, "59s"),
        (60, "1m00s"),
        (185, "3m05s"),
        (3599, "59m59s"),
        (3600, "1h00m"),
        (7440, "2h04m"),
        (-3, "0s"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("snapshot", "elapsed", "eta"),
    [
        (Snapshot(listed=100, done=25), 10.0, 30.0),  # 2.5 documents/s, 75 left
        (Snapshot(listed=100, done=100), 10.0, 0.0),
        (Snapshot(listed=100, done=0), 10.0, None),  # no pace yet
        (Snapshot(listed=0, done=0), 10.0, None),
        (Snapshot(listed=10, done=5), 0.0, None),
        (Snapshot(listed=10, done=12), 6.0, 0.0),  # retried bundles can over-count
    ],
)
def test_eta(snapshot, elapsed, eta):
    assert eta_seconds(snapshot, elapsed) == eta


def test_line_while_listing_then_working_then_writing():
    assert format_line(Snapshot(), 3.2) == "listing documents  elapsed 3s"
    mid = Snapshot(
        listed=7000, listed_bytes=80 * MB, done=120, failed=3, read=110, read_bytes=int(14.2 * MB)
    )
    assert format_line(mid, 3.0) == (
        "documents 120/7000 (1%)  read 14.2 MB, 4.7 MB/s  failed 3  elapsed 3s  ETA 2m52s"
    )
    small = Snapshot(listed=6, done=6, failed=1, read=6, read_bytes=MB // 10)
    assert format_line(small, 2.0) == (
        "documents 6/6 (100%)  read 0.10 MB, 0.05 MB/s  failed 1  elapsed 2s  writing tables"
    )


def test_snapshots_subtract_field_by_field():
    a = Snapshot(10, 100, 5, 1, 4, 40)
    assert a - Snapshot(1, 10, 2, 1, 1, 10) == Snapshot(9, 90, 3, 0, 3, 30)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_terminal_line_is_redrawn_in_place():
    clock, out = FakeClock(), io.StringIO()
    state = {"s": Snapshot(listed=5, done=2)}  # figures from before this run
    r = Reporter(lambda: state["s"], stream=out, tty=True, clock=clock)
    state["s"] = Snapshot(listed=105, done=2)
    clock.now += 1
    r.tick()
    # The figures of earlier runs in this process (5 listed, 2 done) are not counted.
    first = "documents 0/100 (0%)  read 0.00 MB, 0.00 MB/s  failed 0  elapsed 1s"
    assert out.getvalue() == "\r" + first
    state["s"] = Snapshot(listed=105, done=52, read=50, read_bytes=5 * MB)
    clock.now += 9
    r.tick()
    second = "documents 50/100 (50%)  read 5.0 MB, 0.50 MB/s  failed 0  elapsed 10s  ETA 10s"
    assert out.getvalue() == "\r" + first + "\r" + second
    state["s"] = Snapshot(listed=105, done=102, read=100, read_bytes=10 * MB)
    clock.now += 10
    r.finish()
    last = (
        "documents 100/100 (100%)  read 10.0 MB, 0.50 MB/s  failed 0  elapsed 20s  writing tables"
    )
    assert out.getvalue().endswith("\r" + last + "\n")
    assert "\n" not in out.getvalue()[:-1], "one terminal line, redrawn"


def test_a_shorter_line_overwrites_the_whole_previous_one():
    clock, out = FakeClock(), io.StringIO()
    state = {"s": Snapshot(listed=10, done=1, failed=1000)}
    r = Reporter(lambda: state["s"], stream=out, tty=True, clock=clock)
    state["s"] = Snapshot(listed=20, done=11, failed=1999)
    r.tick()
    long_line = out.getvalue()[1:]
    state["s"] = Snapshot(listed=20, done=11, failed=1000)
    r.tick()
    short = format_line(Snapshot(listed=10, done=10, failed=0), 0.0)
    assert out.getvalue() == "\r" + long_line + "\r" + short.ljust(len(long_line))


def test_without_a_terminal_a_log_line_every_interval(caplog):
    clock, out = FakeClock(), io.StringIO()
    state = {"s": Snapshot()}
    logger = logging.getLogger("chunkmill.pipeline.progress.test")
    r = Reporter(
        lambda: state["s"], stream=out, tty=False, clock=clock, log_every=30, logger=logger
    )
    caplog.set_level(logging.INFO, logger=logger.name)
    state["s"] = Snapshot(listed=100, done=10)
    for _ in range(29):
        clock.now += 1
        r.tick()
    assert caplog.messages == []
    clock.now += 1
    r.tick()
    assert caplog.messages == [
        "documents 10/100 (10%)  read 0.00 MB, 0.00 MB/s  failed 0  elapsed 30s  ETA 4m30s"
    ]
    clock.now += 29
    r.tick()
    assert len(caplog.messages) == 1
    clock.now += 1
    r.tick()
    r.finish()
    assert len(caplog.messages) == 3 and "elapsed 1m00s" in caplog.messages[-1]
    assert out.getvalue() == "", "nothing on the stream without a terminal"


def test_reads_the_process_wide_cells_the_pipeline_updates():
    before = progress.process_snapshot()
    counts.LISTED_PROGRESS.update(300)
    counts.LISTED_PROGRESS.update(200)
    counts.READ_PROGRESS.update(300)
    counts.DONE_PROGRESS.update(0)
    counts.DONE_PROGRESS.update(1)
    assert progress.process_snapshot() - before == Snapshot(
        listed=2, listed_bytes=500, done=2, failed=1, read=1, read_bytes=300
    )


@pytest.mark.parametrize(
    ("beam_args", "expected"),
    [
        ([], True),
        (["--runner=FnApiRunner"], True),
        (["--runner", "DirectRunner", "--direct_num_workers=2"], True),
        (["--direct_running_mode=multi_processing"], False),
        (["--runner=DataflowRunner"], False),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], False),
    ],
)
def test_live_progress_only_where_the_dofns_run_here(beam_args, expected, tmp_path):
    (tmp_path / "a.md").write_text("hello\n")
    settings = run_settings(
        ["--input", str(tmp_path / "*.md"), "--output", str(tmp_path / "out"), *beam_args]
    )
    assert progress.in_process(settings) is expected
