"""Deliberately bad extractors injected into transforms.isolation by the tests. Module-level
functions, so the child process can import them by reference."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from chunkmill.extract import Extracted, ExtractionError


def whose(path: str, data: bytes, **options: Any) -> Extracted:
    """Names the process it ran in, and what it was given."""
    return Extracted(text=f"pid={os.getpid()} {data!r} {sorted(options.items())}", format="text")


def hang(path: str, data: bytes, **options: Any) -> Extracted:
    """A parser stuck in a loop on ``b"hang"`` (pypdf #582, #2877...); fine otherwise."""
    if data == b"hang":
        while True:
            time.sleep(0.05)
    return whose(path, data, **options)


def allocate(path: str, data: bytes, **options: Any) -> Extracted:
    """A parser whose memory grows without bound on ``b"allocate"`` (pypdf #2790...)."""
    if data == b"allocate":
        blocks = []
        while True:
            blocks.append(bytearray(16 * 1024 * 1024))  # zero-filled: really touched
    return whose(path, data, **options)


def crash(path: str, data: bytes, **options: Any) -> Extracted:
    """A C parser that segfaults on ``b"crash"``."""
    if data == b"crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return whose(path, data, **options)


def reject(path: str, data: bytes, **options: Any) -> Extracted:
    raise ExtractionError("encrypted", "needs a password")


def bug(path: str, data: bytes, **options: Any) -> Extracted:
    raise KeyError("/Root")


def hostile_extract(path: str, data: bytes, **options: Any) -> Extracted:
    """``extract``, except on documents that start with ``HANG`` or ``ALLOCATE``."""
    from chunkmill.extract import extract

    if data.startswith(b"HANG"):
        return hang(path, b"hang", **options)
    if data.startswith(b"ALLOCATE"):
        return allocate(path, b"allocate", **options)
    return extract(path, data, **options)


def pdfium_crashes(path: str, data: bytes, **options: Any) -> Extracted:
    """PDFium segfaults on this file; pypdf reads it."""
    if options.get("pdf_engine") != "pypdf":
        os.kill(os.getpid(), signal.SIGSEGV)
    return whose(path, data, **options)


def pdfium_crashes_for_pypdf_too(path: str, data: bytes, **options: Any) -> Extracted:
    """PDFium segfaults on this file, also where pypdf asks it for line ends."""
    if options.get("use_pdfium", True):
        os.kill(os.getpid(), signal.SIGSEGV)
    return whose(path, data, **options)


def environment(path: str, data: bytes, **options: Any) -> Extracted:
    """Reports the child's environment and working folder, as JSON."""
    import json

    return Extracted(text=json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}), format="text")


def exhaust(path: str, data: bytes, **options: Any) -> Extracted:
    """A parser that fills its heap with small objects on ``b"exhaust"``: at the limit, even
    a small allocation fails, until the parser's frames are gone."""
    if data == b"exhaust":
        cells: list[list[int]] = []
        while True:
            cells.append([len(cells)])
    return whose(path, data, **options)
