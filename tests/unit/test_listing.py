"""The input edge: globs as a shell reads them, only regular files opened, symlinks kept
inside the input, odd names and unlistable folders recorded instead of failing or removing."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chunkmill import stores
from chunkmill.items import ListingError, Skipped, SourceFile, SourceFiles
from chunkmill.stores import local
from chunkmill.stores.memory import MemoryStore
from chunkmill.transforms import storage
from tests.helpers import AS_NOBODY

TREE = (
    "a.md",
    "b.txt",
    ".hidden.md",
    "book/a.md",
    "book/ch1/b.md",
    "book/ch1/deep/c.md",
    "book/ch2/d.txt",
    "book/.notes/e.md",
    "other/f.md",
    "x[1].md",
)


def listing(pattern: str, rules: storage.ListingRules = storage.DEFAULT_RULES) -> list:
    return [
        x for item in storage.plan(pattern, rules=rules) for x in storage.list_shard(item, rules)
    ]


def uris(pattern: str, rules: storage.ListingRules = storage.DEFAULT_RULES) -> list[str]:
    return sorted(x.uri for x in listing(pattern, rules) if isinstance(x, SourceFile))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in TREE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    return tmp_path


@pytest.mark.parametrize(
    "pattern",
    [
        "**",
        "*",
        "*.md",
        "**/*.md",
        "book/**/*.md",
        "book/**",
        "book/*/*.md",
        "book/**/deep/*.md",
        "**/ch?/*",
        "book/ch[12]/*",
        "book/ch[!1]/*",
        "x[[]1].md",
        "nothing/**",
    ],
)
def test_local_globs_list_what_pythons_recursive_glob_finds(tree: Path, pattern: str):
    """``**`` is zero or more folders, as in a shell with globstar and Python's glob."""
    expected = sorted(
        p
        for p in glob.glob(f"{tree}/{pattern}", recursive=True, include_hidden=True)
        if os.path.isfile(p)
    )
    assert uris(f"{tree}/{pattern}") == expected
    assert expected or pattern == "nothing/**"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("book/**/*.md", "book/a.md", True),
        ("book/**/*.md", "book/x/y/a.md", True),
        ("book/**/*.md", "bookx/a.md", False),
        ("**/*.md", "a.md", True),
        ("*.md", "sub/a.md", False),
        ("docs/**.md", "docs/a/b.md", True),  # ** inside a name crosses folders
        ("a?c", "a/c", False),
        ("[a-z].md", "/.md", False),
        ("[!a].md", "/.md", False),
        ("[]].md", "].md", True),
    ],
)
def test_glob_regex(pattern: str, path: str, matches: bool):
    import re

    assert bool(re.fullmatch(storage.glob_regex(pattern), path)) is matches


def test_a_folder_means_everything_under_it(tree: Path):
    everything = uris(f"{tree}/book/**")
    assert len(everything) == 5
    assert uris(f"{tree}/book/") == everything
    assert uris(f"{tree}/book") == everything


def test_formats_that_are_not_text_are_skipped_unless_included(tree: Path):
    (tree / "book" / "fig.svg").write_text("<svg><polygon points='0,0'/></svg>")
    (tree / "book" / "photo.PNG").write_bytes(b"\x89PNG\r\n")
    found = listing(f"{tree}/book/**")
    assert sorted(x for x in found if isinstance(x, Skipped)) == [
        Skipped(f"{tree}/book/fig.svg", storage.UNSUPPORTED_FORMAT),
        Skipped(f"{tree}/book/photo.PNG", storage.UNSUPPORTED_FORMAT),
    ]
    rules = storage.ListingRules(include=("**/*.svg",), exclude=("ch1/**",))
    got = uris(f"{tree}/book/**", rules)
    assert f"{tree}/book/fig.svg" in got  # brought back
    assert f"{tree}/book/photo.PNG" not in got
    assert not any("/ch1/" in u for u in got)  # excluded, relative to the input's folder
    assert Skipped(f"{tree}/book/ch1/b.md", storage.EXCLUDED) in listing(f"{tree}/book/**", rules)


