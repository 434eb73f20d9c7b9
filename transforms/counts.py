"""What a run counts: Beam counters and the process-wide progress cells in the one metrics
namespace, the counts of the run report, and ``PerBundle``, the base of the steps that gather
their counts (and the values they send to a grouping) over a bundle instead of one element
each."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.execution import MetricsEnvironment
from apache_beam.metrics.metricbase import MetricName
from apache_beam.transforms import window

from chunkmill.items import Verdict

# One metrics namespace for the whole project.
METRICS_NAMESPACE = "chunkmill"

# Progress counters, with stable names in the one namespace so Dataflow's and Flink's UIs
# show them while a job runs: docs_listed and bytes_listed (the listing side of the join,
# ``doc_plan``), docs_read and bytes_read, and docs_processed, docs_carried_over and
# docs_failed (their sum is the documents done; ``process_docs``).
# The same figures for a local run's progress line (pipeline/progress.py). A bundle's counters
# reach the launching process only when the bundle's stage ends, but a process-wide metric
# cell is updated in place, so a thread of the launcher reads it live when the DoFns run in
# that process (DirectRunner/FnApiRunner in memory). Distributions, because only they can be
# process-wide and add up: count is documents, sum is bytes (or failures).
PROGRESS_LISTED = "progress_listed"  # one value per listed document: its size
PROGRESS_READ = "progress_read"  # one value per document read: its size
PROGRESS_DONE = "progress_done"  # one value per document done: 1 if it failed, else 0
LISTED_PROGRESS = Metrics.distribution(METRICS_NAMESPACE, PROGRESS_LISTED, process_wide=True)
READ_PROGRESS = Metrics.distribution(METRICS_NAMESPACE, PROGRESS_READ, process_wide=True)
DONE_PROGRESS = Metrics.distribution(METRICS_NAMESPACE, PROGRESS_DONE, process_wide=True)


def update_each(progress: str, values: Iterable[int]) -> None:
    """One update per value of the process-wide progress distribution named ``progress``
    (``PROGRESS_LISTED``, ...), the one its ``Metrics.distribution`` above updates: its cell
    found once, then updated in a loop that stays in C (a night updates one per listed
    document and one per carried-over document, several times faster so)."""
    name = MetricName(METRICS_NAMESPACE, progress)
    cell = MetricsEnvironment.process_wide_container().get_distribution(name)
    deque(map(cell.update, values), maxlen=0)


# Tags of the outputs every ``PerBundle`` step may have: the run report's ``(name, n)`` counts,
# and the verdicts on prior documents, ``(part, verdicts)``.
COUNTS = "counts"
VERDICTS = "verdicts"

# How many values a DoFn holds before emitting them grouped by key: verdicts (~100 bytes
# each): enough that a key's values travel in few elements, small enough to bound the buffer.
_HOLD = {VERDICTS: 20_000}


def _pack_verdicts(held: list[Verdict]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(v) for v in held)  # plain tuples: encoded natively


_PACK: dict[str, Callable[[list[Any]], Any]] = {VERDICTS: _pack_verdicts}


def in_global_window(outputs: Iterable[Any]) -> Iterator[Any]:
    """What a DoFn's ``process`` would yield (values, ``TaggedOutput``), as its
    ``finish_bundle`` must yield it: each value in the global window."""
    for out in outputs:
        if isinstance(out, beam.pvalue.TaggedOutput):
            yield beam.pvalue.TaggedOutput(out.tag, window.GlobalWindows.windowed_value(out.value))
        else:
            yield window.GlobalWindows.windowed_value(out)


class PerBundle(beam.DoFn):
    """Outputs gathered over a bundle instead of emitted one by one: counts for the run
    report (tagged ``COUNTS``; no count travels as an element per row or per document), and
    values bound for a grouping, held per key and emitted as one element per key when the
    buffer fills or the bundle ends: verdicts (tagged ``VERDICTS``: ``(part, verdicts)``).
    Beam's cost is per element, so this takes most of it off the rows."""

    def start_bundle(self) -> None:
        self._tally: Counter[str] = Counter()
        self._held: dict[str, dict[str, list[Any]]] = {tag: {} for tag in _HOLD}
        self._held_n: Counter[str] = Counter()

    def _hold(self, tag: str, key: str, value: Any):
        """Holds ``value`` under ``key``; yields the held values of ``tag`` when full."""
        self._held[tag].setdefault(key, []).append(value)
        self._held_n[tag] += 1
        if self._held_n[tag] >= _HOLD[tag]:
            yield from self._release(tag, lambda v: v)

    def _release(self, tag: str, wrap):
        pack = _PACK[tag]
        for key, held in sorted(self._held[tag].items()):
            yield beam.pvalue.TaggedOutput(tag, wrap((key, pack(held))))
        self._held[tag], self._held_n[tag] = {}, 0

    def finish_bundle(self):
        for tag in _HOLD:
            yield from self._release(tag, window.GlobalWindows.windowed_value)
        for name, n in sorted(self._tally.items()):
            yield beam.pvalue.TaggedOutput(COUNTS, window.GlobalWindows.windowed_value((name, n)))


