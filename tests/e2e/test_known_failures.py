"""A document that failed costs nothing on the nights after, until it changes or is retried."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


def test_a_corrupt_pdf_is_read_again_only_when_rewritten_or_retried(chunkmill, corpus):
    pdf = corpus / "report.pdf"
    night = lambda run_id, *flags: chunkmill("--input", str(corpus / "**"), *flags, run_id=run_id)  # noqa: E731
    good = night("n0")
    rows = {r["chunk_id"] for r in good.rows("manifest") if r["source_uri"] == str(pdf)}
    assert rows

    pdf.write_bytes(pdf.read_bytes()[:200])  # corrupted in place
    broke = night("n1")
    (error,) = [e for e in broke.rows("errors") if e["source_uri"] == str(pdf)]
    assert error["attempted"] and error["source_version"]
    listed = broke.counts["docs_listed"]

    quiet = night("n2")  # nothing changed: the corrupt PDF is not read
    c = quiet.counts
    assert c["docs_read"] == 0 and c["docs_carried_over"] == listed - 2  # broken.pdf too
    assert c["docs_failed"] == 2 and c["docs_failed_not_retried"] == 2
    (again,) = [e for e in quiet.rows("errors") if e["source_uri"] == str(pdf)]
    assert again == {**error, "attempted": False}
    kept = {r["chunk_id"] for r in quiet.rows("manifest") if r["source_uri"] == str(pdf)}
    assert kept == rows  # its rows from before it broke are kept, as by any failure
    assert quiet.counts["chunks_removed"] == 0

    st = pdf.stat()
    os.utime(pdf, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: a new version
    touched = night("n3")
    assert touched.counts["docs_read"] == 1 and touched.counts["docs_failed_not_retried"] == 1
    (retried,) = [e for e in touched.rows("errors") if e["source_uri"] == str(pdf)]
    assert retried["attempted"] and retried["reason"] == error["reason"]

    forced = night("n4", "--retry-failed")  # both failures are read again
    assert forced.counts["docs_read"] == 2 and forced.counts["docs_failed_not_retried"] == 0
    assert all(e["attempted"] for e in forced.rows("errors"))
