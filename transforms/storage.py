"""Globs, shards and listing rules: what a pattern means on every store, how its listing is
split into work done in parallel, and what the listing leaves out.

Every location is a store of ``chunkmill.stores`` (``for_uri`` picks it by scheme); this
module lists and reads through that interface only. A listing yields ``SourceFile`` (to
read), ``Skipped`` (left out on purpose) and ``ListingError`` (a folder that could not be
listed), and never raises for one bad folder or name. The rules per store, the globs and the
sharding: the "Listing and reading" section of docs/design.md.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from chunkmill import stores
from chunkmill.items import Listed, Skipped, SourceFile, SourceFiles
from chunkmill.stores import (
    BAD_NAME,
    LIST_FAILED,
    NOT_REGULAR,
    SYMLINK_OUTSIDE_INPUT,
    Glob,
    SourceTooLarge,
    SymlinkOutsideInput,
    display_name,
    is_directory_marker,
    list_failed,
    scheme,
    screened,
    split_bucket,
)
from chunkmill.stores.fsspec_store import FsspecStore
from chunkmill.stores.gcs import use_anonymous_gcs_for_emulator

__all__ = [  # besides what is defined here, names other modules reach through this one
    "BAD_NAME",
    "LIST_FAILED",
    "NOT_REGULAR",
    "SYMLINK_OUTSIDE_INPUT",
    "SymlinkOutsideInput",
    "display_name",
    "is_directory_marker",
    "scheme",
    "split_bucket",
    "use_anonymous_gcs_for_emulator",
]

_GLOB_CHARS = "*?["
# Schemes whose URLs carry a query: a "?" there starts it, and is never a wildcard.
_LITERAL_QUERY_SCHEMES = frozenset({"http", "https"})


# errors/ reason codes of the read stage.
VANISHED = "vanished"  # listed, then deleted before it was read
CHANGED = "changed"  # listed, then overwritten before it was read; read again next run
LINK_TARGET_MISSING = "link_target_missing"  # a symlink whose target does not exist (now)
TOO_LARGE = "too_large"  # more bytes than --max-document-bytes
# NOT_REGULAR (chunkmill.stores): a FIFO, device or socket where a file was listed.

# errors/ reason codes of the list stage (chunkmill.stores, where the listings give them):
# LIST_FAILED, a folder or prefix that could not be listed (its documents are kept);
# BAD_NAME, a local file name that is not valid UTF-8 (it cannot be recorded).

# Skipped reasons: found by the listing, left out on purpose, never read (not failures).
UNSUPPORTED_FORMAT = "unsupported_format"  # see NOT_TEXT
EXCLUDED = "excluded"  # matched an --exclude pattern
# SYMLINK_OUTSIDE_INPUT: see ListingRules.follow_symlinks. NOT_REGULAR as a skip reason too:
# a FIFO, device or socket seen by the listing is never opened.


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
    dot = name.rfind(".")
    return dot > name.rfind("/") + 1 and name[dot:].lower() in _NOT_TEXT_EXTENSIONS


def not_text_names(names: Sequence[str]) -> list[int]:
    """The places in ``names`` (one folder's file names: no "/" in them) of those
    ``is_not_text`` takes, in order. Names that all end in the same extension, as a folder's
    mostly do, are judged at once: one count of it in the names joined."""
    if not names:
        return []
    first = names[0]
    dot = first.rfind(".")
    ending = first[dot:] + "/"
    if dot > 0 and not is_not_text(first) and ("/".join(names) + "/").count(ending) == len(names):
        return []  # each name ends in the first's extension, one of text
    return [i for i, name in enumerate(names) if is_not_text(name)]


@dataclass(frozen=True)
class Shard:
    """One unit of listing work: the objects under ``prefix`` (all of them when
    ``recursive``, else only those directly under it) that match ``pattern``."""

    pattern: str
    prefix: str | None = None  # None: the pattern as a whole (a store that is walked)
    recursive: bool = True
    billing_project: str | None = None  # requester-pays buckets: the project billed


def kind(uri: str) -> str:
    """How ``uri`` is listed: ``object`` (a bucket store, listed by prefix and sharded),
    ``fsspec`` (an fsspec protocol) or ``beam`` (local disk and Beam's FileSystems)."""
    store = stores.for_uri(uri)
    if store.sharded:
        return "object"
    return "fsspec" if isinstance(store, FsspecStore) else "beam"


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


def glob(pattern: str) -> Glob:
    """``pattern`` as a walking store reads it (``chunkmill.stores.Glob``)."""
    return Glob(pattern, pattern_root(pattern), has_glob(pattern), _matcher(pattern), glob)


def folder_pattern(pattern: str) -> str:
    """A pattern naming a folder means everything under it: ``book/`` (any store) and a local
    folder ``book`` become ``book/**``; any other pattern is returned as it is."""
    if pattern.endswith("/"):
        return pattern + "**"
    if not has_glob(pattern) and stores.for_uri(pattern).is_folder(pattern):
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
    # Each list of globs as one expression (matched whole, it matches when one glob does);
    # None: no globs.
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _output: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("include", "exclude"):
            patterns = getattr(self, name)
            if isinstance(patterns, str):
                raise ValueError(f"{name} must be a sequence of globs, not one string")
            for p in patterns:
                if not p or p.startswith("/") or "://" in p:
                    raise ValueError(
                        f"{name} glob {p!r} must be a path relative to the input's folder"
                    )
            either = "|".join(f"(?:{glob_regex(p)})" for p in patterns)
            object.__setattr__(self, f"_{name}", re.compile(either) if patterns else None)
        prefixes: list[str] = []
        if self.output:
            prefixes.append(self.output.rstrip("/") + "/")
            if stores.is_local(self.output):
                prefixes.append(os.path.realpath(self.output).rstrip("/") + "/")
        object.__setattr__(self, "_output", tuple(dict.fromkeys(prefixes)))

    def screen(self, relative: str) -> str | None:
        """The reason to skip a path (relative to its pattern's root), or None to list it."""
        if self._exclude is not None and self._exclude.fullmatch(relative):
            return EXCLUDED
        if self._include is not None and self._include.fullmatch(relative):
            return None
        if is_not_text(relative):
            return UNSUPPORTED_FORMAT
        return None

    def screen_folder(self, relative_folder: str, names: Sequence[str]) -> dict[int, str]:
        """``screen`` of each of one folder's files (the paths ``relative_folder + name``):
        the reasons to skip, by the place of the name in ``names``. Without --include or
        --exclude only the format is screened, by one search of the folder's names."""
        if self._exclude is None and self._include is None:
            return dict.fromkeys(not_text_names(names), UNSUPPORTED_FORMAT)
        screen = self.screen
        reasons = ((i, screen(relative_folder + name)) for i, name in enumerate(names))
        return {i: reason for i, reason in reasons if reason is not None}

    def in_output(self, path: str) -> bool:
        return path.startswith(self._output)


DEFAULT_RULES = ListingRules()


# ---------------------------------------------------------------------------------------------
# Listing


def plan(
    pattern: str, billing_project: str | None = None, rules: ListingRules = DEFAULT_RULES
) -> Iterator[Shard | Listed]:
    """Splits the listing of ``pattern`` into work that can be done in parallel.

    For a sharded (bucket) store, one delimiter listing of the pattern's fixed prefix gives
    the objects directly under it (yielded already listed and judged by ``rules``) and its
    sub-prefixes (yielded as one ``Shard`` each, when the pattern can match below them).
    Elsewhere the pattern is one shard. ``list_shard`` turns each item into listed objects.
    A pattern naming a folder means everything under it (``folder_pattern``); a bucket key
    without a wildcard names that object or, if it is a folder, everything under it.
    A listing that fails is a ``ListingError`` naming the prefix, never an exception.
    """
    pattern = folder_pattern(pattern)
    store = stores.for_uri(pattern, billing_project)
    if not store.sharded:
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
        yield list_failed(f"{scheme(pattern)}://{bucket}/{prefix[: prefix.rfind('/') + 1]}", e)
    yield from screened(found, pattern_root(pattern), rules)


def list_shard(item: Shard | Listed, rules: ListingRules = DEFAULT_RULES) -> Iterator[Listed]:
    """The objects of one shard that match its pattern, with their listing versions, judged
    by ``rules`` (``Skipped`` when left out); what ``plan`` already listed passes through. A
    shard whose listing fails, in full or part way, yields a ``ListingError`` naming it after
    whatever it listed."""
    return stores.one_by_one(list_shard_batched(item, rules))


def list_shard_batched(
    item: Shard | Listed, rules: ListingRules = DEFAULT_RULES
) -> Iterator[Listed | SourceFiles]:
    """``list_shard``'s objects, the files a store lists a batch at a time (a local folder's)
    as ``SourceFiles``: for a consumer that keeps them as columns."""
    if not isinstance(item, Shard):
        yield item
        return
    shard = item
    store = stores.for_uri(shard.pattern, shard.billing_project)
    if not store.sharded:
        yield from store.walk(glob(shard.pattern), rules)
        return
    bucket, key = split_bucket(shard.pattern)
    match = _matcher(key).fullmatch
    prefix = shard.prefix or ""
    found: list[SourceFile] = []
    try:
        for name, size, version in store.list_prefix(bucket, prefix, shard.recursive):
            if not is_directory_marker(name) and match(name):
                found.append(
                    SourceFile(f"{scheme(shard.pattern)}://{bucket}/{name}", size, version)
                )
    except Exception as e:
        yield list_failed(f"{scheme(shard.pattern)}://{bucket}/{prefix}", e)
    yield from screened(found, pattern_root(shard.pattern), rules)


def has_match(pattern: str, billing_project: str | None = None) -> bool:
    """Whether ``pattern`` matches at least one object, a skipped one included (stops at the
    first)."""
    quick = stores.for_uri(pattern, billing_project).matches(pattern)
    if quick is not None:
        return quick
    return any(
        isinstance(listed, SourceFile | Skipped)
        for item in plan(pattern, billing_project)
        for listed in list_shard(item)
    )


def local_roots(patterns: Iterable[str]) -> tuple[str, ...]:
    """The real folders local ``patterns`` list from (``pattern_root``): where a symlink met
    when reading may lead (``ObjectReader(within=...)``)."""
    roots = []
    for p in patterns:
        p = folder_pattern(p)
        if stores.is_local(p):
            roots.append(os.path.realpath(pattern_root(p) or "."))
    return tuple(sorted(set(roots)))


# ---------------------------------------------------------------------------------------------
# Reading, checking and claiming: the store of the URI's, with the byte limit enforced alike.


def read_object(
    uri: str,
    version: str | None = None,
    *,
    billing_project: str | None = None,
    max_bytes: int | None = None,
    within: tuple[str, ...] | None = None,
) -> bytes:
    """All bytes of the object at ``uri``, as of the listed ``version`` where the store can pin
    it (``ObjectStore.read``).

    Raises ``SourceVanished`` when the object is gone and ``SourceChanged`` when it is no
    longer the listed version; ``SourceTooLarge`` when it holds more than ``max_bytes`` (at
    most ``max_bytes + 1`` are read, whatever the listing said); a local path also raises
    ``LinkTargetMissing`` (a dangling symlink) and ``NotRegularFile`` (never read), and, given
    ``within`` (real folder paths), ``SymlinkOutsideInput`` for a symlink whose target is
    under none of them (checked again at read time: a link swapped after the listing); other
    errors (permission, network after retries) propagate. Compression is never inferred from
    the name: a ``.gz`` document is bytes to extract.
    """
    store = stores.for_uri(uri, billing_project, within)
    return _within_limit(store.read(uri, version, max_bytes), max_bytes)


def _within_limit(data: bytes, max_bytes: int | None) -> bytes:
    if max_bytes is not None and len(data) > max_bytes:
        raise SourceTooLarge(
            f"more than {max_bytes} bytes, over the --max-document-bytes limit "
            "(the listing said less)"
        )
    return data


class ObjectReader:
    """The default ``read_bytes`` of ``ChunkCorpus``: ``read_object`` as a picklable callable
    of the one signature every reader has, ``(uri, listed version, max_bytes)``."""

    def __init__(
        self, *, billing_project: str | None = None, within: tuple[str, ...] | None = None
    ) -> None:
        self.billing_project = billing_project
        self.within = within  # see read_object; None: local symlinks are followed

    def __call__(self, uri: str, version: str | None = None, max_bytes: int | None = None) -> bytes:
        if stores.is_local(uri):  # most reads of a local run: its store made once, not per read
            return _within_limit(self._local.read(uri, version, max_bytes), max_bytes)
        return read_object(
            uri,
            version,
            billing_project=self.billing_project,
            max_bytes=max_bytes,
            within=self.within,
        )

    @functools.cached_property
    def _local(self) -> stores.ObjectStore:
        return stores.for_uri("", self.billing_project, self.within)


def check_bucket(uri: str, billing_project: str | None = None) -> None:
    """Raises ``StoreAccessError`` (one line naming the bucket and what was denied) when the
    bucket of ``uri`` does not exist or cannot be listed; does nothing for other stores."""
    stores.for_uri(uri, billing_project).check(uri)


def creates_atomically(uri: str) -> bool:
    """Whether ``create_if_absent`` is atomic on the store of ``uri``: local disk, GCS and S3.
    Elsewhere it checks, then writes, and two writers in the same instant can both win."""
    return stores.for_uri(uri).atomic_create


def create_if_absent(uri: str, data: bytes) -> bool:
    """Writes ``data`` to ``uri`` unless an object of that name exists; True when this call
    created it. Local disk: ``O_CREAT | O_EXCL``; GCS: ``if_generation_match=0``; S3:
    ``If-None-Match: *``. Other stores: an existence check, then a write (not atomic, see
    ``creates_atomically``)."""
    return stores.for_uri(uri).create_if_absent(uri, data)
