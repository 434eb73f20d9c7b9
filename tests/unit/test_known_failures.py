"""A document that failed is not tried again while nothing its failure depended on changed."""

from __future__ import annotations

import dataclasses

import pytest

from chunkmill import carryover, document, ids
from chunkmill.config import ChunkingConfig, Limits
from chunkmill.items import PriorError, WorkItem
from chunkmill.transforms import storage
from tests.helpers import SMALL

URI = "/corpus/broken.pdf"
KEY = document.attempt_key(SMALL)


def failure(reason: str = "corrupt", version: str | None = "v1", key: str | None = KEY):
    return PriorError(version, key, "extract", reason, "pypdf: stream ended", "abc123")


def item(error: PriorError | None, version: str | None = "v1") -> WorkItem:
    return WorkItem(ids.doc_id(URI), URI, 100, version=version, prior_error=error)


@pytest.mark.parametrize(
    "reason", ["corrupt", "binary", "no_text", "too_large", "timeout", "memory"]
)
def test_a_failure_at_the_listed_version_under_the_same_key_is_known(reason):
    assert carryover.is_known_failure(failure(reason), "v1", KEY)


@pytest.mark.parametrize(
    ("error", "version"),
    [
        (None, "v1"),  # never failed
        (failure(version="v1"), "v2"),  # rewritten since
        (failure(version=None), "v1"),  # an older run's row: no version recorded
        (failure(), None),  # the store reports no version now
        (failure(key=None), "v1"),  # an older run's row: no key recorded
        (failure(key="another"), "v1"),  # config, limits or parser versions changed
    ],
)
def test_a_failure_is_tried_again_when_anything_it_depended_on_may_have_changed(error, version):
    assert not carryover.is_known_failure(error, version, KEY)


@pytest.mark.parametrize("reason", sorted(carryover.TRANSIENT_REASONS))
def test_transient_failures_are_always_tried_again(reason):
    assert not carryover.is_known_failure(failure(reason), "v1", KEY)


@pytest.mark.parametrize(
    "reason",
    [storage.LINK_TARGET_MISSING, storage.NOT_REGULAR, storage.SYMLINK_OUTSIDE_INPUT],
)
def test_a_link_whose_target_came_back_is_read_again(reason):
    # A symlink's listed version is the link's own: its target can return, or change type,
    # with the same version, so these read failures are never "known".
    assert not carryover.is_known_failure(failure(reason), "v1", KEY)


@pytest.mark.parametrize(
    "change",
    [
        {"limits": Limits(timeout_seconds=5)},
        {"limits": Limits(memory_mb=64)},
        {"limits": Limits(max_document_bytes=10)},
        {"limits": Limits(max_pdf_pages=3)},
        {"pdf_engine": "pdfium"},
        {"params": (("max_tokens", 21), ("overlap_tokens", 0))},
    ],
)
def test_the_attempt_key_changes_with_every_limit_and_the_config(change):
    assert document.attempt_key(dataclasses.replace(SMALL, **change)) != KEY


def test_the_attempt_key_is_stable():
    same = ChunkingConfig.create("paragraph", max_tokens=20, overlap_tokens=0)
    assert document.attempt_key(same) == KEY


def test_a_known_failure_repeats_its_errors_row_unread():
    out = document.repeat_failure(item(failure("corrupt")), failure("corrupt"), KEY)
    assert out.status == document.FAILED
    assert out.error == {
        **document.error_row(item(None), "extract", "corrupt", "pypdf: stream ended", "abc123"),
        "attempted": False,
        "attempt_key": KEY,
    }
    assert out.error["source_version"] == "v1"
    assert out.verdict(ids.doc_id(URI)).kind == "keep"  # its prior rows stay


def test_prior_errors_files_of_older_runs_and_broken_ones_mean_trying_again(tmp_path, caplog):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chunkmill.transforms import sources

    old = tmp_path / "old.parquet"  # written before source_version and attempt_key existed
    pq.write_table(
        pa.table(
            {
                "doc_id": ["d1"],
                "source_uri": [URI],
                "stage": ["extract"],
                "reason": ["corrupt"],
                "message": ["bad"],
                "content_sha256": ["s"],
            }
        ),
        old,
    )
    ((doc, error),) = list(sources.prior_errors(str(old)))
    assert doc == "d1" and error == PriorError(None, None, "extract", "corrupt", "bad", "s")
    assert not carryover.is_known_failure(error, "v1", KEY)

    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 cut short")
    assert list(sources.prior_errors(str(broken))) == []
    assert "broken.parquet is unreadable" in caplog.text


def test_an_empty_failure_of_an_older_release_is_tried_again():
    """Older releases failed a document without text as ``empty`` and kept its rows; read
    again, it is emptied and its stale rows removed."""
    assert not carryover.is_known_failure(failure("empty"), "v1", KEY)
