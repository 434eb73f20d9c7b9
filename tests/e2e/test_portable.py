"""The whole pipeline through Beam's portable job path (what FlinkRunner submits through):
``PortableRunner --job_endpoint=embed`` runs the job service in this process and the SDK
harness over the Fn API (LOOPBACK environment), so the graph is serialised to a runner API
proto and every DoFn, coder and side input crosses the portability boundary. Two runs, the
second incremental, must write exactly what the default local runner writes."""

from __future__ import annotations

import pytest

from chunkmill import schema
from tests.e2e.conftest import prose

pytestmark = pytest.mark.slow

PORTABLE = ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"]

# What legitimately differs between two runs of the same input: names, paths and when they
# started (the chain records the latest start on the run's walk back).
RUN_SPECIFIC = {"run_id", "started_at", "output", "tables", "chain"}


def comparable(report: dict) -> dict:
    kept = {k: v for k, v in report.items() if k not in RUN_SPECIFIC}
    kept["prior"] = {"mode": report["prior"]["mode"], "has_prior": bool(report["prior"]["run_id"])}
    return kept


def test_portable_runner_writes_what_the_local_runner_writes(chunkmill, corpus, tmp_path):
    (corpus / "long.md").write_text("# Long\n\n" + prose("long", 40))
    outputs = {"local": tmp_path / "local", "portable": tmp_path / "portable"}
    args = {"local": [], "portable": PORTABLE}

    def both(step: int) -> dict:
        return {
            name: chunkmill(
                "--input", str(corpus / "**"), *args[name], output=out, run_id=f"{name}-{step}"
            )
            for name, out in outputs.items()
        }

    first = both(1)
    # An edit, a deletion and a new file, so the second run carries over, re-chunks, removes
    # and adds: every join of the diff has work on both sides.
    start = corpus / "guides" / "start.md"
    start.write_text(start.read_text().replace("start paragraph 3:", "start paragraph III:"))
    (corpus / "guides" / "faq.md").unlink()
    (corpus / "new.txt").write_text(prose("fresh", 4))
    second = both(2)

    for runs in (first, second):
        for table in schema.TABLES:
            assert runs["portable"].rows(table) == runs["local"].rows(table), table
        assert comparable(runs["portable"].report) == comparable(runs["local"].report)
    c = second["portable"].counts
    assert c["docs_carried_over"] > 0 and c["docs_processed"] == 2 and c["docs_removed"] == 1
    assert c["chunks_removed"] > 0 and second["portable"].report["prior"]["run_id"] == "portable-1"
    assert (outputs["portable"] / "LATEST").read_text().strip() == "portable-2"
    for table in ("chunks", "manifest", "errors", "removed"):
        assert second["portable"].rows(table), table
