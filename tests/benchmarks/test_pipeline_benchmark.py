"""The end-to-end benchmark's machinery on a tiny corpus: every table row and every floor
line is printed. No timing is asserted (benchmarks never gate CI)."""

from __future__ import annotations

import re

import pytest

from benchmarks import pipeline, profiling


@pytest.mark.slow
def test_quick_benchmark_prints_every_row_and_floor(tmp_path, capsys):
    # Two memory scales, with the runner and worker measured apart: every kind of row, with
    # as few pipeline runs (each seconds of Beam start-up) as that takes.
    argv = ["--quick", "--scales", "1,2", "--memory-mp", "--work-dir", str(tmp_path)]
    assert pipeline.main(argv) == 0
    out = capsys.readouterr().out
    rows = [
        line
        for line in out.splitlines()
        if line.startswith("| ") and line.split(" | ")[0] not in ("| what", "| scale", "| run")
    ]
    labels = [line.split(" | ")[0].lstrip("| ") for line in rows]
    for expected in (
        "plain Python loop (floor): read, extract, chunk, hash, Parquet",
        "chunkmill run, 1 worker (in_memory)",
        "chunkmill run, multi_processing, 1 worker",
        "chunkmill run, multi_processing, 2 workers",
        "1x",
        "2x",
        "full run (no prior manifest)",
        "re-run, nothing changed",
    ):
        assert expected in labels, f"no row {expected!r} in:\n{out}"
    assert any(re.fullmatch(r"re-run, \d+ documents changed", label) for label in labels)
    floors = re.findall(r"^(PASS|FAIL|SKIP)  (.+)$", out, re.M)
    assert len(floors) == 5, out
    assert floors[3][1].startswith("(for reference) the worker process alone")
    # The incremental floor only applies to a full run of two minutes or more.
    assert floors[4][0] == "SKIP"
    # Every run was a real one: the pipeline rows report a positive throughput.
    for line in rows[:4]:
        assert float(line.split(" | ")[1]) > 0


def test_profile_charges_samples_to_the_innermost_known_stage():
    runner = "run_pipeline (apache_beam/runners/portability/fn_api_runner/fn_runner.py:138)"
    raw = [
        f"{runner};_ProcessDocuments.process (chunkmill/transforms/core.py:88);"
        "extract (chunkmill/extract/__init__.py:197);_pdf_text (chunkmill/extract/pdf.py:90);"
        "read (pypdf/_reader.py:10) 6",
        f"{runner};_ProcessDocuments.process (chunkmill/transforms/core.py:88);"
        "SectionChunker.split (chunkmill/chunking/section.py:5) 1",
        f"{runner};_MarkNew.process (chunkmill/transforms/core.py:120) 1",
        f"{runner};process_encoded (apache_beam/runners/worker/bundle_processor.py:247) 3",
        "<module> (chunkmill/__main__.py:3);<module> (apache_beam/io/iobase.py:1) 2",
        "_bootstrap (threading.py:995);_serve (grpc/_server.py:1) 1",
    ]
    summary = "\n".join(profiling.summarise(raw))
    assert "14 samples" in summary
    assert "| ProcessDocuments: extraction | 42.9% |" in summary
    assert "| ProcessDocuments: chunking | 7.1% |" in summary
    assert "| MarkNew | 7.1% |" in summary
    assert "| Beam: coders, shuffle, bundles | 21.4% |" in summary
    # An import outside the runner is start-up, whatever module it imports; another thread
    # outside it is the runner's.
    assert "| start-up: imports, graph construction | 14.3% |" in summary
    assert "| Beam: runner threads (gRPC, data plane) | 7.1% |" in summary
    assert "| `read (pypdf/_reader.py)` | 42.9% |" in summary
