"""Extraction that no hostile document can break: third-party parsers run in a child process
with a time budget and a memory budget, and a document that blows either costs that document
only (a ``timeout`` or ``memory`` errors/ row), never the worker.

One long-lived child per ``IsolatedExtractor`` (one per DoFn instance, created in ``setup``),
not one process per document: starting Python and importing pypdf/pypdfium2/lxml takes about
half a second, sending one small PDF to a warm child and its text back well under a
millisecond (see README, "Isolation and limits"). The child is replaced only after it was
killed (time budget), ran out of memory, or crashed. The same child decodes and chunks long
documents (``IsolatedExtractor.call``, used by ``chunkmill.document.ChunkInChild``), so
chunking has the same budgets. It runs with a minimal environment (``child_environment``):
no credential of the worker reaches code that parses untrusted files.

The protocol is private: length-prefixed pickle frames over the child's stdin/stdout, so it
needs no ``multiprocessing`` start method (fork is unsafe in a threaded Beam worker; spawn
re-imports the main module, which on some runners is the SDK harness itself). The child
writes nothing else on its stdout: whatever a parser prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from chunkmill.extract import Extracted, ExtractionError, extract, format_by_name, uses_parser

if TYPE_CHECKING:
    from chunkmill.config import Limits

ExtractFn = Callable[..., Extracted]

# A cold child imports Python, pypdf, pypdfium2 and lxml; on a loaded 2-core machine that
# takes seconds, never minutes. A child that is not ready by then is broken, not slow.
_STARTUP_SECONDS = 120.0

_HEADER = struct.Struct(">Q")

# The only variables a parser child inherits (untrusted parsers run with a
# minimal environment): what the interpreter and C libraries need to start and to decode
# text. Credentials (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, tokens...) never reach code that
# parses hostile files. LD_LIBRARY_PATH: some Python installs cannot start without it.
# PYTHONPATH is not passed: the parent's sys.path goes on the command line instead.
_CHILD_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH")

# SIGINT ignored: Ctrl-C in a terminal reaches the whole process group, and the parent, which
# stops its children itself (chunkmill.pipeline.interrupts), answers it in one line. The
# child starts with SIGINT blocked (``_ensure_child``), so one that comes while it starts
# waits, and is dropped once it is ignored.
_BOOT = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
    "from chunkmill.isolation import _serve; _serve()"
)


class IsolatedExtractor:
    """Runs ``target(path, data, **options)`` in a long-lived child process.

    ``__call__`` returns the target's ``Extracted`` or raises ``ExtractionError``: the
    target's own, or ``timeout`` (the child was killed after ``timeout_seconds``), ``memory``
    (the target hit the memory budget), ``killed`` (``ParserKilled``: a signal from outside,
    such as the OOM killer's SIGKILL; tried again next run) or ``corrupt`` (the child
    crashed, e.g. a segfault in a C parser). The
    next call starts a fresh child. ``RuntimeError`` only if a child cannot start at all.
    ``target`` must be a module-level function (it is pickled by reference).

    Not thread-safe: one instance per DoFn instance, which Beam calls from one thread.
    """

    def __init__(
        self, *, timeout_seconds: float, memory_mb: int, target: ExtractFn = extract
    ) -> None:
        self._timeout = timeout_seconds
        self._memory_bytes = memory_mb * 1024 * 1024
        self._target = target
        self._proc: subprocess.Popen[bytes] | None = None
        self._home: str | None = None
        self.starts = 0  # children started so far; for tests and metrics

    def __call__(self, path: str, data: bytes, **options: Any) -> Extracted:
        result: Extracted = self.call(None, path, data, **options)
        return result

    def call(self, fn: Callable[..., Any] | None, path: str, data: bytes, **options: Any) -> Any:
        """``fn(path, data, **options)`` in the child, under the same budgets and with the
        same errors as ``__call__`` (which is ``call(None, ...)``: the child's ``target``).
        ``fn`` must be a module-level function (pickled by reference), its result picklable."""
        if self._proc is not None and self._proc.poll() is not None:
            self._discard()  # died between documents (killed from outside): not this one's fault
        proc = self._ensure_child()
        request = (fn, path, data, options)
        try:
            _write_frame(proc.stdin, request)
        except (BrokenPipeError, OSError):
            # The child died between documents; one fresh child gets one more try.
            self._discard()
            proc = self._ensure_child()
            _write_frame(proc.stdin, request)
        try:
            reply = _read_frame(proc.stdout, deadline=time.monotonic() + self._timeout)
        except TimeoutError:
            self._discard()
            raise ExtractionError(
                "timeout",
                f"the document took longer than {self._timeout:g} s; its process was killed",
            ) from None
        except EOFError:
            code = self._discard()
            raise _death(code) from None
        if reply[0] == "ok":
            return reply[1]
        _, reason, message = reply
        if reason == "memory":
            # Its heap is fragmented or its C libraries half-initialised: start afresh.
            self._discard()
        raise ExtractionError(reason, message)

    def close(self) -> None:
        """Stops the child (if any); a later call starts a new one."""
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: the child exits on its own
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self._discard()  # kills it if it did not exit; closes the pipes

    def __enter__(self) -> IsolatedExtractor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _ensure_child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None:
            return self._proc
        self._home = tempfile.mkdtemp(prefix="chunkmill-parser-")
        # Blocked in this thread only while it starts the child, which inherits the mask.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps([os.path.abspath(p) for p in sys.path])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                env=child_environment(os.environ, self._home),
                cwd=self._home,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        try:
            _write_frame(proc.stdin, (self._target, self._memory_bytes))
            ready = _read_frame(proc.stdout, deadline=time.monotonic() + _STARTUP_SECONDS)
        except (TimeoutError, EOFError, OSError) as e:
            ready = e
        self._proc = proc
        if ready != ("ready",):
            self._discard()
            raise RuntimeError(f"the extraction child process did not start: {ready!r}")
        self.starts += 1
        return proc

    def _discard(self) -> int | None:
        """Kills the child; returns its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        home, self._home = self._home, None
        with contextlib.suppress(OSError):
            proc.kill()
        code = proc.wait()
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)  # whatever a parser left behind
        return code


