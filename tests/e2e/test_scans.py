"""``chunkmill run`` on scanned and encrypted PDFs: --ocr and --pdf-password-env end to end,
through the parser child of a real run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pypdf
import pytest

from chunkmill import schema
from chunkmill.pipeline.cli import main
from tests.e2e.conftest import assert_schemas
from tests.unit.test_extract_scans import LINES, encrypted_pdf, scanned_pdf, text_pdf

pytestmark = pytest.mark.slow


def test_a_run_reads_scans_and_opens_pdfs_with_the_password_variable(
    tmp_path: Path, chunkmill, monkeypatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scan.pdf").write_bytes(scanned_pdf())
    (docs / "locked.pdf").write_bytes(encrypted_pdf("s3cr3t-pw"))
    args = ("--input", f"{docs}/*", "--pdf-password-env", "CORPUS_PDF_PASSWORD")
    never = chunkmill(*args, "--ocr", "never", run_id="r1")
    errors = {r["source_uri"].rsplit("/", 1)[1]: r for r in never.rows("errors")}
    assert errors["scan.pdf"]["reason"] == "no_text"
    assert errors["locked.pdf"]["reason"] == "encrypted"
    assert "--pdf-password-env" in errors["locked.pdf"]["message"]

    # Setting the variable changes the attempt key: the failed documents are tried again.
    monkeypatch.setenv("CORPUS_PDF_PASSWORD", "s3cr3t-pw")
    opened = chunkmill(*args, "--ocr", "never", run_id="r2")
    assert [r["text"] for r in opened.rows("chunks")] == ["Secret plans."]
    (scan_error,) = opened.rows("errors")
    assert (scan_error["reason"], scan_error["attempted"]) == ("no_text", True)

    run = chunkmill(*args, run_id="r3")  # --ocr auto: the scan is read
    assert run.counts["docs_failed"] == 0, run.rows("errors")
    chunks = {r["source_uri"].rsplit("/", 1)[1]: r["text"] for r in run.rows("chunks")}
    found = chunks["scan.pdf"].lower()
    assert [w for line in LINES for w in line.lower().split() if w not in found] == []
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"s3cr3t-pw" not in path.read_bytes(), path


@pytest.mark.parametrize("value", ["s3cr3t pw", "pw=1", "$VAR"])
def test_the_password_flag_takes_a_variable_name_only(value: str, capsys) -> None:
    code = main(["run", "--output", "out", "--pdf-password-env", value])
    err = capsys.readouterr().err
    assert code == 2 and "--pdf-password-env" in err and value not in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _pages_of(*pdfs: bytes) -> bytes:
    """One PDF of the pages of ``pdfs``, in order."""
    writer = pypdf.PdfWriter()
    for data in pdfs:
        for page in pypdf.PdfReader(io.BytesIO(data)).pages:
            writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _extracted_by(rows: list[dict]) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = {}
    for row in rows:
        found.setdefault(row["source_uri"].rsplit("/", 1)[1], set()).add(row["extracted_by"])
    return found


def as_schema_4(run: Path) -> None:
    """Rewrites ``run``'s manifest as chunkmill wrote it at schema version 4 (no
    extracted_by column), with its _SUCCESS recording the new files' sizes."""
    success = json.loads((run / "_SUCCESS").read_text())
    for entry in success["tables"]["manifest"]:
        path = run / entry["path"]
        table = pq.read_table(path)
        table = table.drop_columns(["extracted_by"]).replace_schema_metadata(
            {**table.schema.metadata, b"chunkmill.schema_version": b"4"}
        )
        pq.write_table(table, path, write_page_checksum=True)
        entry["bytes"] = path.stat().st_size
    (run / "_SUCCESS").write_text(json.dumps(success))


def test_rows_say_what_read_their_text_and_carry_it_over(tmp_path: Path, chunkmill) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    typed = text_pdf("A typed page about apples and their orchards.")
    (docs / "typed.pdf").write_bytes(typed)
    (docs / "scan.pdf").write_bytes(scanned_pdf())
    (docs / "mixed.pdf").write_bytes(_pages_of(typed, scanned_pdf()))  # one chunk over both
    (docs / "notes.md").write_text("# Notes\n\nPlain Markdown, without pages.\n")
    args = ("--input", f"{docs}/*")

    first = chunkmill(*args, run_id="r1")
    assert first.counts["docs_failed"] == 0, first.rows("errors")
    assert_schemas(first)
    expected = {"typed.pdf": {"text"}, "scan.pdf": {"ocr"}, "mixed.pdf": {"text+ocr"}}
    expected["notes.md"] = {None}
    assert _extracted_by(first.rows("manifest")) == expected
    assert _extracted_by(first.rows("chunks")) == expected

    # Nothing changed: every row is carried over as it was.
    second = chunkmill(*args, run_id="r2")
    assert second.counts["docs_carried_over"] == 4
    drop = ("is_new",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in second.rows("manifest")] == [
        {k: v for k, v in r.items() if k not in drop} for r in first.rows("manifest")
    ]

    # A prior written before the column existed is read; its rows carry over as null.
    as_schema_4(second.dir)
    (docs / "typed-2.pdf").write_bytes(text_pdf("A second typed page, on pears."))
    third = chunkmill(*args, run_id="r3")
    assert third.report["prior"]["run_id"] == "r2"
    assert third.counts["docs_carried_over"] == 4
    assert_schemas(third)
    found = _extracted_by(third.rows("manifest"))
    assert found == {name: {None} for name in expected} | {"typed-2.pdf": {"text"}}
    removed = pq.read_table(third.dir / "removed").schema
    assert removed.field("extracted_by") == schema.REMOVED.field("extracted_by")
