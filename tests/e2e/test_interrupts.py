"""Every interruption in one line: SIGINT (Ctrl-C, sent to the whole process group as a
terminal does) or SIGTERM (to the process, as ``kill`` does) while work is in progress ends
the command within seconds, with one line on stderr, exit 130 / 143, no traceback, no process
of its own left alive, and state as a kill would leave it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chunkmill.pipeline import interrupts
from chunkmill.pipeline.cli import main
from tests.e2e.conftest import prose
from tests.e2e.test_sync import database  # noqa: F401  (the fixture)
from tests.helpers import make_pdf
from tests.pg import postgres  # noqa: F401  (the fixture)

REPO = Path(__file__).resolve().parents[2]
# Deadlock guards only: work starts in seconds, and an interrupted command ends in seconds.
_START_TIMEOUT_S = 300
_END_TIMEOUT_S = 60
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def many_documents(root: Path, n: int) -> Path:
    """``n`` documents, a PDF among every ten (parsed in a child process)."""
    pdf = make_pdf([prose("page", 2)])
    for i in range(n):
        folder = root / f"f{i % 20}"
        folder.mkdir(parents=True, exist_ok=True)
        if i % 10 == 0:
            (folder / f"d{i}.pdf").write_bytes(pdf)
        else:
            (folder / f"d{i}.md").write_text(f"# Doc {i}\n\n" + prose(f"t{i}", 3))
    return root


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def alive(pids: list[int]) -> list[int]:
    """The processes of ``pids`` still running (a zombie waits for its reaper only)."""
    return [p for p in pids if _state(p) not in (None, "Z", "X")]


def in_group(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def interrupt(
    argv: list[str], sig: signal.Signals, *, group: bool, working: Callable[[int], bool]
) -> tuple[int, list[str], list[int]]:
    """Starts ``python -m chunkmill ARGV`` in a session of its own, waits until
    ``working(pid)``, sends ``sig`` (to the group when ``group``), and returns its exit code,
    the lines it wrote to stderr after the signal, and the processes it had started."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    err_path = Path(f"interrupted-{os.getpid()}-{time.monotonic_ns()}.err")
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "chunkmill", *argv],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not working(proc.pid):
        assert proc.poll() is None, f"ended before work was in progress: {err_path.read_text()}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    before = len(err_path.read_text().splitlines())
    started = interrupts.descendants(proc.pid)
    if group:
        os.killpg(proc.pid, sig)  # what Ctrl-C in a terminal does
    else:
        proc.send_signal(sig)
    code = proc.wait(timeout=_END_TIMEOUT_S)
    lines = err_path.read_text().splitlines()
    deadline = time.monotonic() + 10  # the orphaned zombies' reaping
    while alive(in_group(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(in_group(proc.pid)) == [] and alive(started) == []
    return code, lines[before:] if len(lines) > before else lines[-1:], started


def has_children(pid: int) -> bool:
    return bool(interrupts.descendants(pid))


def run_started(folder: Path) -> Callable[[int], bool]:
    """Documents are being parsed: the run is claimed and a child process is working."""
    return lambda pid: (folder / "_CLAIM").exists() and has_children(pid)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "group", "mode"),
    [
        (signal.SIGINT, True, []),
        (signal.SIGTERM, False, []),
        (signal.SIGINT, True, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]),
        (signal.SIGTERM, False, ["--direct_running_mode=multi_processing"]),
    ],
    ids=["ctrl-c", "kill", "ctrl-c-multi-process", "kill-multi-process"],
)
def test_an_interrupted_run_says_so_in_one_line_and_publishes_nothing(
    sig, group, mode, tmp_path, capsys
):
    docs = many_documents(tmp_path / "docs", 1500)
    out = tmp_path / "out"
    base = ["--input", str(docs / "**"), "--output", str(out)]
    first = ["--input", str(docs / "f0" / "**"), "--output", str(out), "--run-id", "r1"]
    assert main(["run", *first]) == 0
    capsys.readouterr()

    folder = out / "runs" / "r2"
    code, after, started = interrupt(
        ["run", *base, "--run-id", "r2", *mode], sig, group=group, working=run_started(folder)
    )

    assert code == EXIT[sig]
    assert started, "the run had child processes working"
    assert after == [
        f"chunkmill: run interrupted ({sig.name}); run r2 published nothing (marked "
        "interrupted); LATEST names r1"
    ]
    assert (out / "LATEST").read_text().strip() == "r1"
    assert not (folder / "_SUCCESS").exists()
    assert (folder / "_INTERRUPTED").exists()
    assert main(["runs", "list", "--output", str(out)]) == 0
    listed = capsys.readouterr().out
    assert any(line.startswith("r2") and "interrupted" in line for line in listed.splitlines())


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """A corpus of 1500 documents and an output holding its finished run r1."""
    root = tmp_path_factory.mktemp("finished")
    docs = many_documents(root / "docs", 1500)
    out = root / "out"
    assert main(["run", "--input", str(docs / "**"), "--output", str(out), "--run-id", "r1"]) == 0
    return docs, out


