"""One run over the whole hostile corpus together with good documents: every good document
is chunked, every bad one is accounted for (listed = processed + carried over + failed), and
the run goes on. Then --max-error-ratio turns the same night into a failed, unpublished run."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main
from tests.e2e.conftest import assert_schemas, prose
from tests.helpers import make_pdf
from tests.hostile_corpus import cases

pytestmark = pytest.mark.slow

# Under the 50 MB single-line file, so that one is too_large from the listing: never read.
# (Its extraction is a unit case: tests/unit/test_extract_hostile.py.)
MAX_BYTES = 20 * 1024 * 1024


def good_documents() -> dict[str, bytes]:
    import docx

    memo = docx.Document()
    memo.add_heading("Memo", level=1)
    memo.add_paragraph(prose("memo", 2))
    docx_bytes = io.BytesIO()
    memo.save(docx_bytes)
    return {
        "good/guide.md": ("# Guide\n\n" + prose("guide", 4)).encode(),
        "good/notes.txt": prose("notes", 3).encode(),
        "good/tool.py": b"def main():\n    return 42\n",
        "good/report.pdf": make_pdf([prose("pageone", 2), prose("pagetwo", 2)]),
        "good/page.html": b"<html><body><h1>Page</h1><p>"
        + prose("html", 2).encode()
        + b"</p><script>var x = 1;</script></body></html>",
        "good/records.json": b'[{"id": 1, "title": "first record"}, {"id": 2, "title": "two"}]',
        "good/rows.csv": b"name,city\nAda,London\nBob,Paris\n",
        "good/index.rst": b"Title\n=====\n\nSome reStructuredText prose.\n",
        "good/memo.docx": docx_bytes.getvalue(),
    }


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    root = tmp_path / "hostile"
    for name, data in good_documents().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "bad").mkdir()
    for case in cases():
        (root / "bad" / case.name).write_bytes(case.data)
    return root


def test_hostile_corpus_run_accounts_for_every_document(chunkmill, hostile, tmp_path, capsys):
    args = ("--input", str(hostile / "**"), "--max-document-bytes", str(MAX_BYTES))
    run = chunkmill(*args, "--doc-timeout-seconds", "60", run_id="r1")
    assert_schemas(run)
    c = run.counts
    all_cases = cases(big_line_mb=0)
    listed = len(good_documents()) + len(all_cases)
    assert c["docs_listed"] == listed
    assert c["docs_processed"] + c["docs_carried_over"] + c["docs_failed"] == listed

    manifest = run.rows("manifest")
    chunked = {Path(r["source_uri"]).name for r in manifest}
    good = {Path(name).name for name in good_documents()}
    assert good <= chunked, good - chunked

    errors = {Path(r["source_uri"]).name: r for r in run.rows("errors")}
    # A document without bytes is no failure: it is empty, with no chunk (document.py).
    empty = {case.name for case in all_cases if case.reason == "empty"}
    assert empty and c["docs_empty"] == len(empty) and not empty & chunked
    expected_errors = {
        case.name: case.reason for case in all_cases if case.reason and case.name not in empty
    }
    expected_errors["big-line.txt"] = "too_large"
    assert {name: r["reason"] for name, r in errors.items()} == expected_errors
    assert errors["big-line.txt"]["stage"] == "read"
    assert errors["big-line.txt"]["content_sha256"] is None  # never read
    assert all(r["versions"] and "\n" not in r["message"] for r in errors.values())
    extracted = {case.name for case in all_cases if not case.reason} - {"big-line.txt"}
    assert extracted <= chunked, extracted - chunked
    assert c["docs_processed"] == len(good) + len(extracted) + len(empty)

    by_name: dict[str, list[dict]] = {}
    for r in manifest:
        by_name.setdefault(Path(r["source_uri"]).name, []).append(r)
    twin = {n: [r["chunk_hash"] for r in by_name[n]] for n in ("twin-lf.txt", "twin-crlf.txt")}
    assert twin["twin-lf.txt"] == twin["twin-crlf.txt"]
    assert {r["decode_lossy"] for r in by_name["cp1252.txt"]} == {True}
    assert {r["decode_lossy"] for r in by_name["notes.txt"]} == {False}
    assert {r["doc_format"] for r in by_name["page.html"]} == {"html"}
    assert {r["strategy"] for r in by_name["page.html"]} == {"section"}

    # The same night again: nothing good is redone, every bad document fails again; the
    # empty ones, with no row to carry them over, are read again (0 bytes each).
    again = chunkmill(*args, run_id="r2")
    c2 = again.counts
    assert c2["docs_carried_over"] == c["docs_processed"] - len(empty)
    assert c2["docs_processed"] == c2["docs_empty"] == len(empty)
    assert c2["docs_failed"] == c["docs_failed"]

    # Over --max-error-ratio: the run fails with one line and publishes nothing.
    output = tmp_path / "out"
    code = main(
        ["run", "--output", str(output), "--run-id", "r3", *args, "--max-error-ratio", "0.25"]
    )
    err = capsys.readouterr().err
    assert code == 2  # refused on purpose, as told: not a crash (1)
    failed = c["docs_failed"]
    line = f"{failed} of {listed} listed documents failed"
    assert f"chunkmill: run r3 failed: {line}" in err and "--max-error-ratio 0.25" in err
    assert not (output / "runs" / "r3" / "_SUCCESS").exists()
    assert (output / "LATEST").read_text().strip() == "r2"


def test_hanging_and_memory_hungry_parsers_cost_one_document_each(chunkmill, tmp_path, monkeypatch):
    """The pipeline's own extraction step, with a parser that hangs on one PDF and one that
    eats memory on another: both are killed by their budget and the run publishes."""
    from chunkmill import isolation
    from tests import isolation_targets

    monkeypatch.setattr(isolation, "extract", isolation_targets.hostile_extract)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "hang.pdf").write_bytes(b"HANG %PDF-1.4")
    (root / "alloc.pdf").write_bytes(b"ALLOCATE %PDF-1.4")
    (root / "good.pdf").write_bytes(make_pdf([prose("good", 2)]))
    (root / "good.md").write_text("# Good\n\n" + prose("markdown", 2))
    # 2 MB of one-line sections: half a million chunks, far over 64 MB once chunked.
    (root / "headings.md").write_text("# h\n" * 500_000)
    run = chunkmill(
        "--input",
        str(root / "*"),
        "--doc-timeout-seconds",
        "2",
        "--doc-memory-mb",
        "64",
        "--runner",
        "FnApiRunner",  # in this process, so the patched parser is the one the DoFn uses
        run_id="r1",
    )
    c = run.counts
    assert (c["docs_listed"], c["docs_processed"], c["docs_failed"]) == (5, 2, 3)
    errors = {Path(r["source_uri"]).name: r for r in run.rows("errors")}
    # Its chunking ran in the parser child, under the same budgets: memory, or time on a
    # machine too loaded to reach the memory budget within 2 s.
    chunking = errors.pop("headings.md")
    assert chunking["stage"] == "chunk" and chunking["reason"] in ("memory", "timeout")
    assert c["failed_by_reason"] == Counter(["timeout", "memory", chunking["reason"]])
    assert errors["hang.pdf"]["reason"] == "timeout" and "2 s" in errors["hang.pdf"]["message"]
    assert errors["alloc.pdf"]["reason"] == "memory"
    assert {Path(r["source_uri"]).name for r in run.rows("manifest")} == {"good.pdf", "good.md"}