def test_each_of_several_include_and_exclude_globs_counts(tree: Path):
    (tree / "book" / "fig.svg").write_text("<svg/>")
    (tree / "book" / "photo.png").write_bytes(b"\x89PNG\r\n")
    rules = storage.ListingRules(include=("*.svg", "**/*.png"), exclude=("ch1/**", "ch2/*"))
    found = listing(f"{tree}/book/**", rules)
    assert sorted(x.uri for x in found if isinstance(x, SourceFile)) == [
        f"{tree}/book/.notes/e.md",
        f"{tree}/book/a.md",
        f"{tree}/book/fig.svg",
        f"{tree}/book/photo.png",
    ]
    assert sorted(x for x in found if isinstance(x, Skipped)) == [
        Skipped(f"{tree}/book/ch1/b.md", storage.EXCLUDED),
        Skipped(f"{tree}/book/ch1/deep/c.md", storage.EXCLUDED),
        Skipped(f"{tree}/book/ch2/d.txt", storage.EXCLUDED),
    ]


@pytest.mark.parametrize(
    "names",
    [
        ["a.md", "b.md", "c.md"],  # one extension: judged at once
        ["a.png", "b.PNG", "c.Png"],  # one extension, not text
        ["a.md", "b.png", "c.tar.gz", "d.TXT", "e", ".png", "f.png.md", "g.p\u212al"],
        ["x.md", "y.xmd", "z.md"],  # the first's extension ends the second, not as one
        [".md", "a.md"],
        ["a.", "b."],
        ["caf\u00e9.svg", "na\udcefve.md"],
    ],
)
@pytest.mark.parametrize(
    "rules",
    [
        storage.DEFAULT_RULES,
        storage.ListingRules(include=("sub/*.png",), exclude=("sub/c.*",)),
    ],
)
def test_a_folder_s_names_are_screened_as_each_path_is(names, rules):
    """The screen of a folder's names at once skips exactly what the screen of each path
    relative to the root skips, for the same reasons."""
    expected = {
        i: reason for i, name in enumerate(names) if (reason := rules.screen("sub/" + name))
    }
    assert rules.screen_folder("sub/", names) == expected


def test_rules_refuse_absolute_globs():
    with pytest.raises(ValueError, match="relative"):
        storage.ListingRules(exclude=("/etc/**",))


def test_a_fifo_is_skipped_at_listing_and_never_opened(tmp_path: Path):
    (tmp_path / "a.md").write_text("a")
    os.mkfifo(tmp_path / "doc.md")
    found = listing(f"{tmp_path}/**")
    assert Skipped(f"{tmp_path}/doc.md", storage.NOT_REGULAR) in found
    assert uris(f"{tmp_path}/**") == [f"{tmp_path}/a.md"]


def test_a_read_refuses_a_fifo_and_stops_past_the_byte_limit(tmp_path: Path):
    """A FIFO swapped in after the listing: the read returns at once (no writer ever
    comes), refusing it; a file grown past the limit is read no further than limit + 1."""
    os.mkfifo(tmp_path / "doc.md")
    result: list[BaseException] = []

    def read() -> None:
        try:
            storage.read_object(str(tmp_path / "doc.md"), None, max_bytes=10)
        except BaseException as e:
            result.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    if reader.is_alive():  # unblock the thread so the test process can end
        with open(tmp_path / "doc.md", "wb"):
            pass
    assert result and isinstance(result[0], stores.NotRegularFile)
    (tmp_path / "big.md").write_bytes(b"x" * 100)
    with pytest.raises(stores.SourceTooLarge):
        storage.read_object(str(tmp_path / "big.md"), None, max_bytes=10)
    assert storage.read_object(str(tmp_path / "big.md"), None, max_bytes=100) == b"x" * 100


def test_a_local_read_returns_every_byte_up_to_the_limit_whatever_the_size(tmp_path: Path):
    """The pipeline's reader of local files: one store for all its reads, a file read whole
    (empty, small, several MB) or refused past the limit, the same as ``read_object``."""
    reader = storage.ObjectReader()
    big = bytes(range(256)) * (3 * 4096 + 7)  # over 3 MB, not a multiple of a read step
    for name, data in (("empty.md", b""), ("small.md", b"# a\n"), ("big.md", big)):
        (tmp_path / name).write_bytes(data)
        path = str(tmp_path / name)
        assert reader(path, None, None) == data
        assert reader(path, None, len(data)) == data
        assert storage.read_object(path, None, max_bytes=len(data)) == data
    with pytest.raises(stores.SourceTooLarge):
        reader(str(tmp_path / "big.md"), None, len(big) - 1)
    with pytest.raises(stores.SourceVanished):
        reader(str(tmp_path / "gone.md"), None, None)
    with pytest.raises(stores.NotRegularFile):
        reader(str(tmp_path), None, None)


