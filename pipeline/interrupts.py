"""Every command answers SIGINT (Ctrl-C) and SIGTERM the same way: within seconds, in one line,
exit 130 / 143, leaving state as a kill would, and no process of its own left behind.

Unwinding the stack is not how: Beam, gRPC, torch and the cloud clients catch, log and
re-raise a ``KeyboardInterrupt`` in threads of their own (hundreds of lines), and their
non-daemon threads keep the process alive after the main thread gave up. So the command's
answer is made in a watcher thread woken through ``signal.set_wakeup_fd`` (the main thread
may be busy in C code): it runs the command's ``on_interrupt`` callbacks (a run marks its
folder ``_INTERRUPTED``, chunkmill.transforms.runstate), silences every other writer, kills
every descendant process (Beam's multi-process SDK workers, parser children), prints its one
line and ends the process with ``os._exit``, as a kill would: nothing unpublished is
published, nothing half-written is named. Reasoning: docs/design.md, "Interruptions".
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator

# The exit status of a process ended by a signal, as a shell reports it (128 + the number).
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
# How long the command's callbacks (marking a run folder, on a remote store too) may take.
CALLBACK_SECONDS = 5.0

_callbacks: list[Callable[[str], str | None]] = []
_lock = threading.Lock()
_command = "chunkmill"
_signals_seen = [0]


def on_interrupt(callback: Callable[[str], str | None]) -> None:
    """Runs ``callback(signal name)`` if the command is interrupted (in the watcher thread,
    within ``CALLBACK_SECONDS`` for all of them); a string it returns ends the one line."""
    _callbacks.append(callback)


def descendants(pid: int) -> list[int]:
    """Every process descended from ``pid`` (children, their children...), from /proc (Linux)
    or psutil; empty where neither can tell."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    if not entries:
        with contextlib.suppress(Exception):
            import psutil

            return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants() -> None:
    """SIGKILLs every process this one started, directly or not (all are found first: a
    parser child of a killed SDK worker is re-parented at once)."""
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _answer(signum: int, err: int) -> None:
    """The interrupted command's whole answer; never returns."""
    name = signal.Signals(signum).name
    code = EXIT_CODES.get(signal.Signals(signum), 128 + signum)
    logging.disable(logging.CRITICAL)  # nothing but the one line from here on
    threading.excepthook = lambda args: None
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # other threads' output, Beam's and gRPC's C logging included
        os.dup2(devnull, 2)
    kill_descendants()  # first: they stop working now, whatever the callbacks take
    notes: list[str] = []

    def run_callbacks() -> None:
        for callback in list(_callbacks):
            with contextlib.suppress(Exception):
                note = callback(name)
                if note:
                    notes.append(note)

    worker = threading.Thread(target=run_callbacks, daemon=True)
    worker.start()
    worker.join(CALLBACK_SECONDS)
    kill_descendants()  # any a callback's moment let start
    line = f"chunkmill: {_command} interrupted ({name})" + "".join(f"; {n}" for n in notes)
    # On a terminal, the line replaces a progress line being redrawn (and a typed "^C").
    start = "\r\x1b[K" if os.isatty(err) else ""
    with contextlib.suppress(OSError):
        os.write(err, (start + line + "\n").encode("utf-8", "backslashreplace"))
    os._exit(code)


@contextlib.contextmanager
def handled(command: str) -> Iterator[None]:
    """SIGINT and SIGTERM answered in one line while the block runs (in the main thread;
    elsewhere, or when signals are not this process's to handle, the block runs as it is).
    The previous handlers are restored after it, so a program that calls
    ``chunkmill.pipeline.cli.main`` keeps its own."""
    global _command
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _command = command
    _callbacks.clear()
    _signals_seen[0] = 0
    reader, writer = socket.socketpair()
    reader.setblocking(True)
    writer.setblocking(False)
    err = os.dup(2)  # where the line goes, whatever happens to fd 2 meanwhile
    try:
        old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread of the main interpreter
        os.close(err)
        reader.close()
        writer.close()
        yield
        return
    old = {s: signal.signal(s, _ignore_in_main_thread) for s in EXIT_CODES}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                data = reader.recv(16)
            except OSError:
                return
            if not data or stop.is_set():
                return
            for signum in data:
                if signum in EXIT_CODES and _lock.acquire(blocking=False):
                    _answer(signum, err)

    watcher = threading.Thread(target=watch, name="chunkmill-interrupts", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        if _lock.locked():
            # The watcher is answering: the command's own ending (its children killed under
            # it) must not end the process first, nor print. The watcher ends it.
            threading.Event().wait()
        stop.set()
        for s, handler in old.items():
            signal.signal(s, handler)
        signal.set_wakeup_fd(old_fd)
        with contextlib.suppress(OSError):
            writer.send(b"\0")  # wakes the watcher, which sees stop set
        watcher.join(1)
        reader.close()
        writer.close()
        os.close(err)
        _callbacks.clear()


def _ignore_in_main_thread(signum: int, frame: object) -> None:
    """The Python-level handler: the watcher thread answers (woken by the wakeup fd). A
    second signal while it answers ends the process at once (a person pressing Ctrl-C
    again)."""
    _signals_seen[0] += 1
    if _signals_seen[0] > 1:
        os._exit(EXIT_CODES.get(signal.Signals(signum), 128 + signum))
