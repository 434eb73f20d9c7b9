"""`chunkmill plan` end to end: it predicts what `run` then does, and writes nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from apache_beam.io.filesystems import FileSystems

from chunkmill.pipeline.cli import main

pytestmark = pytest.mark.slow


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def plan(capsys, *args: str) -> tuple[dict[str, int], dict[str, set[str]], str]:
    """Runs `chunkmill plan`; returns its counts, the documents it names, and its output."""
    assert main(["plan", *args]) == 0
    out = capsys.readouterr().out
    m = re.search(
        r"listed (\d+)  new (\d+)  changed (\d+)  unchanged (\d+)  removed (\d+)  "
        r"failed before (\d+)",
        out,
    )
    assert m, out
    names = ("listed", "new", "changed", "unchanged", "removed", "failed")
    counts = dict(zip(names, map(int, m.groups()), strict=True))
    named: dict[str, set[str]] = {"new": set(), "changed": set(), "removed": set(), "failed": set()}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word in named:
            named[word].add(rest.strip())
    return counts, named, out


def estimate(text: str) -> int:
    """The tokens to embed a plan's output estimates (0 when it has nothing to read)."""
    if "0 tokens to embed (nothing to read)" in text:
        return 0
    m = re.search(r"estimate   ~([\d,]+) tokens in ~([\d,]+) chunks to embed \(likely", text)
    assert m, text
    return int(m.group(1).replace(",", ""))


