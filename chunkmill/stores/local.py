"""Local disk: a pattern is walked from its root; only regular files are listed and opened,
symlinks are kept inside the input, and a claim is ``O_CREAT | O_EXCL``. Versions are size
and modification time."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from chunkmill.items import (
    Listed,
    ListingError,
    Skipped,
    SourceFiles,
)
from chunkmill.stores.base import (
    BAD_NAME,
    NOT_REGULAR,
    SYMLINK_OUTSIDE_INPUT,
    Glob,
    LinkTargetMissing,
    NotRegularFile,
    Rules,
    SourceVanished,
    SymlinkOutsideInput,
    WalkedStore,
    display_name,
    list_failed,
)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

_BAD_NAME_MESSAGE = "the file name is not valid UTF-8; rename it to list it"
# Files a batch of the walk holds at most: a folder of a million files leaves it in batches,
# so what takes them (the listing's hold, ``ListingHold``) stays bounded.
BATCH_FILES = 10_000

# A walked folder is opened and its files examined relative to it (``lstat`` of a name, not
# of a path the kernel resolves from the root again), where the platform allows. Python
# names ``os.stat`` in ``supports_dir_fd``, never ``os.lstat``, which is ``os.stat`` without
# following a symlink and takes ``dir_fd`` wherever ``os.stat`` does.
_AT_FOLDER = (
    os.scandir in os.supports_fd
    and os.stat in os.supports_dir_fd
    and os.stat in os.supports_follow_symlinks
)
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)

# O_NONBLOCK: opening a FIFO that slipped in after the listing returns at once instead of
# waiting for a writer (fstat then refuses it); regular files ignore the flag.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class LocalStore(WalkedStore):
    """Paths without a scheme. ``within`` (real folder paths): where a symlink met when
    reading may lead; None: symlinks are followed (the listing vetted them)."""

    atomic_create = True

    def __init__(self, within: tuple[str, ...] | None = None) -> None:
        self.within = within

    def is_folder(self, uri: str) -> bool:
        return os.path.isdir(uri)

    def walk(self, glob: Glob, rules: Rules) -> Iterator[Listed | SourceFiles]:
        """A walk from the pattern's root, matched by the glob, in sorted order (a folder's
        files, then its sub-folders one by one); a folder's listed files come as columns
        (``SourceFiles``), up to each object it skips or cannot record.

        Only regular files are listed: a FIFO, device or socket is ``Skipped`` (``lstat``,
        never opened). A symlink to a file is followed when its target lies under the
        pattern's root (or with ``rules.follow_symlinks``), else skipped; a symlink whose
        target is missing is listed (its read fails with ``link_target_missing`` and its prior
        rows are kept); folders behind symlinks are not descended, nor is a folder under the
        run's output. A folder that cannot be listed is a ``ListingError``; a file that cannot
        be examined is listed, so its read says why and nothing is removed.
        """
        root = glob.root
        real_root = os.path.realpath(root or ".").rstrip("/") + "/"
        if not glob.wildcard:
            folder, _, name = glob.pattern.rpartition("/")
            prefix = folder + "/" if folder or glob.pattern.startswith("/") else ""
            if not _under_output(prefix, rules):
                yield from _files(prefix, [name], None, real_root, len(root), rules)
            return
        match = glob.regex.fullmatch
        everything = glob.pattern == root + "**"  # every file under the root: none to match
        todo = [root.rstrip("/") or "/"]
        while todo:
            folder = todo.pop()
            prefix = _as_folder(folder)
            if _under_output(prefix, rules):
                continue  # nothing under the output is listed, by path or by real path
            try:
                fd, names, folders = _read_folder(folder)
            except OSError as e:
                yield list_failed(folder, e)
                continue
            if not everything:
                names = [name for name in names if match(prefix + name)]
            try:
                yield from _files(prefix, names, fd, real_root, len(root), rules)
            finally:
                if fd is not None:
                    os.close(fd)
            todo.extend(prefix + name for name in reversed(folders))

    def read(self, uri: str, version: str | None, max_bytes: int | None) -> bytes:
        """A local file's bytes: only a regular file is read (checked on the opened
        descriptor, so nothing swapped in after the check is read), at most ``max_bytes + 1``
        of them. ``LinkTargetMissing`` for a dangling symlink, ``NotRegularFile`` for anything
        but a file, ``SymlinkOutsideInput`` for a symlink leading out of ``within``."""
        try:
            fd = self._open(uri)
        except FileNotFoundError:
            if os.path.islink(uri):
                raise LinkTargetMissing(
                    f"{display_name(uri)} is a symlink to {display_name(os.readlink(uri))}, "
                    "which does not exist"
                ) from None
            raise SourceVanished(f"{display_name(uri)} no longer exists") from None
        except OSError as e:
            if e.errno == errno.ENXIO:  # a FIFO without a reader opened for writing; a socket
                raise NotRegularFile(f"{display_name(uri)} is not a regular file") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFile(f"{display_name(uri)} is not a regular file")
            return _read_all(fd, st.st_size, None if max_bytes is None else max_bytes + 1)
        finally:
            os.close(fd)

    def _open(self, path: str) -> int:
        """A descriptor of ``path`` opened for reading. Without ``within`` symlinks are
        followed. With it, the last component is opened with O_NOFOLLOW; a symlink there is
        resolved and opened only when its target lies under one of ``within``."""
        if self.within is None:
            return os.open(path, _OPEN_FLAGS)
        try:
            return os.open(path, _OPEN_FLAGS | _NOFOLLOW)
        except OSError as e:
            if e.errno != errno.ELOOP or not os.path.islink(path):
                raise
        real = os.path.realpath(path)
        if not any(real.startswith(root.rstrip("/") + "/") for root in self.within):
            raise SymlinkOutsideInput(
                f"{display_name(path)} is a symlink to {display_name(real)}, outside the input"
            )
        return os.open(real, _OPEN_FLAGS | _NOFOLLOW)

    def create_if_absent(self, uri: str, data: bytes) -> bool:
        os.makedirs(os.path.dirname(uri), exist_ok=True)
        try:
            fd = os.open(uri, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True


def _read_all(fd: int, size: int, limit: int | None) -> bytes:
    """The bytes of the open file ``fd`` to its end, at most ``limit`` of them. ``size`` (its
    size when opened) sizes the first read, so a file read whole takes one read and the
    empty one that finds its end; a file that grew since is read on in 1 MB steps."""
    chunks, got, want = [], 0, size + 1
    while limit is None or got < limit:
        chunk = os.read(fd, want if limit is None else min(want, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        want = 1 << 20
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _as_folder(path: str) -> str:
    """``path`` with one trailing "/": the prefix of every path under it."""
    return path.rstrip("/") + "/"


def _read_folder(folder: str) -> tuple[int | None, list[str], list[str]]:
    """``folder`` opened (None where its files are examined by path), the names of what in
    it is not a folder (files, symlinks to files, FIFOs...; an entry that cannot be examined
    is taken for a file, as ``os.walk`` takes it) and of its folders (a symlink to a folder
    is neither: folders behind symlinks are not descended), each sorted."""
    fd = os.open(folder, _FOLDER_FLAGS) if _AT_FOLDER else None
    files: list[str] = []
    folders: list[str] = []
    try:
        with os.scandir(folder if fd is None else fd) as found:
            for entry in found:
                try:
                    is_folder = entry.is_dir()  # a folder, or a symlink to one
                except OSError:
                    is_folder = False
                if not is_folder:
                    files.append(entry.name)
                elif not entry.is_symlink():
                    folders.append(entry.name)
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    files.sort()
    folders.sort()
    return fd, files, folders


def _under_output(prefix: str, rules: Rules) -> bool:
    """Whether the folder whose paths start with ``prefix`` lies under the output, by path
    or by real path: then so does every file in it (an output path ends in "/"), and a file
    outside it is outside the output, but for a symlink leading there."""
    return rules.in_output(prefix) or rules.in_output(_as_folder(os.path.realpath(prefix or ".")))


def _files(
    prefix: str,
    names: list[str],
    fd: int | None,
    real_root: str,
    root_length: int,
    rules: Rules,
) -> Iterator[Listed | SourceFiles]:
    """What the listing says of the files ``names`` of one folder outside the output (the
    paths ``prefix + name``; ``fd``: the folder opened, or None to examine them by path),
    judged relative to their pattern's root (the first ``root_length`` characters of a
    path): the files listed as columns (``BATCH_FILES`` at most a batch), each object
    skipped or not recordable on its own, in the order of ``names``. A file gone since the
    folder was read is not listed, nor is a symlink to a folder."""
    asides = _asides(prefix, names, root_length, rules)
    lstat, is_file = os.lstat, stat.S_ISREG
    uris: list[str] = []
    sizes: list[int] = []
    mtimes: list[float] = []
    # Runs of names to examine, each ended by a name set aside, a batch's end or the last.
    stops = sorted({*asides, *range(BATCH_FILES, len(names), BATCH_FILES), len(names)})
    start = 0
    for stop in stops:
        for name in names[start:stop]:
            try:
                st = lstat(name if fd is not None else prefix + name, dir_fd=fd)
            except FileNotFoundError:  # gone since the folder was read
                continue
            except OSError:
                st = None
            if st is not None and is_file(st.st_mode):
                uris.append(prefix + name)
                sizes.append(st.st_size)
                mtimes.append(st.st_mtime)
                continue
            found = _not_a_file(prefix + name, st, real_root, rules)
            if isinstance(found, Skipped):
                if uris:
                    yield SourceFiles(uris, sizes, mtimes)
                    uris, sizes, mtimes = [], [], []
                yield found
            elif found is not None:
                uris.append(prefix + name)
                sizes.append(found[0])
                mtimes.append(found[1])
        if uris:
            yield SourceFiles(uris, sizes, mtimes)
            uris, sizes, mtimes = [], [], []
        reason = asides.get(stop)
        if reason is not None:
            yield _aside(prefix + names[stop], reason)
        start = stop + (reason is not None)


def _asides(prefix: str, names: list[str], root_length: int, rules: Rules) -> dict[int, str]:
    """Why the listing does not examine some of the files ``names``, by their place: the
    reasons ``rules`` skip them for, then ``BAD_NAME`` for a name in bytes that are not
    UTF-8 (it cannot be recorded). A folder's names are screened at once, and checked one by
    one only when they are not all ASCII. Only the reasons are held, not what the listing
    says of each (``_aside``): a folder of a million images holds no million objects."""
    asides = rules.screen_folder(prefix[root_length:], names)
    if not (prefix.isascii() and "".join(names).isascii()):
        for i, name in enumerate(names):
            path = prefix + name
            if i not in asides and display_name(path) != path:
                asides[i] = BAD_NAME
    return asides


def _aside(path: str, reason: str) -> Skipped | ListingError:
    """What the listing says of ``path``, set aside for ``reason`` (``_asides``)."""
    if reason == BAD_NAME:
        return ListingError(display_name(path), BAD_NAME, _BAD_NAME_MESSAGE)
    return Skipped(display_name(path), reason)


def _not_a_file(
    path: str, st: os.stat_result | None, real_root: str, rules: Rules
) -> Skipped | tuple[int, float] | None:
    """What the listing says of ``path``, whose ``lstat`` is ``st`` (None: it could not be
    examined, so it is listed and its read says why), when it is not a regular file: a
    symlink judged by where it leads, anything else skipped. A file to list is its size and
    modification time (0 and 0.0 when unknown: no version)."""
    if st is None:
        return 0, 0.0
    if not stat.S_ISLNK(st.st_mode):
        return Skipped(path, NOT_REGULAR)  # a folder (a pattern naming one), FIFO, device
    real = os.path.realpath(path)
    try:
        st = os.stat(path)
    except OSError:  # dangling (or unreadable): the read says which
        return 0, 0.0
    if stat.S_ISDIR(st.st_mode):
        return None  # folders behind symlinks are not descended
    if not rules.follow_symlinks and not real.startswith(real_root):
        return Skipped(path, SYMLINK_OUTSIDE_INPUT)
    if rules.in_output(real):
        return None
    if not stat.S_ISREG(st.st_mode):
        return Skipped(path, NOT_REGULAR)
    return st.st_size, st.st_mtime