def test_a_name_that_is_not_utf8_is_a_listing_error_not_a_crash(tmp_path: Path):
    (tmp_path / "ok.md").write_text("ok")
    bad = os.path.join(os.fsencode(tmp_path), b"caf\xe9.md")
    with open(bad, "wb") as f:
        f.write(b"x")
    found = listing(f"{tmp_path}/**")
    errors = [x for x in found if isinstance(x, ListingError)]
    assert [(e.uri, e.reason) for e in errors] == [(f"{tmp_path}/caf\\xe9.md", storage.BAD_NAME)]
    errors[0].uri.encode("utf-8")  # recordable
    assert uris(f"{tmp_path}/**") == [f"{tmp_path}/ok.md"]


def test_symlinks_stay_inside_the_input(tmp_path: Path):
    secret = tmp_path / "outside" / "credentials.md"
    secret.parent.mkdir()
    secret.write_text("aws_secret_access_key = x")
    root = tmp_path / "in"
    root.mkdir()
    (root / "real.md").write_text("real")
    (root / "creds.md").symlink_to(secret)
    (root / "alias.md").symlink_to(root / "real.md")
    found = listing(f"{root}/**")
    assert Skipped(f"{root}/creds.md", storage.SYMLINK_OUTSIDE_INPUT) in found
    assert uris(f"{root}/**") == [f"{root}/alias.md", f"{root}/real.md"]
    assert f"{root}/creds.md" in uris(f"{root}/**", storage.ListingRules(follow_symlinks=True))


def test_a_dangling_symlink_is_listed_and_its_read_says_so(tmp_path: Path):
    (tmp_path / "target.md").write_text("t")
    (tmp_path / "link.md").symlink_to(tmp_path / "target.md")
    (tmp_path / "target.md").unlink()
    assert uris(f"{tmp_path}/**") == [f"{tmp_path}/link.md"]
    with pytest.raises(stores.LinkTargetMissing):
        storage.read_object(f"{tmp_path}/link.md", None)


def test_the_output_is_excluded_by_its_real_path(tmp_path: Path):
    real_out = tmp_path / "in" / "out"
    (real_out / "runs").mkdir(parents=True)
    (real_out / "runs" / "x.md").write_text("output")
    (tmp_path / "in" / "doc.md").write_text("doc")
    (tmp_path / "alias").symlink_to(tmp_path / "in")
    rules = storage.ListingRules(output=str(tmp_path / "alias" / "out"))
    assert uris(f"{tmp_path}/in/**", rules) == [f"{tmp_path}/in/doc.md"]


def test_the_walk_never_enters_the_output(tree: Path, monkeypatch: pytest.MonkeyPatch):
    scanned: list[str] = []
    read_folder = local._read_folder

    def recorded(folder):
        scanned.append(folder)
        return read_folder(folder)

    monkeypatch.setattr(local, "_read_folder", recorded)
    rules = storage.ListingRules(output=str(tree / "book"))
    assert uris(f"{tree}/**", rules) == [
        f"{tree}/.hidden.md",
        f"{tree}/a.md",
        f"{tree}/b.txt",
        f"{tree}/other/f.md",
        f"{tree}/x[1].md",
    ]
    assert sorted(scanned) == [str(tree), f"{tree}/other"]


class FailingMidway(MemoryStore):
    """Lists the first object of a prefix, then fails, as a store does on a 503."""

    def list_prefix(self, bucket, prefix, recursive):
        for i, entry in enumerate(super().list_prefix(bucket, prefix, recursive)):
            if i == 1:
                raise RuntimeError("503 backend error")
            yield entry


