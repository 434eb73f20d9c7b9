"""Regenerate the PDFs of the bundled sample corpus (pipeline/sample_corpus/pdfs/).

Usage:
    python scripts/make_sample_pdfs.py            # write the PDFs, then verify them
    python scripts/make_sample_pdfs.py --check    # verify only; exit 1 if anything is off

The output is byte-deterministic: the creation date, producer and document
metadata are fixed, and fpdf2 derives the file /ID from the content and that
date. Running the script twice yields files with identical SHA-256 (with the
same fpdf2 and zlib versions). Only the core Helvetica font is used, so all text
here must be Latin-1; it is in fact plain ASCII so that extraction compares exactly.

Files written:
    memo.pdf                 1 page
    quarterly-report.pdf     3 pages, different text and several paragraphs per page
    onboarding-checklist.pdf 2 pages
    broken.pdf               the first 40% of the bytes of a valid PDF (corrupt on purpose)

Verification uses pypdf: each good PDF must have the expected page count and
each page's extracted text must equal the text written to it, up to whitespace;
broken.pdf must fail to read or extract.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fpdf import FPDF

OUT_DIR = Path(__file__).resolve().parents[1] / "pipeline" / "sample_corpus" / "pdfs"
CREATION_DATE = datetime(2024, 5, 20, 9, 0, 0, tzinfo=timezone.utc)
PRODUCER = "chunkmill scripts/make_sample_pdfs.py"
BROKEN_FRACTION = 0.4


@dataclass(frozen=True)
class Page:
    heading: str
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class Doc:
    filename: str
    title: str
    pages: tuple[Page, ...]
    footer: str | None = None  # "{page}" and "{pages}" are filled in per page


MEMO = Doc(
    filename="memo.pdf",
    title="Memo: changes to the on-call rotation",
    pages=(
        Page(
            heading="Memo: changes to the on-call rotation",
            paragraphs=(
                "To: data platform team. From: engineering manager, data platform. "
                "Date: 20 May 2024.",
                "From the first of July the primary on-call shift moves from one week "
                "to four days, Monday to Thursday, with a separate three-day shift from "
                "Friday to Sunday. Weekend shifts count double towards the rotation, so "
                "nobody takes more than one weekend in six.",
                "The change follows the spring survey, in which most of the team said "
                "that the last two days of a full week were the hardest, and that a "
                "page on Sunday night followed by a normal Monday was the single worst "
                "part of the job.",
                "Handover moves to 10:00 on Monday and Friday. The secondary rotation "
                "is unchanged. Please check the new calendar by the end of the month "
                "and swap shifts with each other directly if a date does not work; "
                "there is no need to ask me first.",
            ),
        ),
    ),
)

REPORT = Doc(
    filename="quarterly-report.pdf",
    title="Data platform quarterly report, Q1 2024",
    footer="Data platform quarterly report, Q1 2024 - page {page} of {pages}",
    pages=(
        Page(
            heading="1. Summary and reliability",
            paragraphs=(
                "The first quarter was the busiest in the platform's history. Event "
                "volume grew by 23 percent over the previous quarter, to an average "
                "of 41,000 events per second, with peaks of 96,000 during the March "
                "sales campaign.",
                "We met the ingest objective of 99.5 percent of events queryable within "
                "30 minutes in January and February. In March we missed it, at 99.31 "
                "percent, almost entirely because of the forty-minute manifest service "
                "slowdown on the 14th and the retry storm that followed it.",
                "There were eleven pages in the quarter, down from nineteen in the "
                "previous one. Seven were ingest lag during traffic peaks, which the "
                "higher autoscaler ceiling introduced in March should prevent.",
                "Median time to acknowledge a page was four minutes, and every page was "
                "acknowledged within the fifteen-minute target. Median time to mitigate "
                "was 26 minutes. The longest incident, the manifest slowdown, took 71 "
                "minutes from first alert to full recovery, of which about half was "
                "spent recognising that the extra load came from our own clients.",
                "The dead-letter topic parked 0.03 percent of events, slightly more than "
                "last quarter. Nearly all of them came from two producers that shipped "
                "schema changes before registering them; both now register as part of "
                "their deploy pipelines.",
            ),
        ),
        Page(
            heading="2. Cost and capacity",
            paragraphs=(
                "Total platform spend was 8 percent under budget. Storage grew in line "
                "with event volume; compute grew more slowly, because the compactor "
                "now merges small files before the nightly jobs read them, and those "
                "jobs finish about a third faster as a result.",
                "The largest single cost remains the raw landing bucket. Moving files "
                "older than 35 days to the cold tier, completed in February, cut its "
                "monthly cost by 41 percent, at the price of slower backfills for older "
                "dates.",
                "Compactor nodes are the capacity risk for the coming quarter. Their "
                "local disk was above 85 percent on nine nights, each time because of "
                "spill directories left behind by cancelled runs. A fix shipped in the "
                "May release.",
                "Query volume on the shared engine rose by 30 percent, driven mostly by "
                "scheduled dashboards. Thirty dashboards refresh every five minutes "
                "although their data changes once a day; we have asked their owners to "
                "refresh hourly at most, which would save an estimated tenth of engine "
                "capacity at no cost to anyone.",
            ),
        ),
        Page(
            heading="3. Plans for next quarter",
            paragraphs=(
                "Three projects are committed: a rewrite of error messages in batchctl "
                "and the job runtime, a dry-run mode for backfills that shows which "
                "partitions will change, and the move of the compactor to the new "
                "cluster before the old one loses support in January.",
                "A fourth project runs as a two-week prototype: indexing our runbooks, "
                "design notes and FAQs into clean chunks with stable ids, so that the "
                "help bot can answer questions from them. We will decide in July "
                "whether to continue.",
                "The retry library described in the retries design note will be "
                "adopted by the platform's own clients first. We will report the "
                "effect on retry traffic in the next quarterly report.",
                "Finally, the team will grow by two engineers in the second quarter. "
                "Onboarding follows the new checklist, and each new member shadows the "
                "on-call rotation for a week before joining it, so the rotation itself "
                "will not change until August.",
            ),
        ),
    ),
)

CHECKLIST = Doc(
    filename="onboarding-checklist.pdf",
    title="New team member checklist",
    footer="New team member checklist - page {page} of {pages}",
    pages=(
        Page(
            heading="Week one: access and orientation",
            paragraphs=(
                "- Request membership of data-platform-users and platform-oncall.",
                "- Follow the getting-started guide and run the hello job in staging.",
                "- Read the glossary, the FAQ and the on-call runbook for ingest.",
                "- Meet your onboarding buddy every day for fifteen minutes.",
                "- Join the weekly sync and the incident review, and listen.",
            ),
        ),
        Page(
            heading="Week two: first contributions",
            paragraphs=(
                "- Fix one small issue labelled good-first-task and get it reviewed.",
                "- Improve one runbook section that confused you in week one.",
                "- Shadow the primary on-call for two days, including one handover.",
                "- Pair on a backfill plan with a senior engineer, without running it.",
                "- Write down three things that were harder than they should have been "
                "and share them with your manager.",
            ),
        ),
    ),
)

# The valid document whose first 40% becomes broken.pdf.
BROKEN_SOURCE = Doc(
    filename="broken.pdf",
    title="Incident summary (truncated)",
    pages=(
        Page(
            heading="Incident summary: compactor disk full",
            paragraphs=(
                "This document was cut short on purpose. The sample corpus includes it "
                "to show that a corrupt input becomes one row in the errors table while "
                "the rest of the run carries on.",
                "If you can read this sentence, the truncation did not work.",
            ),
        ),
    ),
)

GOOD_DOCS = (MEMO, REPORT, CHECKLIST)


class _PDF(FPDF):
    def __init__(self, footer_template: str | None) -> None:
        super().__init__(orientation="P", unit="mm", format="A4")
        self._footer_template = footer_template
        self._total_pages = 0

    def footer(self) -> None:
        if not self._footer_template:
            return
        self.set_y(-15)
        self.set_font("Helvetica", size=8)
        text = self._footer_template.format(page=self.page_no(), pages=self._total_pages)
        self.cell(0, 10, text, align="C")


def footer_text(doc: Doc, page_no: int) -> str | None:
    if doc.footer is None:
        return None
    return doc.footer.format(page=page_no, pages=len(doc.pages))


def render(doc: Doc) -> bytes:
    """Render ``doc`` with one Page per PDF page; raise if any page overflows."""
    pdf = _PDF(doc.footer)
    pdf._total_pages = len(doc.pages)
    pdf.set_creation_date(CREATION_DATE)
    pdf.set_producer(PRODUCER)
    pdf.set_creator(PRODUCER)
    pdf.set_title(doc.title)
    pdf.set_author("chunkmill sample corpus (synthetic)")
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_margins(20, 20, 20)
    for expected_no, page in enumerate(doc.pages, start=1):
        for text in (page.heading, *page.paragraphs):
            text.encode("ascii")  # core fonts are Latin-1; we keep to ASCII
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=15)
        pdf.multi_cell(0, 8, page.heading, align="L")
        pdf.ln(4)
        pdf.set_font("Helvetica", size=11)
        for para in page.paragraphs:
            pdf.multi_cell(0, 6, para, align="L")
            pdf.ln(3)
        if pdf.page_no() != expected_no:
            raise RuntimeError(f"{doc.filename}: page {expected_no} overflowed")
    return bytes(pdf.output())


def expected_page_text(doc: Doc, page_no: int) -> str:
    page = doc.pages[page_no - 1]
    parts = [page.heading, *page.paragraphs]
    footer = footer_text(doc, page_no)
    if footer:
        parts.append(footer)
    return " ".join(parts)


def _norm(text: str) -> str:
    return " ".join(text.split())


def verify_good(path: Path, doc: Doc) -> list[str]:
    from pypdf import PdfReader

    problems = []
    reader = PdfReader(path)
    if len(reader.pages) != len(doc.pages):
        return [f"{path.name}: {len(reader.pages)} pages, expected {len(doc.pages)}"]
    for i, page in enumerate(reader.pages, start=1):
        got, want = _norm(page.extract_text()), _norm(expected_page_text(doc, i))
        if got != want:
            problems.append(f"{path.name} page {i}: text differs\n  got: {got!r}\n  want: {want!r}")
    return problems


def verify_broken(path: Path) -> list[str]:
    from pypdf import PdfReader

    problems = []
    for strict in (False, True):
        try:
            reader = PdfReader(path, strict=strict)
            texts = [p.extract_text() for p in reader.pages]
        except Exception:  # any failure is the point
            continue
        problems.append(
            f"{path.name}: parsed without error (strict={strict}), {len(texts)} page(s)"
        )
    return problems


def build_all() -> dict[str, bytes]:
    files = {doc.filename: render(doc) for doc in GOOD_DOCS}
    valid = render(BROKEN_SOURCE)
    files[BROKEN_SOURCE.filename] = valid[: int(len(valid) * BROKEN_FRACTION)]
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify existing files only")
    args = parser.parse_args(argv)
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # broken.pdf warns loudly

    problems: list[str] = []
    files = build_all()
    if args.check:
        for name, data in files.items():
            path = OUT_DIR / name
            if not path.exists():
                problems.append(f"{name}: missing")
            elif path.read_bytes() != data:
                problems.append(f"{name}: differs from a fresh build; rerun without --check")
    else:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (OUT_DIR / name).write_bytes(data)

    for doc in GOOD_DOCS:
        if (OUT_DIR / doc.filename).exists():
            problems += verify_good(OUT_DIR / doc.filename, doc)
    if (OUT_DIR / BROKEN_SOURCE.filename).exists():
        problems += verify_broken(OUT_DIR / BROKEN_SOURCE.filename)

    for name, data in sorted(files.items()):
        print(f"{hashlib.sha256(data).hexdigest()}  {len(data):6d}  {name}")
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
