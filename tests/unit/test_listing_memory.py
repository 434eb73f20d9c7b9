"""Globs, shards and listing rules on the in-memory store: a bucket listed by prefix and
sharded by ``plan`` finds what a shell's globstar finds on disk, and judges it by the same
rules."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkmill import stores
from chunkmill.items import ListingError, Skipped, SourceFile
from chunkmill.stores.memory import MemoryStore
from chunkmill.transforms import storage
from tests.unit.test_listing import TREE

ROOT = "mem://bk/"


@pytest.fixture
def mem() -> Iterator[MemoryStore]:
    store = MemoryStore()
    for name in TREE:
        store.put("bk", name, name.encode())
    stores.register("mem", lambda billing_project: store)
    yield store
    stores.unregister("mem")


def listing(pattern: str, rules: storage.ListingRules = storage.DEFAULT_RULES) -> list:
    return [
        x for item in storage.plan(pattern, rules=rules) for x in storage.list_shard(item, rules)
    ]


def names(pattern: str, rules: storage.ListingRules = storage.DEFAULT_RULES) -> list[str]:
    return sorted(
        x.uri.removeprefix(ROOT) for x in listing(pattern, rules) if isinstance(x, SourceFile)
    )


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
        "book/ch1/deep/c.md",
        "nothing/**",
    ],
)
def test_bucket_globs_find_what_pythons_recursive_glob_finds_on_disk(
    mem, tmp_path: Path, pattern: str
):
    for name in TREE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    on_disk = sorted(
        os.path.relpath(p, tmp_path)
        for p in glob.glob(f"{tmp_path}/{pattern}", recursive=True, include_hidden=True)
        if os.path.isfile(p)
    )
    assert names(ROOT + pattern) == on_disk


def test_shards_split_the_listing_by_sub_prefix_and_lose_nothing(mem):
    planned = list(storage.plan(ROOT + "**"))
    shards = sorted(s.prefix for s in planned if isinstance(s, storage.Shard))
    assert shards == ["book/", "other/"]
    # Objects directly under the fixed prefix come listed with the plan.
    top = sorted(f.uri for f in planned if isinstance(f, SourceFile))
    assert top == [ROOT + n for n in (".hidden.md", "a.md", "b.txt", "x[1].md")]
    assert len(names(ROOT + "**")) == len(TREE)


def test_a_folder_means_everything_under_it(mem):
    everything = names(ROOT + "book/**")
    assert len(everything) == 5
    assert names(ROOT + "book/") == everything
    assert names(ROOT + "book") == everything  # no wildcard: the object, or the folder


def test_rules_skip_formats_that_are_not_text_bring_back_includes_and_exclude(mem):
    mem.put("bk", "book/fig.svg", b"<svg/>")
    mem.put("bk", "book/photo.PNG", b"\x89PNG")
    found = listing(ROOT + "book/**")
    assert sorted(x for x in found if isinstance(x, Skipped)) == [
        Skipped(ROOT + "book/fig.svg", storage.UNSUPPORTED_FORMAT),
        Skipped(ROOT + "book/photo.PNG", storage.UNSUPPORTED_FORMAT),
    ]
    rules = storage.ListingRules(include=("**/*.svg",), exclude=("ch1/**",))
    got = names(ROOT + "book/**", rules)
    assert "book/fig.svg" in got and "book/photo.PNG" not in got
    assert not any("/ch1/" in n for n in got)
    assert Skipped(ROOT + "book/ch1/b.md", storage.EXCLUDED) in listing(ROOT + "book/**", rules)


def test_the_output_prefix_is_never_listed(mem):
    mem.put("bk", "book/out/runs/r1/x.md", b"output")
    rules = storage.ListingRules(output=ROOT + "book/out")
    assert "book/out/runs/r1/x.md" in names(ROOT + "book/**")
    assert "book/out/runs/r1/x.md" not in names(ROOT + "book/**", rules)


def test_a_prefix_that_cannot_be_listed_is_a_listing_error_and_the_rest_is_listed(mem):
    mem.fail_listing("bk", "book/")
    found = listing(ROOT + "**")
    assert [x.uri for x in found if isinstance(x, ListingError)] == [ROOT + "book/"]
    assert "other/f.md" in names(ROOT + "**")


def test_has_match_counts_a_skipped_object(mem):
    mem.put("bk", "pics/a.png", b"\x89PNG")
    assert storage.has_match(ROOT + "pics/*")
    assert not storage.has_match(ROOT + "nothing/*")
