"""One typed source version: the texts the stores' listings give, parsed and written back
unchanged (manifests written before carry over unread only if they are)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkmill.items import SourceVersion, source_version
from chunkmill.transforms.sources import stat_versions


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


# A file's time as the kernel gives it (seconds and nanoseconds since 1970), as os.stat makes
# it a float; and any float at all, whole ones, exponents and the non-finite included.
_FILE_TIMES = st.builds(
    lambda s, ns: s + ns * 1e-9, st.integers(0, 2**33), st.integers(0, 999_999_999)
)
_ANY_TIMES = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**40), 2**40).map(
    float
)


@given(
    st.lists(st.tuples(st.integers(0, 2**62), _FILE_TIMES | _ANY_TIMES), min_size=1, max_size=40)
)
def test_versions_made_for_many_at_once_are_the_texts_made_one_by_one(files):
    sizes, mtimes = zip(*files, strict=True)
    made = stat_versions(pa.array(sizes, pa.int64()), pa.array(mtimes, pa.float64()))
    assert made.to_pylist() == [source_version(s, m) for s, m in files]


def test_versions_made_at_once_for_a_listing_s_times_match_one_by_one():
    """Thousands of file times of one night (nanoseconds apart) and of whole seconds."""
    mtimes = [1764256441 + i * 1.000000123 for i in range(20_000)] + [1.7e9 + i for i in range(50)]
    mtimes += [1e-4, -1e-4, 0.0001000001, 9999999999999998.0, 1e15 + 0.5, 123.0, -5.25, 0.0]
    mtimes += [1e10, 12345678901.0, 9999999999.5, 1.5e-7, float("inf")]
    sizes = list(range(len(mtimes)))
    made = stat_versions(pa.array(sizes, pa.int64()), pa.array(mtimes, pa.float64()))
    assert made.to_pylist() == list(map(source_version, sizes, mtimes))
