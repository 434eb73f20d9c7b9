"""``chunkmill run`` on scanned and encrypted PDFs: --ocr and --pdf-password-env end to end,
through the parser child of a real run."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main
from tests.unit.test_extract_scans import LINES, encrypted_pdf, scanned_pdf

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