def child_environment(parent: Mapping[str, str], home: str) -> dict[str, str]:
    """The parser child's whole environment: ``_CHILD_ENV_KEEP`` from ``parent``, and
    ``home`` as its HOME and TMPDIR (a private folder removed with the child)."""
    env = {name: parent[name] for name in _CHILD_ENV_KEEP if name in parent}
    env["HOME"] = env["TMPDIR"] = home
    return env


class Extractor:
    """The extraction step of one DoFn instance: documents that need a third-party parser
    (PDF, HTML, DOCX, JSON, CSV: see ``uses_parser``) go through an ``IsolatedExtractor``;
    plain text, Markdown, reStructuredText and code are decoded in-process. Decoding is
    bounded (linear time; memory a small multiple of the bytes, which
    ``--max-document-bytes`` caps) and cannot hang, so a round trip to a child would only
    cost time on the most common documents. (Chunking is not bounded that way: a long
    document is decoded and chunked in the child through ``call``.)

    Callable like ``extract``; ``options`` are passed on to it.
    """

    def __init__(self, limits: Limits, *, target: ExtractFn | None = None, **options: Any) -> None:
        self._options = {"max_pdf_pages": limits.max_pdf_pages, **options}
        # Looked up here, not bound as a default, so a test can swap in a hostile parser.
        target = extract if target is None else target
        self._target = target
        self._isolated = IsolatedExtractor(
            timeout_seconds=limits.timeout_seconds, memory_mb=limits.memory_mb, target=target
        )

    def __call__(self, path: str, data: bytes) -> Extracted:
        if not uses_parser(path, data):
            return self._target(path, data, **self._options)
        try:
            return self._isolated(path, data, **self._options)
        except ParserCrashed as e:
            # A segfault in PDFium (C) is the hardest way to fail, and pypdf (Python) cannot
            # segfault: --pdf-engine auto falls back to pypdf, and pypdf, which asks PDFium
            # for line ends and OCR renders, reads the file again without it.
            engine = self._options.get("pdf_engine")
            if e.reason != "corrupt" or self._options.get("use_pdfium") is False:
                raise
            if engine != "auto" and not (engine == "pypdf" and format_by_name(path) == "pdf"):
                raise
            retry = {**self._options, "pdf_engine": "pypdf", "use_pdfium": False}
            return self._isolated(path, data, **retry)

    def call(self, fn: Callable[..., Any], path: str, data: bytes, **options: Any) -> Any:
        """``fn(path, data, **options)`` in this instance's child: ``IsolatedExtractor.call``."""
        return self._isolated.call(fn, path, data, **options)

    def close(self) -> None:
        self._isolated.close()


class ParserCrashed(ExtractionError):
    """The child died under a document (a signal or an unexpected exit): ``corrupt``. A
    subclass, so a caller can retry with another parser."""


