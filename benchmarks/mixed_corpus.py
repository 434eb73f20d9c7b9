"""A deterministic corpus of mixed formats for end-to-end benchmarks: Markdown, prose ``.txt``,
source code and PDFs, written to disk as it is generated (never held in memory).

    python -m benchmarks.mixed_corpus DIR --docs N [--seed S]

Document ``i`` depends only on ``(seed, i)``: its format, name, size and bytes (PDFs too: fpdf2
output with a fixed creation date and producer is byte-identical for the same content), so a
corpus is the same on every machine and a smaller corpus is a prefix of a larger one. Memory
use is that of one document, whatever ``N`` (100 or 1,000,000).

The mix, by document count (roughly what a company knowledge base holds):

=========  =====  ==========================================================================
format     share  what
=========  =====  ==========================================================================
markdown   45%    :mod:`benchmarks.corpus` documents (headings, lists, code fences, tables)
text       25%    prose ``.txt``: paragraphs of sentences, some hard-wrapped
code       20%    ``.py``, ``.js`` and ``.go`` files: functions with comments and docstrings
pdf        10%    1-4 pages of prose with a heading per page (fpdf2, core Helvetica font)
=========  =====  ==========================================================================

Sizes are log-normal per format, as in :mod:`benchmarks.corpus`. :func:`edit_documents`
rewrites a deterministic subset in place (new bytes, new modification time, same names): the
nightly "some documents changed" case.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from benchmarks import corpus as md

DEFAULT_SEED = 42

FORMATS = ("markdown", "text", "code", "pdf")
_FORMAT_WEIGHTS = (45, 25, 20, 10)
_CODE_LANGUAGES = ("py", "js", "go")

# Per-format size targets in bytes (log-normal median, clamped like benchmarks.corpus).
_TEXT_MEDIAN = 4_000
_CODE_MEDIAN = 3_000
_PDF_PAGES = (1, 2, 3, 4)
_PDF_PAGE_WEIGHTS = (40, 30, 20, 10)
# About what fits on an A4 page in 11 pt Helvetica with 20 mm margins.
_PDF_PAGE_CHARS = 2_600
_PDF_DATE = datetime(2024, 5, 20, 9, 0, 0, tzinfo=timezone.utc)
# After a cell, go back to the left margin on the next line (fpdf2 stays on the right).
_NEXT_LINE = {"align": "L", "new_x": "LMARGIN", "new_y": "NEXT"}


@dataclass(frozen=True)
class Document:
    name: str  # relative path, unique within the corpus; the extension decides the format
    format: str
    data: bytes


def _size(rng: random.Random, median: int) -> int:
    return min(max(int(rng.lognormvariate(math.log(median), 0.9)), md.MIN_DOC_BYTES), 40_000)


def _prose(writer: md._DocumentWriter, target: int) -> list[str]:
    """Paragraphs of plain sentences (no Markdown) adding up to about ``target`` characters."""
    rng, paragraphs, size = writer.rng, [], 0
    while size < target:
        n = rng.choice((1, 2, 3, 3, 4, 5, 6))
        words = []
        for _ in range(n):
            sentence = writer.words(max(3, int(rng.lognormvariate(2.5, 0.5))))
            sentence[0] = sentence[0][:1].upper() + sentence[0][1:]
            if rng.random() < 0.3:
                sentence[rng.randrange(len(sentence))] += ","
            words.append(" ".join(sentence) + rng.choice(".....?!"))
        paragraph = writer.flow(" ".join(words))
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
    return paragraphs


def _text(writer: md._DocumentWriter, target: int) -> str:
    return "\n\n".join(_prose(writer, target)) + "\n"


def _code(writer: md._DocumentWriter, target: int, language: str) -> str:
    rng, parts, size = writer.rng, [], 0
    if language == "py":
        parts.append(f'"""{writer.sentence()}"""\n\nimport os\nimport sys\n')
    elif language == "go":
        parts.append(f"// Package {writer.identifier()} {writer.sentence()}\npackage main\n")
    else:
        parts.append(f"// {writer.sentence()}\n'use strict';\n")
    while size < target:
        name = writer.identifier()
        args = [writer.identifier() for _ in range(rng.randint(0, 3))]
        body = []
        for _ in range(max(1, int(rng.lognormvariate(1.8, 0.6)))):
            var, other = writer.identifier(), writer.identifier()
            roll = rng.random()
            if roll < 0.2:
                body.append(("# " if language == "py" else "// ") + writer.sentence())
            elif roll < 0.4:
                body.append(
                    f"if {var} == {rng.randint(0, 99)}:"
                    if language == "py"
                    else f"if ({var} === {rng.randint(0, 99)}) {{ return {other}; }}"
                )
            elif language == "py":
                body.append(f"{var} = {other}.get('{writer.identifier()}', {rng.randint(0, 9)})")
            elif language == "go":
                body.append(f"{var} := {other}({rng.randint(0, 512)})")
            else:
                body.append(f"const {var} = await {other}({rng.randint(0, 512)});")
        if language == "py":
            doc = f'    """{writer.sentence()}"""\n'
            lines = "\n".join("    " + line for line in body)
            part = f"\n\ndef {name}({', '.join(args)}):\n{doc}{lines}\n    return None\n"
        elif language == "go":
            lines = "\n".join("\t" + line for line in body)
            params = ", ".join(f"{a} int" for a in args)
            part = f"\n// {name} {writer.sentence()}\nfunc {name}({params}) {{\n{lines}\n}}\n"
        else:
            lines = "\n".join("  " + line for line in body)
            signature = f"async function {name}({', '.join(args)})"
            part = f"\n/** {writer.sentence()} */\n{signature} {{\n{lines}\n}}\n"
        parts.append(part)
        size += len(part)
    return "".join(parts)


def _pdf(writer: md._DocumentWriter) -> bytes:
    from fpdf import FPDF  # only needed for PDFs; imported here so Markdown-only use needs none

    rng = writer.rng
    pdf = FPDF(orientation="P", unit="mm", format="A4")
    pdf.set_creation_date(_PDF_DATE)
    pdf.set_producer("chunkmill benchmarks/mixed_corpus.py")
    pdf.set_creator("chunkmill benchmarks/mixed_corpus.py")
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_margins(20, 20, 20)
    for _ in range(rng.choices(_PDF_PAGES, weights=_PDF_PAGE_WEIGHTS)[0]):
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=15)
        pdf.multi_cell(0, 8, _latin1(writer.phrase(2, 6).title()), **_NEXT_LINE)
        pdf.set_font("Helvetica", size=11)
        # A page's worth of prose; whatever overflows starts a new page, which is fine.
        for paragraph in _prose(writer, int(_PDF_PAGE_CHARS * rng.uniform(0.5, 0.9))):
            pdf.multi_cell(0, 6, _latin1(paragraph.replace("\n", " ")), **_NEXT_LINE)
            pdf.ln(3)
    return bytes(pdf.output())


def _latin1(text: str) -> str:
    # The core fonts cover Latin-1 only; the vocabulary's few other letters become "?".
    return text.encode("latin-1", "replace").decode("latin-1")


def document(i: int, seed: int = DEFAULT_SEED, *, edit: int = 0, vocab=None) -> Document:
    """Document ``i`` of the corpus for ``seed``; ``edit`` > 0 gives an edited version of it
    (same name and format, other content)."""
    vocab = vocab or _vocabulary(seed)
    rng = random.Random(f"chunkmill-bench-mixed:{seed}:{i}")
    fmt = rng.choices(FORMATS, weights=_FORMAT_WEIGHTS)[0]
    slug = "-".join(w for w in vocab.sample(rng, 2) if w.isascii()) or "doc"
    directory = rng.choice(md._DIRECTORIES)
    if edit:  # the name stays; the content comes from another stream
        rng = random.Random(f"chunkmill-bench-mixed:{seed}:{i}:edit{edit}")
    writer = md._DocumentWriter(rng, vocab)
    if fmt == "markdown":
        name = f"docs/{directory}/{slug}-{i:07d}.md"
        data = writer.document(md._document_size(rng)).encode("utf-8")
    elif fmt == "text":
        name = f"notes/{directory}/{slug}-{i:07d}.txt"
        data = _text(writer, _size(rng, _TEXT_MEDIAN)).encode("utf-8")
    elif fmt == "code":
        language = _CODE_LANGUAGES[i % len(_CODE_LANGUAGES)]
        name = f"src/{language}/{slug.replace('-', '_')}_{i:07d}.{language}"
        data = _code(writer, _size(rng, _CODE_MEDIAN), language).encode("utf-8")
    else:
        name = f"reports/{directory}/{slug}-{i:07d}.pdf"
        data = _pdf(writer)
    return Document(name, fmt, data)


_VOCABS: dict[int, md._Vocabulary] = {}


def _vocabulary(seed: int) -> md._Vocabulary:
    if seed not in _VOCABS:
        _VOCABS[seed] = md._Vocabulary(seed)
    return _VOCABS[seed]


def iter_documents(n_docs: int, seed: int = DEFAULT_SEED) -> Iterator[Document]:
    """Documents ``0 .. n_docs-1``, one at a time."""
    vocab = _vocabulary(seed)
    for i in range(n_docs):
        yield document(i, seed, vocab=vocab)


@dataclass
class CorpusStats:
    docs: int = 0
    bytes: int = 0
    by_format: dict[str, int] | None = None

    def add(self, doc: Document) -> None:
        self.docs += 1
        self.bytes += len(doc.data)
        self.by_format = self.by_format or dict.fromkeys(FORMATS, 0)
        self.by_format[doc.format] += 1


def write_corpus(
    out_dir: str, n_docs: int, seed: int = DEFAULT_SEED, *, start: int = 0
) -> CorpusStats:
    """Write documents ``start .. n_docs-1`` under ``out_dir`` (created), one file each."""
    stats = CorpusStats()
    vocab = _vocabulary(seed)
    for i in range(start, n_docs):
        doc = document(i, seed, vocab=vocab)
        _write(out_dir, doc)
        stats.add(doc)
    return stats


def extend_corpus(
    smaller: str, out_dir: str, n_small: int, n_docs: int, seed: int = DEFAULT_SEED
) -> None:
    """Make ``out_dir`` the ``n_docs`` corpus from ``smaller``, the ``n_small`` corpus of the
    same seed: its files are hard-linked (a smaller corpus is a prefix of a larger one), and
    only documents ``n_small ..`` are generated."""
    for root, _, files in os.walk(smaller):
        target = os.path.join(out_dir, os.path.relpath(root, smaller))
        os.makedirs(target, exist_ok=True)
        for name in files:
            os.link(os.path.join(root, name), os.path.join(target, name))
    write_corpus(out_dir, n_docs, seed, start=n_small)


def edit_documents(
    out_dir: str, n_docs: int, fraction: float, seed: int = DEFAULT_SEED, *, edit: int = 1
) -> list[str]:
    """Rewrite ``ceil(fraction * n_docs)`` documents of a corpus written by ``write_corpus``,
    spread evenly over it, with edited content; returns their names. Nothing else is touched."""
    count = max(1, math.ceil(fraction * n_docs)) if fraction > 0 else 0
    step = n_docs / count if count else 0
    names = []
    vocab = _vocabulary(seed)
    for k in range(count):
        doc = document(int(k * step), seed, edit=edit, vocab=vocab)
        _write(out_dir, doc)
        names.append(doc.name)
    return names


def _write(out_dir: str, doc: Document) -> None:
    path = os.path.join(out_dir, doc.name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Written beside and renamed over: a corpus may share files with a smaller one through
    # hard links (see ``extend_corpus``), and an edit must not reach through the link.
    staging = path + ".tmp"
    with open(staging, "wb") as f:
        f.write(doc.data)
    os.replace(staging, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.mixed_corpus",
        description="Write the mixed-format benchmark corpus as files.",
    )
    parser.add_argument("out_dir", help="directory to write the documents into")
    parser.add_argument("--docs", type=int, default=1_000, help="number of documents")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    stats = write_corpus(args.out_dir, args.docs, args.seed)
    formats = ", ".join(f"{k} {v}" for k, v in (stats.by_format or {}).items())
    print(f"wrote {stats.docs} documents ({stats.bytes:,} bytes; {formats}) under {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