def test_an_object_store_shard_that_fails_is_a_listing_error():
    store = FailingMidway()
    version = store.put("bk", "docs/a/x.md", b"x")
    store.put("bk", "docs/a/y.md", b"y")
    stores.register("mem", lambda billing_project: store)
    try:
        got = list(storage.list_shard(storage.Shard("mem://bk/docs/**", "docs/a/", True)))
    finally:
        stores.unregister("mem")
    assert got[0] == ListingError(
        "mem://bk/docs/a/", storage.LIST_FAILED, "RuntimeError: 503 backend error"
    )
    assert got[1:] == [SourceFile("mem://bk/docs/a/x.md", 1, version)]


_LIST_AS_NOBODY = """
import sys
from chunkmill.items import SourceFile
from chunkmill.transforms import storage
for item in storage.plan(sys.argv[1]):
    for x in storage.list_shard(item):
        unexamined = isinstance(x, SourceFile) and x.version is None
        print(type(x).__name__, x.uri, getattr(x, "reason", "unexamined" if unexamined else ""))
"""


def test_an_unreadable_folder_is_a_listing_error(tmp_path: Path):
    """As an unprivileged user (root reads any folder), a folder without permission is
    reported, and the rest is listed; a file in a folder that can be read but not searched
    is listed unexamined (its read says why)."""
    root = tmp_path / "corpus"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "a.md").write_text("a")
    (root / "unsearchable").mkdir()
    (root / "unsearchable" / "b.md").write_text("b")
    (root / "open.md").write_text("o")
    for p in (tmp_path, root, root / "open.md"):
        p.chmod(0o755)
    (root / "locked").chmod(0o000)
    (root / "unsearchable").chmod(0o444)
    parents = [p for p in tmp_path.parents if p != Path("/")]
    modes = {p: p.stat().st_mode for p in parents}
    try:
        for p in parents:
            p.chmod(modes[p] | 0o005)
        out = subprocess.run(
            [
                *AS_NOBODY,
                sys.executable,
                "-c",
                _LIST_AS_NOBODY,
                f"{root}/**",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            check=True,
        ).stdout.splitlines()
    finally:
        for p in parents:
            p.chmod(modes[p])
        (root / "unsearchable").chmod(0o755)
    assert sorted(out) == [
        f"ListingError {root}/locked {storage.LIST_FAILED}",
        f"SourceFile {root}/open.md ",
        f"SourceFile {root}/unsearchable/b.md unexamined",
    ]


def test_a_symlink_swapped_to_outside_after_the_listing_is_not_read(tmp_path: Path):
    """The listing saw a link into the input; by the read it leads out: refused."""
    secret = tmp_path / "outside.md"
    secret.write_text("secret")
    root = tmp_path / "in"
    root.mkdir()
    (root / "real.md").write_text("real")
    (root / "link.md").symlink_to(root / "real.md")
    within = storage.local_roots([f"{root}/**"])
    assert within == (str(root),)
    reader = storage.ObjectReader(within=within)
    assert reader(f"{root}/link.md", None) == b"real"
    (root / "link.md").unlink()
    (root / "link.md").symlink_to(secret)
    with pytest.raises(storage.SymlinkOutsideInput):
        reader(f"{root}/link.md", None)
    assert storage.ObjectReader()(f"{root}/link.md", None) == b"secret"  # nothing to keep in


def test_a_local_folder_s_files_come_as_columns_in_order_around_what_is_skipped(tree: Path):
    """A walk gives a folder's listed files as one batch of columns, cut only where it skips
    an object, so the listing's order is the sorted one, batch or not."""
    (tree / "book" / "b.png").write_bytes(b"\x89PNG")
    (tree / "book" / "c.md").write_text("c")
    walked = list(
        stores.for_uri(str(tree)).walk(storage.glob(f"{tree}/book/*"), storage.DEFAULT_RULES)
    )
    book = f"{tree}/book/"
    assert [type(x) for x in walked] == [SourceFiles, Skipped, SourceFiles]
    assert walked[0].uris == [book + "a.md"] and walked[2].uris == [book + "c.md"]
    assert walked[0].sizes == [len("book/a.md")] and walked[2].sizes == [1]
    assert walked[1] == Skipped(book + "b.png", storage.UNSUPPORTED_FORMAT)
    one_by_one = list(stores.one_by_one(walked))
    assert one_by_one == listing(f"{tree}/book/*")
    assert [x.uri for x in one_by_one] == [book + "a.md", book + "b.png", book + "c.md"]
    assert all(x.version is not None for x in one_by_one if isinstance(x, SourceFile))


def test_a_large_folder_s_files_come_in_bounded_batches(tmp_path: Path, monkeypatch):
    """A folder of more files than a batch holds leaves the walk in several batches, in
    order, none larger than ``BATCH_FILES``: the listing's hold never takes a whole folder."""
    monkeypatch.setattr(local, "BATCH_FILES", 3)
    for i in range(7):
        (tmp_path / f"{i}.md").write_text("x")
    walked = list(
        stores.for_uri(str(tmp_path)).walk(storage.glob(f"{tmp_path}/*"), storage.DEFAULT_RULES)
    )
    assert [len(x.uris) for x in walked] == [3, 3, 1]
    assert [u for x in walked for u in x.uris] == [f"{tmp_path}/{i}.md" for i in range(7)]


def test_a_walked_folder_s_files_are_examined_by_name_relative_to_it(
    tree: Path, monkeypatch: pytest.MonkeyPatch
):
    """The kernel resolves one component per file, not the whole path again: each file is
    examined by its name in the folder opened once."""
    examined: list[tuple[str, bool]] = []
    lstat = os.lstat

    def recorded(path, *, dir_fd=None):
        if str(path).endswith(".md"):  # not the folders ``realpath`` examines
            examined.append((path, dir_fd is not None))
        return lstat(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "lstat", recorded)
    assert uris(f"{tree}/book/ch1/*") == [f"{tree}/book/ch1/b.md"]
    assert examined == [("b.md", True)]


def test_a_hold_of_many_makes_the_versions_its_files_have_one_by_one():
    """Past a few hundred files the hold makes their versions at once (Arrow's kernels):
    the messages it sends are those of the same files held one by one, a store's own
    versions among them kept."""
    from chunkmill.transforms import sources

    count = 3 * sources._VERSIONS_AT_ONCE
    mtimes = [1764256441.417407 + i * 0.001 for i in range(count)]
    mtimes[1], mtimes[2] = 0.0, 1700000000.0  # no time; a whole second
    batch = SourceFiles([f"/c/{i}.md" for i in range(count)], list(range(count)), mtimes)
    stored = SourceFile("gs://b/k.md", 3, "gen=17")
    one, many = sources.ListingHold(), sources.ListingHold()
    for f in [stored, *batch.files(), stored._replace(uri="gs://b/l.md", version=None)]:
        one.add(f)
    many.add(stored)
    many.extend(batch)
    many.add(stored._replace(uri="gs://b/l.md", version=None))
    assert many.release() == one.release()


def test_a_pattern_naming_one_file_lists_it_alone(tree: Path, monkeypatch):
    """Without a wildcard the pattern's own file is examined, by path, relative or not."""
    assert uris(f"{tree}/book/ch1/b.md") == [f"{tree}/book/ch1/b.md"]
    monkeypatch.chdir(tree / "book")
    assert uris("a.md") == ["a.md"]
    assert uris("missing.md") == []


def test_a_batch_is_held_as_its_files_one_by_one(monkeypatch):
    from chunkmill.transforms import sources

    batch = SourceFiles(
        [f"/c/{i}.md" for i in range(5)], [1, 2, 3, 4, 5], [1.5, 0.0, 1700000000.0, 3.25, 9.0]
    )
    assert [f.version for f in batch.files()][:3] == [
        "size=1;mtime=1.5",
        None,
        "size=3;mtime=1700000000.0",
    ]
    one, many = sources.ListingHold(), sources.ListingHold()
    for f in batch.files():
        assert one.add(f) == []
    assert many.extend(batch) == []
    assert many.release() == one.release() != []
    monkeypatch.setattr(sources, "LISTING_HOLD", 5)  # a full hold is released as it fills
    released = [one.add(f) for f in batch.files()]
    assert released[:4] == [[], [], [], []] and released[4] != []
    assert many.extend(batch) == released[4]
    assert many.release() == one.release() == []