# The errors/ reason of a document whose parser child was killed from outside.
KILLED = "killed"
# Signals a process raises on itself when its own code fails (a C parser's bad pointer, an
# abort): the document made the parser crash. Any other signal (SIGKILL from the kernel's
# OOM killer or an operator, SIGTERM, SIGINT) came from outside and says nothing about it.
CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT, signal.SIGSYS}
)


class ParserKilled(ParserCrashed):
    """The child was killed by a signal it did not raise itself (``CRASH_SIGNALS``): reason
    ``killed``, a transient failure (``chunkmill.carryover.TRANSIENT_REASONS``) tried again
    next run. The memory budget is not this: a document over it is ``memory``, said by the
    child itself (``_memory_reply``)."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.reason = KILLED
        self.message = message

    def __reduce__(self):
        return (type(self), (self.message,))


def _death(code: int | None) -> ExtractionError:
    if code is not None and code < 0:
        sig = -code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig not in CRASH_SIGNALS:
            return ParserKilled(
                f"the parser process was killed from outside ({name}: the OOM killer, an "
                "operator, a shutdown); tried again next run"
            )
        return ParserCrashed("corrupt", f"the parser process crashed ({name})")
    return ParserCrashed("corrupt", f"the parser process exited unexpectedly (status {code})")


def _write_frame(stream: IO[bytes] | None, obj: Any) -> None:
    _send(stream, _pickled(obj))


def _pickled(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _send(stream: IO[bytes] | None, payload: bytes) -> None:
    """One frame: ``payload``'s length, then ``payload``."""
    assert stream is not None
    stream.write(_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read_frame(stream: IO[bytes] | None, *, deadline: float | None = None) -> Any:
    """One frame; ``EOFError`` when the writer is gone, ``TimeoutError`` past ``deadline``."""
    assert stream is not None
    fd = stream.fileno()
    header = _read_exact(fd, _HEADER.size, deadline)
    (size,) = _HEADER.unpack(header)
    return pickle.loads(_read_exact(fd, size, deadline))


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# --- the child ----------------------------------------------------------------------------------


def _address_space() -> int:
    """This process's current virtual size in bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


# Imported in the child before its memory limit is set: the parsers, and the module whose
# functions a request runs (decoding and chunking, with what they import). Importing them
# under the limit would spend the first document's budget on loading libraries.
_WARM_MODULES = (
    "pypdf",
    "pypdfium2",
    "bs4",
    "lxml.etree",
    "docx",
    "charset_normalizer",
    "chunkmill.document",
)


def _warm_up() -> None:
    """Imports ``_WARM_MODULES`` before the memory limit is set, so the budget is what one
    document may use, not what loading libpdfium, lxml or the chunkers costs."""
    for module in _WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


def _limit_memory(budget: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the time budget still holds
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + budget
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _serve() -> None:
    """The child's loop: one request frame in, one reply frame out, until stdin closes.

    At the memory limit almost any Python operation can fail to allocate, and the
    ``MemoryError`` keeps the failed call's frames (and the memory they hold) alive while it
    is handled. So the handler only sets a flag: leaving the ``except`` block drops the
    exception and its frames, and the reply is built after that, from a frame made before
    the limit was set."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a parser's print() must not corrupt the protocol
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    target, memory_bytes = _read_frame(inp)
    _warm_up()
    out_of_memory = _pickled(_memory_reply(memory_bytes))
    _limit_memory(memory_bytes)
    _write_frame(out, ("ready",))
    while True:
        try:
            fn, path, data, options = _read_frame(inp)
        except EOFError:
            return
        reply: tuple[Any, ...] | None = None
        try:
            reply = ("ok", (fn or target)(path, data, **options))
        except ExtractionError as e:
            reply = ("error", e.reason, e.message)
        except MemoryError:
            pass  # reply stays None; nothing may be allocated until the frames are freed
        except Exception as e:  # a parser bug costs this document only
            reply = ("error", "corrupt", f"{type(e).__name__}: {e}")
        del data
        if reply is not None:
            try:
                payload = _pickled(reply)
            except MemoryError:  # e.g. pickling a huge text
                payload = None
            del reply
            if payload is not None:
                _send(out, payload)
                continue
        # Out of memory: a fragmented heap or a half-initialised C library is not
        # trusted with the next document. The parent starts a fresh child.
        _send(out, out_of_memory)
        return


def _memory_reply(memory_bytes: int) -> tuple[str, str, str]:
    mb = memory_bytes // (1024 * 1024)
    return ("error", "memory", f"the document needed more than the {mb} MB memory budget")
