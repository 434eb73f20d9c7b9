"""Listing and reading documents across stores: local disk, GCS, S3 and any fsspec protocol.

Each store reports a version of an object from its listing alone (a GCS generation, an S3
ETag and size, else size and modification time), and a read is pinned to it where the store
allows. A listing yields ``SourceFile`` (to read), ``Skipped`` (left out on purpose) and
``ListingError`` (a folder that could not be listed), and never raises for one bad folder or
name. The rules per store, the globs and the sharding: the "Listing and reading" section of
docs/design.md.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from chunkmill import stores
from chunkmill.items import Listed, ListingError, Skipped, SourceFile, SourceVersion, source_version
from chunkmill.stores import (
    LinkTargetMissing,
    NotRegularFile,
    ObjectStore,
    SourceChanged,
    SourceTooLarge,
    SourceVanished,
    first_line,
)

GCS = "gs"
S3 = "s3"
# Schemes left to Beam's own FileSystems (besides local paths): listing gives size+mtime.
_BEAM_SCHEMES = frozenset({"hdfs", "azfs"})
_GLOB_CHARS = "*?["
# Schemes whose URLs carry a query: a "?" there starts it, and is never a wildcard.
_LITERAL_QUERY_SCHEMES = frozenset({"http", "https"})


# errors/ reason codes of the read stage.
VANISHED = "vanished"  # listed, then deleted before it was read
CHANGED = "changed"  # listed, then overwritten before it was read; read again next run
LINK_TARGET_MISSING = "link_target_missing"  # a symlink whose target does not exist (now)
NOT_REGULAR = "not_regular_file"  # a FIFO, device or socket where a file was listed
TOO_LARGE = "too_large"  # more bytes than --max-document-bytes

# errors/ reason codes of the list stage.
LIST_FAILED = "list_failed"  # a folder or prefix could not be listed: its documents are kept
BAD_NAME = "bad_name"  # a local file name that is not valid UTF-8: it cannot be recorded

# Skipped reasons: found by the listing, left out on purpose, never read (not failures).
UNSUPPORTED_FORMAT = "unsupported_format"  # see NOT_TEXT
EXCLUDED = "excluded"  # matched an --exclude pattern
SYMLINK_OUTSIDE_INPUT = "symlink_outside_input"  # see ListingRules.follow_symlinks
# NOT_REGULAR as a skip reason too: a FIFO, device or socket seen by the listing is never
# opened (reading a FIFO blocks until a writer comes, a device may never end).


def _extensions(names: str) -> frozenset[str]:
    return frozenset(names.split())


# Formats chunkmill cannot turn into text, by extension (lower case, with the dot). They are
# left out at listing, counted as skipped, never read: a PNG would otherwise be a "binary"
# failure every night, and an SVG would be chunked as XML markup and embedded. An --include
# pattern that matches such a file brings it back (it then goes through extraction).
NOT_TEXT: dict[str, tuple[str, frozenset[str]]] = {
    "image": (
        "pixels, or vector drawings whose text is drawing markup (SVG), not prose",
        _extensions(
            ".png .jpg .jpeg .gif .bmp .tif .tiff .webp .ico .icns .heic .heif .avif .psd "
            ".svg .svgz .eps .ai .raw .cr2 .nef .dng .xcf"
        ),
    ),
    "audio": (
        "sound: no text without speech recognition",
        _extensions(".mp3 .wav .flac .ogg .oga .opus .m4a .aac .wma .aiff .mid .midi"),
    ),
    "video": (
        "moving pictures: no text without transcription",
        _extensions(".mp4 .m4v .mov .avi .mkv .webm .wmv .flv .mpg .mpeg .3gp"),
    ),
    "archive": (
        "compressed containers: their members are not listed, the container is not text",
        _extensions(
            ".zip .tar .gz .tgz .bz2 .tbz2 .xz .txz .zst .7z .rar .lz .lz4 .lzma .cab .jar "
            ".war .whl .egg .deb .rpm .dmg .iso .apk"
        ),
    ),
    "font": (
        "glyph outlines",
        _extensions(".ttf .otf .woff .woff2 .eot .pfb"),
    ),
    "binary": (
        "machine code, compiled objects and binary data files",
        _extensions(
            ".exe .dll .so .dylib .a .o .obj .lib .bin .class .pyc .pyo .wasm .elf "
            ".parquet .avro .orc .arrow .feather .npy .npz .pkl .pickle .h5 .hdf5 .db "
            ".sqlite .sqlite3 .onnx .pt .pth .safetensors .ckpt"
        ),
    ),
}
_NOT_TEXT_EXTENSIONS = frozenset().union(*(exts for _, exts in NOT_TEXT.values()))


def is_not_text(name: str) -> bool:
    """Whether the extension of ``name`` is one of ``NOT_TEXT``'s."""
    base = name.rsplit("/", 1)[-1].lower()
    dot = base.rfind(".")
    return dot > 0 and base[dot:] in _NOT_TEXT_EXTENSIONS