def pyarrow_loaded(pid: int) -> bool:
    """The command is past start-up: its heavy libraries are loaded."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "pyarrow" in f.read()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("command", ["plan", "report", "export"])
def test_every_command_answers_ctrl_c_in_one_line(command, finished, tmp_path):
    docs, out = finished
    argv = {
        "plan": ["plan", "--input", str(docs / "**"), "--output", str(out)],
        "report": ["report", "--output", str(out)],
        "export": ["export", "--output", str(out), "--to", str(tmp_path / "export")],
    }[command]
    code, after, _ = interrupt(argv, signal.SIGINT, group=True, working=pyarrow_loaded)
    assert code == 130
    assert after == [f"chunkmill: {command} interrupted (SIGINT)"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_embed_says_so_in_one_line_and_keeps_what_it_committed(sig, tmp_path):
    from chunkmill import embedding

    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(40):
        (notes / f"note{i}.md").write_text(f"# Note {i}\n\nA short note, number {i}, on {i}s.\n")
    out = tmp_path / "out"
    assert main(["run", "--input", str(notes / "**"), "--output", str(out), "--run-id", "r1"]) == 0
    store = out / "embeddings" / embedding.describe().key

    code, after, _ = interrupt(
        ["embed", "--output", str(out), "--texts-per-file", "1"],
        sig,
        group=sig == signal.SIGINT,
        working=lambda pid: bool(list(store.glob("part-*.parquet"))),
    )
    assert code == EXIT[sig]
    assert after == [f"chunkmill: embed interrupted ({sig.name})"]
    committed = list(store.glob("part-*.parquet"))
    assert 1 <= len(committed) < 40  # what it committed is kept, as after a kill


@pytest.mark.slow
def test_a_sync_interrupted_inside_its_transaction_says_so_and_leaves_the_last_state(
    chunkmill,
    corpus,
    database,  # noqa: F811
    capsys,
):
    """Ctrl-C while sync waits on a row lock inside its transaction (in libpq, not in
    Python): one line, exit 130, and the index exactly as it was."""
    import psycopg

    from tests.e2e.test_sync import embed_stand_in, index_rows, sync

    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    output = first.dir.parents[1]
    embed_stand_in(output, first)
    assert sync(output, database, capsys)[0] == 0
    (corpus / "more.md").write_text("# More\n\n" + prose("more", 2))
    (corpus / "guides" / "start.md").write_text("# Start\n\n" + prose("edited", 12))
    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    embed_stand_in(output, second)
    locked = next(
        r["chunk_id"] for r in first.rows("manifest") if r["source_uri"].endswith("start.md")
    )

    def waits_on_the_lock(pid: int) -> bool:
        with psycopg.connect(database, autocommit=True) as watcher:
            return bool(
                watcher.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
            )

    with psycopg.connect(database) as blocker:
        before = index_rows(database)
        blocker.execute("SELECT 1 FROM chunkmill_chunks WHERE chunk_id = %s FOR UPDATE", [locked])
        code, after, _ = interrupt(
            ["sync", "--output", str(output), "--to", database],
            signal.SIGINT,
            group=True,
            working=waits_on_the_lock,
        )
        blocker.rollback()
    assert code == 130
    assert after == ["chunkmill: sync interrupted (SIGINT)"]
    assert index_rows(database) == before


@pytest.mark.slow
def test_an_interrupted_eval_says_so_in_one_line(tmp_path):
    """Ctrl-C while eval loads its embedding model (torch, in C)."""
    from tests.unit.test_eval_command import PARIS, write_questions

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "paris.md").write_text(PARIS)
    write_questions(tmp_path / "q.jsonl", [("Which river?", "paris", PARIS, "Seine")])

    def torch_loaded(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/maps") as f:
                return "libtorch" in f.read()
        except OSError:
            return False

    argv = ["eval", "--input", str(tmp_path / "docs" / "**"), "--questions"]
    argv += [str(tmp_path / "q.jsonl"), "--retriever", "model"]
    code, after, _ = interrupt(argv, signal.SIGINT, group=True, working=torch_loaded)
    assert code == 130
    assert after == ["chunkmill: eval interrupted (SIGINT)"]
