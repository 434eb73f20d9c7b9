"""The files that say which runs exist, which finished and which is the newest, and reading
them defensively (they live in shared storage, where anyone can damage them)::

    OUTPUT/runs/RUN_ID/_CLAIM     JSON claim: written first, atomically, so no two launches
                                  ever share a run folder
    OUTPUT/runs/RUN_ID/_SUCCESS   JSON run report, written after every table is complete
    OUTPUT/LATEST                 RUN_ID of the newest finished run

Every reader of ``LATEST`` goes through ``read_latest``; every reader of ``_SUCCESS`` through
``read_success``. A damaged file is a ``BadLatest`` / ``CorruptSuccess`` whose message says
what is wrong and how to mend it, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import stat
import unicodedata
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import schema, stores
from chunkmill.transforms import storage

SUCCESS = "_SUCCESS"
LATEST = "LATEST"
RUNS = "runs"
CLAIM = "_CLAIM"
# Markers of a run that ended unpublished on purpose: refused (a guard such as
# --max-removed-ratio stopped it) or interrupted (SIGINT, SIGTERM). ``runs list`` shows them,
# ``runs gc`` deletes such runs without waiting for --grace-hours.
REFUSED = "_REFUSED"
INTERRUPTED = "_INTERRUPTED"
ENDED_MARKERS = (REFUSED, INTERRUPTED)

# Run ids name a folder under OUTPUT/runs/: no separators, nothing that escapes the prefix.
# Matched whole (fullmatch): "$" would also accept a trailing newline.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RUN_ID_RULE = "letters, digits, '.', '_' or '-' (at most 128, starting with a letter or digit)"
# The keys every reader of _SUCCESS relies on; without them the run did not finish.
SUCCESS_KEYS = ("run_id", "started_at", "counts", "tables")
# A run id is at most 128 characters: a LATEST far longer is not one, and is not read whole.
_LATEST_MAX_BYTES = 1024
# Default ids are to the second; launches in the same second take -2, -3, ... up to this.
MAX_SAME_SECOND_RUNS = 1000
# When a run started, in the run report and its claim: to the microsecond, so that runs one
# after the other within a second (a script, a backfill, a small corpus) order as they ran.
STARTED_AT_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_TO_THE_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

_log = logging.getLogger(__name__)

# How to go on past a prior that cannot be used, said by every such refusal. Not a bare
# "--prior-manifest none": a run without a prior is still held to LATEST's documents
# (transforms.publish.check_replaced_ratio), and the message says so.
OLDER_PRIOR = "pass --prior-manifest naming an older finished run (chunkmill runs list shows them)"
RECOVER_PRIOR = (
    f"{OLDER_PRIOR}, or none to chunk everything again (still refused if it would drop more "
    "than --max-removed-ratio of LATEST's documents)"
)


def is_run_id(value: str) -> bool:
    return _RUN_ID.fullmatch(value) is not None


def start_order(started_at: str | None) -> str:
    """``started_at`` as it orders: a time to the second, as older releases wrote it, as
    that second's first microsecond."""
    when = started_at or ""
    if _TO_THE_SECOND.fullmatch(when):
        when = when[:-1] + ".000000Z"
    return when


def run_order(
    started_at: str | None, run_id: str, chain: dict[str, Any] | None = None
) -> tuple[str, int, str, str]:
    """The order of runs ``LATEST`` follows: by their chain, not by the clocks that launched
    them (``transforms.lineage``). ``chain`` is the run report's chain block
    (``lineage.chain_block``): the latest start on the run's walk back and how many runs
    precede it there. A run that descends from another has at least its latest start and a
    longer walk, so it is newer, however far ahead the clock of an ancestor ran. Runs that do
    not descend from each other order by that latest start, the walk's length, when each
    started, then id: two runs launched after the same run (side by side) by when each
    started, then id (started in the same microsecond). One total order, so that publishers
    racing each other agree on the newest (``publish.point_latest_at_newest``). A run without
    a chain block (an older release) is the first of its own chain."""
    when = start_order(started_at)
    latest, length = (when, 0) if chain is None else (chain["latest_start"], chain["length"])
    return (max(latest, when), length, when, run_id)


def run_dir(output: str, run_id: str) -> str:
    return FileSystems.join(output, RUNS, run_id)


def table_dir(output: str, run_id: str, table: str) -> str:
    return FileSystems.join(run_dir(output, run_id), table)


