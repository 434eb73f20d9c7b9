"""One typed source version: the texts the stores' listings give, parsed and written back
unchanged (manifests written before carry over unread only if they are)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill.items import SourceVersion, source_version


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("gen=1700000000123456", SourceVersion(generation="1700000000123456")),
        (
            "etag=9b2cf535f27731c974343645a3985328;size=42",
            SourceVersion(etag="9b2cf535f27731c974343645a3985328", size=42),
        ),
        ("etag=abc-3;size=0", SourceVersion(etag="abc-3", size=0)),
        ("size=1234;mtime=1700000000.5", SourceVersion(size=1234, mtime=1700000000.5)),
        ("size=7;mtime=1e-05", SourceVersion(size=7, mtime=1e-05)),
    ],
)
def test_the_texts_of_every_store_parse_and_print_unchanged(text, version):
    assert SourceVersion.parse(text) == version
    assert str(version) == text


def test_constructors_give_the_texts_the_listings_always_gave():
    assert str(SourceVersion.gcs(17)) == "gen=17"
    assert str(SourceVersion.s3('"d41d8cd9"', 10)) == "etag=d41d8cd9;size=10"
    assert source_version(10, 1700000000.25) == "size=10;mtime=1700000000.25"
    assert source_version(10, 0.0) is None  # no modification time: always read


@pytest.mark.parametrize(
    "text", [None, "", "gen=", "size=1", "mtime=2;size=1", "etag=x", "size=x;mtime=1", "other=1"]
)
def test_what_is_not_a_version_of_these_forms_is_none(text):
    assert SourceVersion.parse(text) is None


@given(size=st.integers(0, 2**62), mtime=st.floats(min_value=1e-3, max_value=4e9))
def test_stat_versions_round_trip(size, mtime):
    text = source_version(size, mtime)
    assert text is not None and str(SourceVersion.parse(text)) == text