def finish_counts(counts: dict[str, int]) -> dict[str, Any]:
    """The run report's counts: every key present, failures, skips and listing errors broken
    down by reason. Skipped objects are not listed documents: ``docs_listed`` is still
    ``docs_processed + docs_carried_over + docs_failed``."""
    keys = (
        "docs_listed",
        "docs_read",
        "docs_processed",
        "docs_carried_over",
        "docs_failed",
        "docs_failed_not_retried",  # of docs_failed: failed before, unchanged, not read
        "docs_removed",
        # Of docs_processed: read whole and holding no text (0 bytes, whitespace only): no
        # chunk. Of those, docs_emptied had rows in the prior manifest, now removed
        # (document_emptied): they count with docs_removed against --max-removed-ratio.
        "docs_empty",
        "docs_emptied",
        "docs_prior",  # documents with rows in the prior manifest
        "docs_kept_unlisted",
        "docs_skipped",
        "listing_errors",
        "chunks_total",
        "chunks_new_occurrences",
        "chunks_to_embed",
        "chunks_removed",
        "occurrences_added",  # rows of added/: occurrences the prior state lacked
        "hashes_retired",  # rows of retired/: hashes no current occurrence has any more
        "tokens_to_embed",
        # Of the chunks to embed, those longer than the model's input window, where chunkmill
        # knows it (the run report's chunking.model_window); 0 where it does not.
        "chunks_over_model_window",
    )
    out: dict[str, Any] = {k: int(counts.get(k, 0)) for k in keys}
    out["failed_by_reason"] = {
        k.split(":", 1)[1]: int(v) for k, v in sorted(counts.items()) if k.startswith("failed:")
    }
    for prefix, name in (
        ("skipped:", "skipped_by_reason"),
        ("listing_error:", "listing_errors_by_reason"),
    ):
        out[name] = {
            k.split(":", 1)[1]: int(v) for k, v in sorted(counts.items()) if k.startswith(prefix)
        }
    return out


def _sum_counts(_: None, *counted: list[tuple[str, int]]) -> dict[str, Any]:
    """Lists of ``(name, n)`` pairs → the run report's counts (``finish_counts``)."""
    total: Counter[str] = Counter()
    for counts in counted:
        for name, n in counts:
            total[name] += n
    return finish_counts(total)


@beam.typehints.with_output_types(dict[str, Any])
class SumCounts(beam.PTransform):
    """The ``(name, n)`` counts of every step → the run report's counts (``finish_counts``):
    one dict, in one step that reads each step's counts as a side input, once they are all
    there. A step sends a few counts per bundle, so they are few; a grouping (a Flatten and a
    CombineGlobally) would cost the run three fused stages where this costs one."""

    def expand(
        self, counted: tuple[beam.PCollection[tuple[str, int]], ...]
    ) -> beam.PCollection[dict[str, Any]]:
        return (
            counted[0].pipeline
            | "Once" >> beam.Create([None])
            | "Sum" >> beam.Map(_sum_counts, *map(beam.pvalue.AsList, counted))
        )