class NotAFile(OSError):
    """A local state file (``LATEST``, ``_SUCCESS``, ``_CLAIM``) that is not a regular file:
    a folder, a FIFO (opening it would wait for a writer forever), a device, a socket.
    ``kind`` says which ("a folder", "a FIFO", ...)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a file")
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a message."""
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The bytes of a file through FileSystems (local, gs://, s3://), at most ``limit``. A
    local path is examined first (``os.stat``) and never opened unless it is a regular file:
    ``NotAFile`` otherwise."""
    local = stores.local_path(path)
    if local is not None:
        try:
            mode = os.stat(local).st_mode
        except FileNotFoundError:
            mode = None  # FileSystems.open says so, as for any store
        if mode is not None and not stat.S_ISREG(mode):
            raise NotAFile(path, file_kind(mode))
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        data: bytes = f.read() if limit is None else f.read(limit)
        return data


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def write_text(path: str, text: str) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# _SUCCESS


class CorruptSuccess(ValueError):
    """A ``_SUCCESS`` that is not a JSON object with ``SUCCESS_KEYS`` (truncated, being
    written, or damaged): its run does not count as finished."""


def write_whole(path: str, data: bytes) -> None:
    """``data`` at ``path``, never half: written under a temporary name beside it, then
    renamed (an object store shows an object only once its upload is complete)."""
    staging = f"{path}.{uuid.uuid4().hex}.tmp"
    with FileSystems.create(staging, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    FileSystems.rename([staging], [path])


def parse_success(data: bytes | str) -> dict[str, Any]:
    """The run report in a ``_SUCCESS``; raises ``CorruptSuccess`` saying what is wrong: not
    JSON, a required key missing, or a table not listed as files with their rows and bytes
    (``{"path", "rows", "bytes"}``, paths relative to the run). Reports of releases that listed
    bare paths are read with ``rows`` and ``bytes`` None, so the runs they published stay
    usable as a prior."""
    try:
        report = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptSuccess(f"not JSON ({type(e).__name__}: {e})") from None
    if not isinstance(report, dict):
        raise CorruptSuccess(f"not a JSON object but a {type(report).__name__}")
    missing = [k for k in SUCCESS_KEYS if k not in report]
    if missing:
        raise CorruptSuccess(f"no {', '.join(missing)}")
    tables = report["tables"]
    for name in schema.TABLES:
        if isinstance(tables, dict) and name not in tables and name in schema.TABLES_SINCE_4:
            tables[name] = []  # written by a release before the table existed
        files = tables.get(name) if isinstance(tables, dict) else None
        if not isinstance(files, list):
            raise CorruptSuccess(f"its tables.{name} is not a list of files")
        tables[name] = [_file_entry(f, name) for f in files]
    return report


def _file_entry(entry: Any, table: str) -> dict[str, Any]:
    if isinstance(entry, str):  # a release that recorded paths only
        entry = {"path": entry, "rows": None, "bytes": None}
    path = entry.get("path") if isinstance(entry, dict) else None
    if (
        not isinstance(path, str)
        or not path.startswith(table + "/")
        or ".." in path.split("/")
        or not all(
            type(entry.get(k)) is int and entry[k] >= 0 or entry.get(k) is None
            for k in ("rows", "bytes")
        )
    ):
        raise CorruptSuccess(f"its tables.{table} has an entry that is not a file of {table}/")
    return entry


def read_success(path: str) -> dict[str, Any]:
    """``parse_success`` of the file at ``path`` (I/O errors propagate; a local one that is
    not a regular file is a ``CorruptSuccess``)."""
    try:
        data = read_bytes(path)
    except NotAFile as e:
        raise CorruptSuccess(f"it is {e.kind}, not a file") from None
    return parse_success(data)


# ---------------------------------------------------------------------------------------------
# LATEST


class BadLatest(ValueError):
    """``LATEST`` exists but names no run; the message says what is wrong and how to mend it."""


def latest_problem(data: bytes) -> str | None:
    """What keeps ``data`` (the bytes of LATEST) from being one run id, or None when it is
    one: surrounding whitespace and a final newline are allowed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary content"
    if any(unicodedata.category(c) == "Cc" and c not in "\n\r\t" for c in text):
        return "binary content"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "empty"
    if len(lines) > 1:
        return f"{len(lines)} lines"
    if not is_run_id(lines[0].strip()):
        shown = lines[0].strip()
        shown = shown if len(shown) <= 60 else shown[:60] + "..."
        return f"{shown!r} is not a run id: run ids are {RUN_ID_RULE}"
    return None


def read_latest(output: str, *, alternative: str | None = None) -> str | None:
    """The run ``OUTPUT/LATEST`` names, or None when there is no LATEST (no run finished
    yet). Raises ``BadLatest`` for anything else: binary, empty or several lines, an invalid
    id, a folder, unreadable. ``alternative`` ends the message (what else the user may do,
    e.g. ``"pass --prior-manifest none"``)."""
    path = FileSystems.join(output, LATEST)
    try:
        exists = FileSystems.exists(path)
        problem = None
        if exists:
            data = read_bytes(path, _LATEST_MAX_BYTES + 1)
            problem = (
                f"over {_LATEST_MAX_BYTES} bytes"
                if len(data) > _LATEST_MAX_BYTES
                else latest_problem(data)
            )
        elif _is_folder(path):
            problem = "a folder"
    except NotAFile as e:
        problem = e.kind
    except IsADirectoryError:
        problem = "a folder"
    except Exception as e:  # permission, network: say so in one line, still how to mend
        raise BadLatest(
            f"{path} cannot be read ({type(e).__name__}: {stores.first_line(str(e))}); "
            + _mend(output, alternative)
        ) from None
    if problem is None:
        return data.decode("utf-8").strip() if exists else None
    raise BadLatest(f"{path} is not a run id ({problem}); {_mend(output, alternative)}")


def describe_latest(output: str) -> str:
    """What ``LATEST`` names, for a message: the run id, ``no run``, or what is wrong with
    it. Never raises."""
    try:
        return read_latest(output) or "no run"
    except BadLatest as e:
        return f"nothing readable ({e})"
    except Exception as e:
        return f"nothing readable ({type(e).__name__})"


def _is_folder(path: str) -> bool:
    """A folder (or, on an object store, a prefix with objects under it) where LATEST goes."""
    if stores.is_local(path):
        return os.path.isdir(path)
    try:
        return bool(FileSystems.match([path + "/**"], limits=[1])[0].metadata_list)
    except Exception:
        return False


def _mend(output: str, alternative: str | None) -> str:
    # Imported here: transforms.publish imports this module.
    from chunkmill.transforms.publish import finished_runs

    try:
        runs = finished_runs(output)
    except Exception:
        runs = []
    example = f", e.g. {runs[-1][1]}" if runs else ""
    hint = f"write the id of the last good run into it{example}"
    return f"{hint}, or {alternative}" if alternative else hint


# ---------------------------------------------------------------------------------------------
# Claims


@dataclass(frozen=True)
class Claim:
    """What ``_CLAIM`` records: the run, when it started, the prior it diffs against
    (``runs gc`` keeps that prior while the run is in flight) and the run ``LATEST`` named
    at its launch (``after``: the run it comes after, ``transforms.lineage``). Never
    pipeline options: they can carry credentials."""

    run_id: str
    started_at: str
    prior_run_id: str | None
    prior_manifest: str | None
    after: str | None = None
    # The process that launched it: on a local runner the one that runs it, on a remote
    # runner (Dataflow, Flink, Portable) the one that builds and submits its job. ``runs gc``
    # never deletes a run whose launching process is alive on its host.
    host: str | None = None
    pid: int | None = None

    def to_json(self) -> bytes:
        # host and pid only where known: a claim without them is as older releases wrote it.
        fields = {k: v for k, v in asdict(self).items() if v is not None or k not in _PROCESS}
        return (json.dumps(fields, indent=2, sort_keys=True) + "\n").encode("utf-8")

    def prior_run_under(self, output: str) -> str | None:
        """The run under ``output`` this claim diffs against: its prior run id, else the run
        folder its ``--prior-manifest`` path lies in, if that is under ``output``."""
        if self.prior_run_id:
            return self.prior_run_id
        root = FileSystems.join(output, RUNS) + "/"
        if self.prior_manifest and self.prior_manifest.startswith(root):
            candidate = self.prior_manifest[len(root) :].split("/", 1)[0]
            return candidate if is_run_id(candidate) else None
        return None


_PROCESS = ("host", "pid")


class RunTaken(Exception):
    """The run id is already claimed, or its folder already holds files."""


def claim_path(output: str, run_id: str) -> str:
    return FileSystems.join(run_dir(output, run_id), CLAIM)


def read_claim(output: str, run_id: str) -> Claim | None:
    """The claim of a run, or None when it has none or it cannot be read (a run of an older
    chunkmill, a claim being written, damage)."""
    try:
        raw = json.loads(read_bytes(claim_path(output, run_id), 64 * 1024))
        return Claim(
            run_id=str(raw["run_id"]),
            started_at=str(raw["started_at"]),
            prior_run_id=raw.get("prior_run_id"),
            prior_manifest=raw.get("prior_manifest"),
            after=raw.get("after"),
            host=raw.get("host"),
            pid=raw.get("pid") if type(raw.get("pid")) is int else None,
        )
    except Exception:
        return None


def process_alive(host: str | None, pid: int | None) -> bool:
    """Whether process ``pid`` of ``host`` is alive and a chunkmill process, as far as this
    machine can tell: False for another host or no pid (nothing known)."""
    import socket

    if host is None or pid is None or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"chunkmill" in f.read()
    except OSError:
        return True


def read_marker(output: str, run_id: str, marker: str) -> dict[str, Any]:
    """The JSON object of a run's ``REFUSED`` / ``INTERRUPTED`` marker ({} if unreadable)."""
    try:
        raw = json.loads(read_bytes(FileSystems.join(run_dir(output, run_id), marker), 64 * 1024))
    except Exception:
        return {}
    return raw if isinstance(raw, dict) else {}


def candidate_ids(run_id: str, *, exact: bool) -> list[str]:
    """The ids a launch tries in order: the one given, or for a default id also ``ID-2``,
    ``ID-3``, ... (deterministic, so two launches in one second get distinct, predictable
    ids)."""
    if exact:
        return [run_id]
    return [run_id] + [f"{run_id}-{n}" for n in range(2, MAX_SAME_SECOND_RUNS + 1)]


def claim_run(output: str, claim: Claim, *, exact: bool) -> Claim:
    """Takes a run folder for ``claim.run_id`` by creating its ``_CLAIM`` if absent, in one
    atomic request on local disk, GCS and S3 (``storage.create_if_absent``); returns the
    claim made, whose id differs from the one asked for only when ``exact`` is False and
    that one was taken. Raises ``RunTaken`` when no candidate id is free. A folder that
    already holds files (a run of an older chunkmill, without a claim) is taken too."""
    if not storage.creates_atomically(output):
        _log.warning(
            "%s cannot create an object only if it is absent in one request: two launches "
            "in the same instant could share a run folder; give each an explicit --run-id",
            storage.scheme(output) + "://",
        )
    for run_id in candidate_ids(claim.run_id, exact=exact):
        if _has_files(run_dir(output, run_id)):
            continue
        mine = dataclasses.replace(claim, run_id=run_id)
        if storage.create_if_absent(claim_path(output, run_id), mine.to_json()):
            return mine
    raise RunTaken(
        f"run {claim.run_id!r} already exists in {output}"
        if exact
        else f"{MAX_SAME_SECOND_RUNS} runs named {claim.run_id}[-N] already exist in {output}"
    )


def _has_files(folder: str) -> bool:
    try:
        return bool(FileSystems.match([folder + "/**"], limits=[1])[0].metadata_list)
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# How an unpublished run ended


def mark_ended(output: str, run_id: str, marker: str, why: str) -> None:
    """Writes ``marker`` (``REFUSED`` or ``INTERRUPTED``) into the run's folder: a small JSON
    object saying why, when, and which process (host and pid) wrote it."""
    import datetime as dt
    import socket

    record = {
        "run_id": run_id,
        "why": why,
        "at": dt.datetime.now(dt.timezone.utc).strftime(STARTED_AT_FORMAT),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    path = FileSystems.join(run_dir(output, run_id), marker)
    data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)


def mark_interrupted(output: str, run_id: str, signal_name: str = "a signal") -> str:
    """Marks an interrupted run (unless it already published its ``_SUCCESS``); returns
    what to tell the user, in a few words."""
    if FileSystems.exists(FileSystems.join(run_dir(output, run_id), SUCCESS)):
        return f"run {run_id} had finished; LATEST names {describe_latest(output)}"
    mark_ended(output, run_id, INTERRUPTED, f"interrupted by {signal_name}")
    return (
        f"run {run_id} published nothing (marked interrupted); "
        f"LATEST names {describe_latest(output)}"
    )


def ended_marker(output: str, run_id: str, names: frozenset[str] | None = None) -> str | None:
    """``REFUSED`` or ``INTERRUPTED`` when the run's folder holds that marker (``names``: the
    file names the caller already listed there), else None."""
    for marker in ENDED_MARKERS:
        if names is not None:
            if marker in names:
                return marker
        elif FileSystems.exists(FileSystems.join(run_dir(output, run_id), marker)):
            return marker
    return None