def test_plan_predicts_what_run_reads_and_writes_nothing(
    chunkmill, corpus, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out"
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    start, faq, new = (
        corpus / "guides" / "start.md",
        corpus / "guides" / "faq.md",
        corpus / "new.md",
    )
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    faq.unlink()
    new.write_text("# New\n\nA document that did not exist last night.\n")

    before = tree(tmp_path)
    opened: list[str] = []
    real_open = FileSystems.open

    def spy(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(FileSystems, "open", spy)
    counts, named, text = plan(capsys, "--input", str(corpus / "**"), "--output", str(out))
    by_plan = list(opened)
    assert tree(tmp_path) == before, "plan wrote something"
    assert by_plan and not [p for p in by_plan if p.startswith(str(corpus))], "plan read a doc"
    assert all(p.startswith(str(out)) for p in by_plan)  # LATEST and the prior manifest
    broken = str(corpus / "broken.pdf")  # failed last night and unchanged: not read
    assert counts == {
        "listed": 6, "new": 1, "changed": 1, "unchanged": 3, "removed": 1, "failed": 1
    }  # fmt: skip
    assert named == {
        "new": {str(new)}, "changed": {str(start)}, "removed": {str(faq)}, "failed": {broken}
    }  # fmt: skip
    tokens_planned = estimate(text)
    assert "markdown from 2 prior documents" in text

    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    c = second.counts
    assert c["docs_read"] == counts["new"] + counts["changed"]
    assert c["docs_carried_over"] == counts["unchanged"]
    assert c["docs_failed_not_retried"] == counts["failed"]
    assert c["docs_removed"] == counts["removed"] and c["docs_listed"] == counts["listed"]
    # The documents the run processed or failed are exactly the ones the plan named.
    old = {(r["source_uri"], r["content_sha256"]) for r in first.rows("manifest")}
    redone = [
        r for r in second.rows("manifest") if (r["source_uri"], r["content_sha256"]) not in old
    ]
    retried = {r["source_uri"] for r in second.rows("errors") if r["attempted"]}
    assert {r["source_uri"] for r in redone} | retried == named["new"] | named["changed"]
    embedded = c["tokens_to_embed"]
    assert embedded / 2 <= tokens_planned <= embedded * 2


def test_plan_after_a_config_change_calls_every_document_changed(chunkmill, corpus, capsys):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    counts, _, _ = plan(
        capsys,
        "--input",
        str(corpus / "**"),
        "--output",
        str(corpus.parent / "out"),
        "--strategy",
        "sentence",
    )
    assert counts["changed"] == 5 and counts["unchanged"] == 0
    # broken.pdf failed under the old config; the new one may read it, so it is new again.
    assert counts["new"] == 1 and counts["failed"] == 0


def test_plan_of_a_first_run_creates_no_output(corpus, tmp_path, capsys):
    out = tmp_path / "nothing-here"
    counts, named, text = plan(capsys, "--input", str(corpus / "**"), "--output", str(out))
    assert counts["new"] == 6 and counts["listed"] == 6
    # No prior to learn rates from: each format's documents are read and chunked instead.
    assert "markdown from a sample of 2 of its 2 documents to read, read and chunked" in text
    assert "6 documents read for the estimate; nothing was written" in text
    assert not out.exists()


def test_plan_predicts_the_tokens_run_embeds_pdfs_included(chunkmill, tmp_path, capsys):
    """Plan, then run, three nights: a first run over Markdown and generated PDFs, a night of
    edits, a night with nothing changed. Plan's tokens are within 2x of what the run embeds,
    and its documents to read are the run's ``docs_read``."""
    from tests.e2e.conftest import prose
    from tests.helpers import make_pdf

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(6):
        (root / f"guide{i}.md").write_text(f"# Guide {i}\n\n" + prose(f"guide{i}", 4 + 2 * i))
    for i in range(3):
        pages = [prose(f"report{i}p{p}", 3) for p in range(1 + i)]
        (root / f"report{i}.pdf").write_bytes(make_pdf(pages))
    (root / "broken.pdf").write_bytes(make_pdf(["x " * 50])[:300])
    out = tmp_path / "out"
    args = ("--input", str(root / "**"), "--output", str(out))

    def night(run_id: str) -> tuple[dict[str, int], int, dict]:
        counts, _, text = plan(capsys, *args)
        return counts, estimate(text), chunkmill(*args[:2], run_id=run_id).counts

    for run_id in ("first", "edited", "quiet"):
        if run_id == "edited":
            g = root / "guide3.md"
            g.write_text(g.read_text().replace("guide3 paragraph 2:", "guide3 paragraph II:"))
            g = root / "guide5.md"
            g.write_text(g.read_text() + "\n\n" + prose("appendix", 2))
            (root / "guide0.md").unlink()
            (root / "new.md").write_text("# New\n\n" + prose("newdoc", 5))
            (root / "report9.pdf").write_bytes(make_pdf([prose("late", 4), prose("later", 4)]))
        counts, planned, ran = night(run_id)
        assert counts["new"] + counts["changed"] == ran["docs_read"], run_id
        assert counts["failed"] == ran["docs_failed_not_retried"], run_id
        embedded = ran["tokens_to_embed"]
        if run_id == "quiet":
            assert planned == embedded == 0
        else:
            assert embedded > 0 and embedded / 2 <= planned <= embedded * 2, (run_id, planned)


def lined_pdf(text: str, lines: int, seed: int) -> bytes:
    """A one-page PDF of ``text`` drawn over with ``lines`` random lines: its text is a tiny
    share of its bytes (about 0.002 tokens a byte, 1/36 of the PDF default rate)."""
    import random

    from fpdf import FPDF

    rng = random.Random(seed)
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, text)
    for _ in range(lines):
        pdf.line(*(rng.uniform(0, 200) for _ in range(4)))
    return bytes(pdf.output())


def test_plan_of_a_first_run_over_pdfs_samples_them(chunkmill, tmp_path, capsys):
    """No prior, PDFs whose text per byte is far from the default: plan reads, extracts and
    chunks a sample of them (the broken one included: it embeds nothing) and is within 2x
    of what the run embeds."""
    from tests.e2e.conftest import prose

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(10):
        (root / f"drawing{i}.pdf").write_bytes(
            lined_pdf(prose(f"d{i}", 1 + i % 3), 2000 + 300 * i, i)
        )
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    args = ("--input", str(root / "**"), "--output", str(tmp_path / "out"))
    counts, _, text = plan(capsys, *args)
    assert counts["new"] == 11 and not (tmp_path / "out").exists()
    planned = estimate(text)
    embedded = chunkmill(*args[:2], run_id="first").counts["tokens_to_embed"]
    assert embedded > 0 and embedded / 2 <= planned <= embedded * 2, (planned, embedded)
    assert (
        "pdf from a sample of 11 of its 11 documents to read, read and chunked for this estimate"
        in text
    )
    assert "(1 failed, priced as 0)" in text
    assert "11 documents read for the estimate; nothing was written" in text
