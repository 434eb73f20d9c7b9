"""A document's extension, as detection reads it from its path."""

from __future__ import annotations

import posixpath

import pytest

from chunkmill.extract import _extension, detect_format


@pytest.mark.parametrize(
    "path",
    [
        "a.md",
        "docs/Guide.MD",
        "/x/y/.bashrc",
        "x/.a.b.Md",
        "..md",
        "a.",
        "...",
        "dir.d/file",
        "C:\\docs\\notes.TXT",
        "x\\y/z.rst",
        "a/b/c.tar.gz",
        "gs://bucket/key.pdf",
    ],
)
def test_the_extension_is_the_last_names_as_splitext_reads_it(path):
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    assert _extension(path) == posixpath.splitext(name)[1].lower()


def test_a_leading_dot_is_part_of_the_name():
    assert detect_format("notes/.md", b"plain words") == "text"
    assert detect_format("notes/a.md", b"plain words") == "markdown"
