"""Leases: one holder at a time of a piece of work on a shared output (an embed of a model
key, a ``runs gc``), on local disk, GCS and S3 alike.

A lease is a small JSON file created only if absent (``storage.create_if_absent``: one atomic
request on every store), naming its holder's host, process and start. The holder renews it
every ``RENEW_SECONDS`` while it works (``holding``) and deletes it at the end. A lease not
renewed for ``LEASE_SECONDS``, or made on this machine by a process that is gone (a kill), is
of a holder that stopped, and is taken over; of two takers that find it at once, only one
removes it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from apache_beam.io.filesystems import FileSystems

from chunkmill.transforms import runstate, storage

# A lease is renewed this often while its holder works; one not renewed for LEASE_SECONDS is
# of a holder that stopped (killed, its machine gone) and is taken over.
RENEW_SECONDS = 60
LEASE_SECONDS = 15 * 60


@dataclass(frozen=True)
class Lease:
    path: str
    token: str


class Held(Exception):
    """Another holder has the lease: ``holder`` is what its file says (may be empty)."""

    def __init__(self, path: str, holder: dict[str, Any]) -> None:
        super().__init__(path)
        self.path = path
        self.holder = holder

    def who(self) -> str:
        """``pid P on HOST, since T``: the holder in words."""
        h = self.holder
        return f"pid {h.get('pid', '?')} on {h.get('host', '?')}, since {h.get('started_at', '?')}"


def take(path: str, **fields: Any) -> Lease:
    """Takes the lease at ``path`` for this process, its file carrying ``fields`` besides the
    holder's host, pid and times; ``Held`` when another holder has it."""
    now, token = _now(), uuid.uuid4().hex
    mine = {
        "token": token,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **fields,
        "started_at": now,
        "renewed_at": now,
    }
    for _ in range(3):
        if storage.create_if_absent(path, json.dumps(mine, indent=1).encode()):
            return Lease(path, token)
        holder = read(path)
        if holder is None or not stopped(holder) or not _take_over(path, holder):
            break
    raise Held(path, read(path) or {})


@contextmanager
def holding(held: Lease, every: float = RENEW_SECONDS, name: str = "lease") -> Iterator[Lease]:
    """Holds ``held`` while the block runs: renewed every ``every`` seconds by a thread,
    released at the end."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(every):
            holder = read(held.path)
            if holder is None or holder.get("token") != held.token:
                return  # taken over: a holder stopped this long is not renewed
            runstate.write_whole(held.path, json.dumps({**holder, "renewed_at": _now()}).encode())

    renewer = threading.Thread(target=renew, name=name, daemon=True)
    renewer.start()
    try:
        yield held
    finally:
        stop.set()
        renewer.join()
        release(held)


def release(held: Lease) -> None:
    """Gives the lease up, if it is still this process's."""
    holder = read(held.path)
    if holder is not None and holder.get("token") == held.token:
        FileSystems.delete([held.path])


def read(path: str) -> dict[str, Any] | None:
    """What a lease's file says; None when it is gone or being written."""
    try:
        found: dict[str, Any] = json.loads(runstate.read_bytes(path, 64 * 1024))
        return found
    except Exception:  # gone since, or being written
        return None


def stopped(holder: dict[str, Any]) -> bool:
    """Whether the holder of a lease is known to be gone: not renewed for ``LEASE_SECONDS``,
    or made on this machine by a process that no longer exists."""
    try:
        renewed = datetime.fromisoformat(str(holder.get("renewed_at")))
        if (datetime.now(timezone.utc) - renewed).total_seconds() > LEASE_SECONDS:
            return True
    except (TypeError, ValueError):  # a lease without a time: judged by its process alone
        pass
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _take_over(path: str, holder: dict[str, Any]) -> bool:
    """Removes the lease of a stopped holder, once: of two takers that find it at once, only
    the one that creates its take-over marker removes it (the other could remove the lease
    the first one makes next)."""
    marker = f"{path}.taken-{holder.get('token', 'none')}"
    if not storage.create_if_absent(marker, b""):
        return False
    FileSystems.delete([path])
    return True


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