@dataclass(frozen=True)
class Shard:
    """One unit of listing work: the objects under ``prefix`` (all of them when
    ``recursive``, else only those directly under it) that match ``pattern``."""

    pattern: str
    prefix: str | None = None  # None: list the pattern as a whole (local disk, fsspec)
    recursive: bool = True
    billing_project: str | None = None  # requester-pays buckets: the project billed


def scheme(uri: str) -> str:
    """``gs``, ``s3``, ... or ``""`` for a local path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else ""


def kind(uri: str) -> str:
    """How ``uri`` is listed and read: ``object`` (a bucket store of ``chunkmill.stores``:
    GCS, S3), ``beam`` (local disk and the other stores Beam's FileSystems own) or
    ``fsspec`` (any other protocol)."""
    s = scheme(uri)
    if s in stores.schemes():
        return "object"
    if s in ("", "file") or s in _BEAM_SCHEMES:
        return "beam"
    return "fsspec"


def object_store(uri: str, billing_project: str | None = None) -> ObjectStore:
    """The store of an ``object`` URI."""
    if scheme(uri) == GCS:
        # Beam's GcsIO in this (worker) process, which writes the tables, connects to an
        # emulator anonymously too.
        use_anonymous_gcs_for_emulator()
    return stores.object_store(scheme(uri), billing_project)


def split_bucket(uri: str) -> tuple[str, str]:
    """``gs://bucket/key`` → ``("bucket", "key")``."""
    rest = uri.partition("://")[2]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    return bucket, key


def bucket_url(uri: str) -> str:
    return f"{scheme(uri)}://{split_bucket(uri)[0]}"


def _glob_end(pattern: str) -> int:
    """Where the part of ``pattern`` that may hold wildcards ends: an http(s) URL's query and
    fragment are literal (a presigned URL's ``?X-Amz-Signature=...`` names one object), so
    for such a URL its path's end; else the pattern's end."""
    if scheme(pattern) in _LITERAL_QUERY_SCHEMES:
        ends = [i for i in (pattern.find("?"), pattern.find("#")) if i >= 0]
        return min(ends, default=len(pattern))
    return len(pattern)


def fixed_prefix(key_pattern: str) -> str:
    """The part of a key pattern before its first glob character."""
    globbed = key_pattern[: _glob_end(key_pattern)]
    cut = min((i for i in (globbed.find(c) for c in _GLOB_CHARS) if i >= 0), default=None)
    return key_pattern if cut is None else key_pattern[:cut]


def has_glob(pattern: str) -> bool:
    return any(c in pattern[: _glob_end(pattern)] for c in _GLOB_CHARS)


def pattern_root(pattern: str) -> str:
    """The folder a pattern lists from: its fixed prefix up to the last ``/`` (with it),
    never inside an http(s) URL's query. Symlinks must stay under it, and
    --include/--exclude match paths relative to it."""
    fixed = fixed_prefix(pattern)[: _glob_end(pattern)]
    return pattern[: fixed.rfind("/") + 1]


def glob_regex(pattern: str) -> str:
    """A glob as a regular expression (for ``re.fullmatch``), as a shell with ``globstar``
    reads it, on every store and for --include/--exclude alike:

    * ``**`` as a whole path component matches zero or more folders (``a/**/b.md`` matches
      ``a/b.md`` and ``a/x/y/b.md``); a trailing ``/**`` everything under the folder;
    * ``**`` inside a name (``docs/**.md``) matches any characters, ``/`` included;
    * ``*`` any characters but ``/``; ``?`` one character but ``/``;
    * ``[abc]``, ``[a-z]``, ``[!abc]`` (or ``[^abc]``) one character of (not of) a set,
      never ``/``; a ``[`` without its ``]`` is itself.

    Names starting with a dot are matched like any other (a shell skips them by default).
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            whole = i == 0 or pattern[i - 1] == "/"
            i += 2
            if whole and pattern.startswith("/", i):
                out.append("(?:[^/]*/)*")  # zero or more folders
                i += 1
            else:
                out.append("(?s:.*)")  # a newline in a name is a character like any other
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":  # "]" first is a member of the set
                j += 1
            close = pattern.find("]", j)
            if close < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : close]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            body = body.replace("]", "\\]")
            out.append(f"[^/{body}]" if negate else f"(?!/)[{body}]")
            i = close + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _matcher(key_pattern: str) -> re.Pattern[str]:
    return re.compile(glob_regex(key_pattern))


def folder_pattern(pattern: str) -> str:
    """A pattern naming a folder means everything under it: ``book/`` (any store) and a local
    folder ``book`` become ``book/**``; any other pattern is returned as it is."""
    if pattern.endswith("/"):
        return pattern + "**"
    local = kind(pattern) == "beam" and scheme(pattern) == ""
    if local and not has_glob(pattern) and os.path.isdir(pattern):
        return pattern + "/**"
    return pattern


@dataclass(frozen=True)
class ListingRules:
    """What the listing leaves out, besides what the pattern does not match.

    A path is judged relative to its pattern's root (``pattern_root``): it is left out
    (``Skipped``, reason ``excluded``) when it matches an ``exclude`` glob; else listed when it
    matches an ``include`` glob; else left out (``unsupported_format``) when its extension is
    in ``NOT_TEXT``; else listed. So --include brings back a format skipped by default and
    never narrows the listing (the input pattern does that), and --exclude wins over it.

    ``follow_symlinks``: a local symlink whose target lies outside its pattern's root is
    listed (read through the link) instead of skipped (``symlink_outside_input``).
    ``output``: the run's output prefix; nothing under it is listed, by path or, on local
    disk, by real path (so a symlink inside the input that leads into it changes nothing).
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    follow_symlinks: bool = False
    output: str | None = None
    _include: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _exclude: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _output: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("include", "exclude"):
            patterns = getattr(self, name)
            if isinstance(patterns, str):
                raise ValueError(f"{name} must be a sequence of globs, not one string")
            compiled = []
            for p in patterns:
                if not p or p.startswith("/") or "://" in p:
                    raise ValueError(
                        f"{name} glob {p!r} must be a path relative to the input's folder"
                    )
                compiled.append(re.compile(glob_regex(p)))
            object.__setattr__(self, f"_{name}", tuple(compiled))
        prefixes: list[str] = []
        if self.output:
            prefixes.append(self.output.rstrip("/") + "/")
            if scheme(self.output) == "":
                prefixes.append(os.path.realpath(self.output).rstrip("/") + "/")
        object.__setattr__(self, "_output", tuple(dict.fromkeys(prefixes)))

    def screen(self, relative: str) -> str | None:
        """The reason to skip a path (relative to its pattern's root), or None to list it."""
        if any(r.fullmatch(relative) for r in self._exclude):
            return EXCLUDED
        if any(r.fullmatch(relative) for r in self._include):
            return None
        if is_not_text(relative):
            return UNSUPPORTED_FORMAT
        return None

    def in_output(self, path: str) -> bool:
        return any(path.startswith(p) for p in self._output)


DEFAULT_RULES = ListingRules()


def is_directory_marker(name: str) -> bool:
    return name.endswith("/")


# ---------------------------------------------------------------------------------------------
# Clients: one per process and setting, made on first use (workers never unpickle one).


def use_anonymous_gcs_for_emulator() -> None:
    """With ``STORAGE_EMULATOR_HOST`` set, make Beam's GcsIO connect anonymously too.

    Beam otherwise probes for Google credentials (with retries, ~20 s per process) before its
    first GCS call, which an emulator does not need. Beam caches the outcome of that probe;
    this fills the cache with "no credentials", which makes GcsIO use an anonymous client.
    Does nothing without an emulator.
    """
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return
    from apache_beam.internal.gcp import auth

    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials = None
        auth._Credentials._credentials_init = True


# ---------------------------------------------------------------------------------------------
# Listing


def plan(
    pattern: str, billing_project: str | None = None, rules: ListingRules = DEFAULT_RULES
) -> Iterator[Shard | Listed]:
    """Splits the listing of ``pattern`` into work that can be done in parallel.

    For an object store, one delimiter listing of the pattern's fixed prefix gives the
    objects directly under it (yielded already listed and judged by ``rules``) and its
    sub-prefixes (yielded as one ``Shard`` each, when the pattern can match below them).
    Elsewhere the pattern is one shard. ``list_shard`` turns each item into listed objects.
    A pattern naming a folder means everything under it (``folder_pattern``); an object-store
    key without a wildcard names that object or, if it is a folder, everything under it.
    A listing that fails is a ``ListingError`` naming the prefix, never an exception.
    """
    pattern = folder_pattern(pattern)
    if kind(pattern) != "object":
        yield Shard(pattern, billing_project=billing_project)
        return
    bucket, key = split_bucket(pattern)
    prefix = fixed_prefix(key)
    if prefix == key:  # no glob: one object, or a folder of them
        yield Shard(pattern, prefix, recursive=False, billing_project=billing_project)
        yield Shard(pattern + "/**", prefix + "/", True, billing_project)
        return
    # What follows the last "/" of the fixed part decides whether anything deeper can match.
    rest = key[prefix.rfind("/") + 1 :]
    descend = "/" in rest or "**" in rest  # e.g. not docs/*.md: nothing below can match
    match = _matcher(key).fullmatch
    store = object_store(pattern, billing_project)
    root = pattern_root(pattern)
    found: list[SourceFile] = []
    try:
        # The delimiter listing groups names under the fixed prefix by their next "/".
        for entry in store.list_level(bucket, prefix):
            if isinstance(entry, str):
                if descend:
                    yield Shard(pattern, entry, True, billing_project)
            elif not is_directory_marker(entry[0]) and match(entry[0]):
                name, size, version = entry
                found.append(SourceFile(f"{scheme(pattern)}://{bucket}/{name}", size, version))
    except Exception as e:
        yield _list_failed(f"{scheme(pattern)}://{bucket}/{prefix[: prefix.rfind('/') + 1]}", e)
    yield from _screened(found, root, rules)


def list_shard(item: Shard | Listed, rules: ListingRules = DEFAULT_RULES) -> Iterator[Listed]:
    """The objects of one shard that match its pattern, with their listing versions, judged
    by ``rules`` (``Skipped`` when left out); what ``plan`` already listed passes through. A
    shard whose listing fails, in full or part way, yields a ``ListingError`` naming it after
    whatever it listed."""
    if not isinstance(item, Shard):
        yield item
        return
    shard = item
    k = kind(shard.pattern)
    if k == "beam":
        yield from _list_beam(shard.pattern, rules)
        return
    if k == "fsspec":
        yield from _list_fsspec(shard.pattern, rules)
        return
    bucket, key = split_bucket(shard.pattern)
    match = _matcher(key).fullmatch
    prefix = shard.prefix or ""
    store = object_store(shard.pattern, shard.billing_project)
    found: list[SourceFile] = []
    try:
        for name, size, version in store.list_prefix(bucket, prefix, shard.recursive):
            if not is_directory_marker(name) and match(name):
                found.append(
                    SourceFile(f"{scheme(shard.pattern)}://{bucket}/{name}", size, version)
                )
    except Exception as e:
        yield _list_failed(f"{scheme(shard.pattern)}://{bucket}/{prefix}", e)
    yield from _screened(found, pattern_root(shard.pattern), rules)


def _screened(
    files: Iterable[SourceFile], root: str, rules: ListingRules
) -> Iterator[SourceFile | Skipped]:
    for f in files:
        if rules.in_output(f.uri):
            continue
        reason = rules.screen(f.uri[len(root) :])
        yield f if reason is None else Skipped(f.uri, reason)


def _list_failed(prefix: str, e: BaseException) -> ListingError:
    detail = first_line(str(e))
    return ListingError(display_name(prefix), LIST_FAILED, f"{type(e).__name__}: {detail}"[:1000])


def has_match(pattern: str, billing_project: str | None = None) -> bool:
    """Whether ``pattern`` matches at least one object, a skipped one included (stops at the
    first)."""
    if kind(pattern) == "beam" and scheme(pattern) != "":
        try:
            return bool(FileSystems.match([pattern], limits=[1])[0].metadata_list)
        except Exception:  # Beam raises for a pattern whose directory does not exist
            return False
    return any(
        isinstance(listed, SourceFile | Skipped)
        for item in plan(pattern, billing_project)
        for listed in list_shard(item)
    )


def _list_beam(pattern: str, rules: ListingRules) -> Iterator[Listed]:
    if scheme(pattern) == "":
        yield from _list_local(pattern, rules)
        return
    try:
        results = FileSystems.match([pattern])
    except Exception as e:
        yield _list_failed(pattern_root(pattern), e)
        return
    found = []
    for result in results:
        for m in result.metadata_list:
            size = int(m.size_in_bytes)
            found.append(SourceFile(m.path, size, source_version(size, m.last_updated_in_seconds)))
    yield from _screened(found, pattern_root(pattern), rules)


def local_roots(patterns: Iterable[str]) -> tuple[str, ...]:
    """The real folders local ``patterns`` list from (``pattern_root``): where a symlink met
    when reading may lead (``ObjectReader(within=...)``)."""
    roots = []
    for p in patterns:
        p = folder_pattern(p)
        if kind(p) == "beam" and scheme(p) == "":
            roots.append(os.path.realpath(pattern_root(p) or "."))
    return tuple(sorted(set(roots)))


def display_name(path: str) -> str:
    """``path`` as valid UTF-8 text: bytes a local file name holds that are not UTF-8 (which
    ``os`` hands over as lone surrogates, and Arrow refuses) shown as ``\\xNN``."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")


def _list_local(pattern: str, rules: ListingRules) -> Iterator[Listed]:
    """A local glob: a walk from the pattern's root, matched by ``glob_regex``.

    Only regular files are listed: a FIFO, device or socket is ``Skipped`` (``lstat``, never
    opened). A symlink to a file is followed when its target lies under the pattern's root
    (or with ``rules.follow_symlinks``), else skipped; a symlink whose target is missing is
    listed (its read fails with ``link_target_missing`` and its prior rows are kept); folders
    behind symlinks are not descended. A folder that cannot be listed is a ``ListingError``;
    a file that cannot be examined is listed, so its read says why and nothing is removed.
    """
    root = pattern_root(pattern)
    real_root = os.path.realpath(root or ".").rstrip("/") + "/"
    if not has_glob(pattern):
        real_dir = os.path.realpath(os.path.dirname(pattern) or ".")
        yield from _local_entry(pattern, real_dir, real_root, root, rules)
        return
    match = re.compile(glob_regex(pattern)).fullmatch
    failed: list[OSError] = []
    for dirpath, dirnames, names in os.walk(root.rstrip("/") or "/", onerror=failed.append):
        yield from _walk_failures(failed)
        dirnames.sort()
        real_dir = os.path.realpath(dirpath)
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if match(path):
                yield from _local_entry(path, real_dir, real_root, root, rules)
    yield from _walk_failures(failed)


def _walk_failures(failed: list[OSError]) -> Iterator[ListingError]:
    for e in failed:
        yield _list_failed(str(e.filename), e)
    failed.clear()


def _local_entry(
    path: str, real_dir: str, real_root: str, root: str, rules: ListingRules
) -> Iterator[Listed]:
    if rules.in_output(path):
        return
    shown = display_name(path)
    reason = rules.screen(path[len(root) :])
    if reason is not None:
        yield Skipped(shown, reason)
        return
    if shown != path:
        yield ListingError(
            shown, BAD_NAME, "the file name is not valid UTF-8; rename it to list it"
        )
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:  # gone since the walk saw it
        return
    except OSError:
        yield SourceFile(path, 0, None)
        return
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        try:
            st = os.stat(path)
        except OSError:  # dangling (or unreadable): the read says which
            yield SourceFile(path, 0, None)
            return
        if stat.S_ISDIR(st.st_mode):
            return  # folders behind symlinks are not descended
        if not rules.follow_symlinks and not real.startswith(real_root):
            yield Skipped(path, SYMLINK_OUTSIDE_INPUT)
            return
    else:
        real = os.path.join(real_dir, os.path.basename(path))
    if rules.in_output(real):
        return
    if not stat.S_ISREG(st.st_mode):
        yield Skipped(path, NOT_REGULAR)
        return
    yield SourceFile(path, st.st_size, source_version(st.st_size, st.st_mtime))


def _fsspec_fs(uri: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(uri)


def fsspec_version(info: dict[str, Any]) -> str | None:
    """The best version an fsspec listing entry offers: generation, else ETag and size, else
    size and modification time; None when it has none of them."""
    size = int(info.get("size") or 0)
    if info.get("generation"):
        return str(SourceVersion.gcs(info["generation"]))
    etag = info.get("ETag") or info.get("etag")
    if etag:
        return str(SourceVersion.s3(str(etag), size))
    mtime: Any = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
    if hasattr(mtime, "timestamp"):  # a datetime (s3fs, adlfs)
        mtime = mtime.timestamp()
    if isinstance(mtime, int | float):
        return source_version(size, float(mtime))
    return None


def _list_fsspec(pattern: str, rules: ListingRules) -> Iterator[Listed]:
    """An fsspec glob: a recursive listing of the pattern's root, matched by ``glob_regex``
    (fsspec's own glob reads ``**`` its own way)."""
    try:
        fs, path = _fsspec_fs(pattern)
        if not has_glob(path) and fs.isdir(path):
            path = path.rstrip("/") + "/**"
        if has_glob(path):
            match = re.compile(glob_regex(path)).fullmatch
            base = pattern_root(path).rstrip("/")
            found = {n: i for n, i in fs.find(base, detail=True).items() if match(n)}
        else:
            found = {path: fs.info(path)} if fs.exists(path) else {}
    except Exception as e:
        yield _list_failed(pattern_root(pattern), e)
        return
    files = []
    for name, info in sorted(found.items()):
        if info.get("type", "file") != "file" or is_directory_marker(name):
            continue
        size = int(info.get("size") or 0)
        files.append(SourceFile(fs.unstrip_protocol(name), size, fsspec_version(info)))
    yield from _screened(files, fs.unstrip_protocol(pattern_root(path)), rules)


# ---------------------------------------------------------------------------------------------
# Reading


def read_object(
    uri: str,
    version: str | None = None,
    *,
    billing_project: str | None = None,
    max_bytes: int | None = None,
    within: tuple[str, ...] | None = None,
) -> bytes:
    """All bytes of the object at ``uri``, as of the listed ``version`` where the store can pin
    it (see the module docstring).

    Raises ``SourceVanished`` when the object is gone and ``SourceChanged`` when it is no
    longer the listed version; ``SourceTooLarge`` when it holds more than ``max_bytes`` (at
    most ``max_bytes + 1`` are read, whatever the listing said); a local path also raises
    ``LinkTargetMissing`` (a dangling symlink) and ``NotRegularFile`` (never read), and, given
    ``within`` (real folder paths), ``SymlinkOutsideInput`` for a symlink whose target is
    under none of them (checked again at read time: a link swapped after the listing); other
    errors (permission, network after retries) propagate. Compression is never inferred from
    the name: a ``.gz`` document is bytes to extract.
    """
    k = kind(uri)
    if k == "object":
        bucket, key = split_bucket(uri)
        data = object_store(uri, billing_project).read(bucket, key, version, max_bytes)
    elif k == "fsspec":
        data = _read_fsspec(uri, version, max_bytes)
    elif scheme(uri) == "":
        data = _read_local(uri, max_bytes, within)
    else:
        try:
            with FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                data = f.read() if max_bytes is None else f.read(max_bytes + 1)
        except Exception:
            if not FileSystems.exists(uri):
                raise SourceVanished(f"{uri} no longer exists") from None
            raise
    if max_bytes is not None and len(data) > max_bytes:
        raise SourceTooLarge(
            f"more than {max_bytes} bytes, over the --max-document-bytes limit "
            "(the listing said less)"
        )
    return data


class SymlinkOutsideInput(OSError):
    """A symlink whose target lies outside the input, met when reading."""


def _open_local(path: str, within: tuple[str, ...] | None) -> int:
    """A descriptor of ``path`` opened for reading. Without ``within`` symlinks are followed
    (the listing vetted them). With it, the last component is opened with O_NOFOLLOW; a
    symlink there is resolved and opened only when its target lies under one of ``within``."""
    if within is None:
        return os.open(path, _OPEN_FLAGS)
    try:
        return os.open(path, _OPEN_FLAGS | _NOFOLLOW)
    except OSError as e:
        if e.errno != errno.ELOOP or not os.path.islink(path):
            raise
    real = os.path.realpath(path)
    if not any(real.startswith(root.rstrip("/") + "/") for root in within):
        raise SymlinkOutsideInput(
            f"{display_name(path)} is a symlink to {display_name(real)}, outside the input"
        )
    return os.open(real, _OPEN_FLAGS | _NOFOLLOW)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

# O_NONBLOCK: opening a FIFO that slipped in after the listing returns at once instead of
# waiting for a writer (fstat then refuses it); regular files ignore the flag.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_local(path: str, max_bytes: int | None, within: tuple[str, ...] | None) -> bytes:
    """A local file's bytes: only a regular file is read (checked on the opened descriptor,
    so nothing swapped in after the check is read), at most ``max_bytes + 1`` of them."""
    try:
        fd = _open_local(path, within)
    except FileNotFoundError:
        if os.path.islink(path):
            raise LinkTargetMissing(
                f"{display_name(path)} is a symlink to {display_name(os.readlink(path))}, "
                "which does not exist"
            ) from None
        raise SourceVanished(f"{display_name(path)} no longer exists") from None
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO without a reader opened for writing; or a socket
            raise NotRegularFile(f"{display_name(path)} is not a regular file") from None
        raise
    with os.fdopen(fd, "rb", buffering=0) as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{display_name(path)} is not a regular file") from None
        limit = -1 if max_bytes is None else max_bytes + 1
        chunks, got = [], 0
        while limit < 0 or got < limit:
            chunk = f.read(1 << 20 if limit < 0 else min(1 << 20, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def _read_fsspec(uri: str, version: str | None, max_bytes: int | None) -> bytes:
    fs, path = _fsspec_fs(uri)
    try:
        data = fs.cat_file(path, start=0, end=None if max_bytes is None else max_bytes + 1)
    except FileNotFoundError:
        raise SourceVanished(f"{uri} no longer exists") from None
    listed = SourceVersion.parse(version)
    size = None if listed is None else listed.size
    if size is not None and size != len(data) and not (max_bytes and len(data) > max_bytes):
        raise SourceChanged(f"{uri} is {len(data)} bytes now, {size} when listed")
    return bytes(data)


class ObjectReader:
    """The default ``read_bytes`` of ``ChunkCorpus``: ``read_object`` as a picklable callable
    of the one signature every reader has, ``(uri, listed version, max_bytes)``."""

    def __init__(
        self, *, billing_project: str | None = None, within: tuple[str, ...] | None = None
    ) -> None:
        self.billing_project = billing_project
        self.within = within  # see read_object; None: local symlinks are followed

    def __call__(self, uri: str, version: str | None = None, max_bytes: int | None = None) -> bytes:
        return read_object(
            uri,
            version,
            billing_project=self.billing_project,
            max_bytes=max_bytes,
            within=self.within,
        )


# ---------------------------------------------------------------------------------------------
# Start-up checks


def check_bucket(uri: str, billing_project: str | None = None) -> None:
    """Raises ``StoreAccessError`` (one line naming the bucket and what was denied) when the
    bucket of ``uri`` does not exist or cannot be listed; does nothing for other stores."""
    if kind(uri) == "object":
        object_store(uri, billing_project).check(split_bucket(uri)[0])


# ---------------------------------------------------------------------------------------------
# Claims: create an object only if no object of that name exists, as one atomic request.


def creates_atomically(uri: str) -> bool:
    """Whether ``create_if_absent`` is atomic on the store of ``uri``: local disk, GCS and S3.
    Elsewhere it checks, then writes, and two writers in the same instant can both win."""
    return scheme(uri) == "" or kind(uri) == "object"


def create_if_absent(uri: str, data: bytes) -> bool:
    """Writes ``data`` to ``uri`` unless an object of that name exists; True when this call
    created it. Local disk: ``O_CREAT | O_EXCL``; GCS: ``if_generation_match=0``; S3:
    ``If-None-Match: *``. Other stores: an existence check, then a write (not atomic, see
    ``creates_atomically``)."""
    if scheme(uri) == "":
        return _create_local(uri, data)
    if kind(uri) == "object":
        bucket, key = split_bucket(uri)
        return object_store(uri).create_if_absent(bucket, key, data)
    if FileSystems.exists(uri):
        return False
    with FileSystems.create(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return True


def _create_local(path: str, data: bytes) -> bool:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True
