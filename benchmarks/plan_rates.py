"""The default rates of `chunkmill plan` (pipeline/estimate.py DEFAULT_RATES, used when neither
the prior nor a sample prices a format), measured: tokens and chunks per byte of file, per
format, with the default chunking config, and the share of an edited document's tokens that
is embedded again (plan prices an edit as one chunk plus its bytes changed; this shows how
that compares). Plan against the run, night by night: ``benchmarks/plan_accuracy.py``.

    python -m benchmarks.plan_rates [--mixed 600] [PDF ...]

Corpora: the bundled sample corpus, ``--mixed`` documents of ``benchmarks/mixed_corpus.py``,
20 PDFs made by ``tests/helpers.make_pdf``, and any PDF paths given (real ones: their text
per byte is far lower than generated PDFs'). The edit share: each text document of the
sample corpus edited three ways (a word inserted in the middle, a paragraph appended, a
paragraph inserted a third of the way in), the new chunks' tokens over all its chunks'.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from chunkmill import document, ids
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.items import WorkItem
from chunkmill.pipeline.options import SAMPLE_CORPUS

_CHUNKING = Chunking(ChunkingConfig.create("auto"))


def _chunks(uri: str, data: bytes) -> list[dict]:
    out = document.process_document(WorkItem(ids.doc_id(uri), uri, len(data)), data, _CHUNKING)
    return out.occurrences if out.status == document.PROCESSED else []


def rates(name: str, docs: Iterable[tuple[str, bytes]]) -> list[str]:
    """One line per format: documents, bytes, tokens per byte, chunks per KB."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for uri, data in docs:
        rows = _chunks(uri, data)
        if rows:
            s = sums[rows[0]["doc_format"]]
            s[0], s[1] = s[0] + 1, s[1] + len(data)
            s[2] += sum(r["token_count"] for r in rows)
            s[3] += len(rows)
    return [
        f"{name:<10} {fmt:<9} docs {n:>4}  bytes {b:>9}  tokens/byte {t / b:.4f}  "
        f"chunks/KB {c / b * 1024:.3f}"
        for fmt, (n, b, t, c) in sorted(sums.items())
    ]


_EDITS = {
    "word": lambda t: t[: t.find(" ", len(t) // 2)] + " edited" + t[t.find(" ", len(t) // 2) :],
    "append": lambda t: t + "\n\nAn added closing paragraph with a few words of its own.\n",
    "insert": lambda t: (
        t[: t.find("\n\n", len(t) // 3)]
        + "\n\nAn inserted paragraph, new tonight, of a sentence or two.\n"
        + t[t.find("\n\n", len(t) // 3) :]
    ),
}


def edit_shares(docs: list[tuple[str, bytes]]) -> list[str]:
    lines = []
    for edit, apply in _EDITS.items():
        total = new = 0
        for uri, data in docs:
            old = {r["chunk_hash"] for r in _chunks(uri, data)}
            rows = _chunks(uri, apply(data.decode()).encode())
            total += sum(r["token_count"] for r in rows)
            new += sum(r["token_count"] for r in rows if r["chunk_hash"] not in old)
        lines.append(f"edit {edit:<7} share of tokens embedded again {new / total:.3f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixed", type=int, default=600, help="mixed-corpus documents")
    parser.add_argument("pdfs", nargs="*", help="real PDF files to measure too")
    args = parser.parse_args(argv)
    from benchmarks import mixed_corpus
    from tests.helpers import make_pdf

    sample = [(str(p), p.read_bytes()) for p in sorted(SAMPLE_CORPUS.rglob("*")) if p.is_file()]
    words = " ".join(f"word{j}" for j in range(40))
    made = [
        (f"/made/{i}.pdf", make_pdf([f"Paragraph {k}: {words}" for k in range(2 + i % 4)]))
        for i in range(20)
    ]
    lines = [
        *rates("sample", sample),
        *rates("mixed", ((d.name, d.data) for d in mixed_corpus.iter_documents(args.mixed))),
        *rates("make_pdf", made),
        *rates("given", ((p, Path(p).read_bytes()) for p in args.pdfs)),
        *edit_shares([(u, d) for u, d in sample if not u.endswith(".pdf")]),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
