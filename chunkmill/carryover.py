"""The carry-over rule: what becomes of a listed document before it is read, judged on one
summary of its prior rows. A run (``transforms.doc_plan``, ``transforms.process_docs``) and
``chunkmill plan`` both call these functions, so the plan predicts the run by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from chunkmill.items import PriorError, PriorSummary

# A listed document's fate before it is read, in the order the rule tries them.
UNCHANGED = "unchanged"  # every prior row made from this listed version with this config
KNOWN_FAILED = "failed before"  # failed at this version under this attempt key: not retried
NEW = "new"  # no prior row
CHANGED = "changed"  # to read (a touched but identical file is then found unchanged)

# Failures that say nothing about the document's bytes (the store or the network failed, the
# object moved under the read, or a symlink's target or the file's type changed, which its
# listed version need not show, or the parser child was killed from outside): always tried
# again.
TRANSIENT_REASONS = frozenset(
    {
        "killed",
        "read_failed",
        "vanished",
        "changed",
        "list_failed",
        "link_target_missing",
        "not_regular_file",
        "symlink_outside_input",
    }
)

# Failures that are never repeated unread: the transient ones, and ``empty``, which older
# releases wrote for a document without text (keeping its rows); such a document is now
# emptied (chunkmill.document), so it is read again and its stale rows removed.
NOT_REPEATED_REASONS = TRANSIENT_REASONS | {"empty"}

# The columns of a document's prior rows the rule reads: their shared value, or none.
SHARED_COLUMNS = ("source_version", "config_fingerprint", "content_sha256", "source_uri")


@dataclass(frozen=True)
class PriorState:
    """A document's prior rows, as the rule sees them: how many, and the listed version,
    config fingerprint and content hash every one of them has (``None`` where they differ or
    any is null)."""

    rows: int
    version: str | None
    fingerprint: str | None
    content_sha256: str | None = None

    @classmethod
    def of_parts(cls, summaries: Sequence[PriorSummary]) -> PriorState | None:
        """The state of a document from the summaries of the parts it has rows in."""
        if not summaries:
            return None

        def shared(values: Iterable[str | None]) -> str | None:
            distinct = set(values)
            return distinct.pop() if len(distinct) == 1 else None

        return cls(
            rows=sum(s.rows for s in summaries),
            version=shared(s.source_version for s in summaries),
            fingerprint=shared(s.config_fingerprint for s in summaries),
            content_sha256=shared(s.content_sha256 for s in summaries),
        )


def unchanged_by_listing(version: str | None, prior: PriorState | None, fingerprint: str) -> bool:
    """Every prior row was made from this very listed ``version`` with this config, so the
    document need not even be read. A store that reports no version never qualifies."""
    return (
        version is not None
        and prior is not None
        and prior.rows > 0
        and prior.version == version
        and prior.fingerprint == fingerprint
    )


def unchanged_by_content(content_sha256: str, prior: PriorState | None, fingerprint: str) -> bool:
    """Every prior row was made from these very bytes with this config (decided once read)."""
    return (
        prior is not None
        and prior.rows > 0
        and prior.content_sha256 == content_sha256
        and prior.fingerprint == fingerprint
    )


def is_known_failure(prior_error: PriorError | None, version: str | None, key: str) -> bool:
    """The prior run's failure of a document will recur: it failed at this very listed
    ``version`` under this very attempt ``key``, for a reason that is not transient (nor
    ``empty``: ``NOT_REPEATED_REASONS``). A prior
    failure without a version (an older run, a store that reports none) is never trusted."""
    return (
        prior_error is not None
        and prior_error.reason not in NOT_REPEATED_REASONS
        and version is not None
        and prior_error.source_version == version
        and prior_error.attempt_key == key
    )


def before_reading(
    version: str | None,
    prior: PriorState | None,
    fingerprint: str,
    prior_error: PriorError | None = None,
    attempt_key: str = "",
) -> str:
    """The fate of a listed document before a byte of it is read: ``UNCHANGED`` (carried
    over unread), ``KNOWN_FAILED`` (its prior failure repeated unread), else ``NEW`` or
    ``CHANGED`` (read)."""
    if unchanged_by_listing(version, prior, fingerprint):
        return UNCHANGED
    if is_known_failure(prior_error, version, attempt_key):
        return KNOWN_FAILED
    if prior is None or prior.rows == 0:
        return NEW
    return CHANGED
