"""ChunkCorpus's progress figures: Beam counters in the `chunkmill` namespace (what a
runner's UI shows) and the process-wide cells a local progress line reads."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline

from chunkmill.items import SourceFile
from chunkmill.pipeline import progress
from chunkmill.transforms.core import ChunkCorpus
from chunkmill.transforms.counts import METRICS_NAMESPACE
from tests.helpers import SMALL, paragraphs
from tests.transform.test_core import FakeStore

STORE = {
    "/c/a.md": paragraphs("alpha", "beta"),
    "/c/b.md": paragraphs("gamma", "delta", "epsilon"),
    "/c/empty.txt": b"",  # processed, no chunk: empty is no failure
}
MISSING = SourceFile("/c/vanished.md", 123)  # listed, then gone: read_failed


def test_counters_and_process_wide_cells_count_listing_reads_and_outcomes():
    before = progress.process_snapshot()
    p = TestPipeline(runner="FnApiRunner")
    files = [SourceFile(u, len(b)) for u, b in sorted(STORE.items())] + [MISSING]
    _ = {
        "files": p | "Files" >> beam.Create(files),
        "prior": p | "Prior" >> beam.Create([]),
    } | ChunkCorpus(config=SMALL, read_bytes=FakeStore(STORE))
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))[
            "counters"
        ]
    }
    read_bytes = sum(len(b) for b in STORE.values())
    assert counters["docs_listed"] == 4
    assert counters["bytes_listed"] == read_bytes + 123
    assert counters["docs_read"] == 4  # the vanished one was tried
    assert counters["bytes_read"] == read_bytes
    assert counters["docs_processed"] == 3 and counters["docs_failed"] == 1
    assert progress.process_snapshot() - before == progress.Snapshot(
        listed=4, listed_bytes=read_bytes + 123, done=4, failed=1, read=3, read_bytes=read_bytes
    )
