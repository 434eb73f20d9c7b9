"""Per-document cost of running extraction isolated (chunkmill/isolation.py) on small PDFs.

    python -m benchmarks.isolation [--docs N] [--repeat R]
    python -m benchmarks.isolation --chunking [--repeat R]

Generates N small PDFs (1-3 pages, fpdf2 from the test extra), extracts each in-process and
through a warm ``IsolatedExtractor``, interleaved, R times, and prints the median time per
document of each and their difference; then the bare round trip (a no-op extractor in the
child: the floor of the overhead, less noisy than a difference of two timings on a busy
machine); and the time to start a child.

``--chunking``: for Markdown documents of several sizes, the time to decode and chunk one
(``process_document``, default config) in-process and in a warm child (``ChunkInChild``):
what sending the bytes over and the rows back costs, which sets
``chunkmill.document.CHUNK_IN_CHILD_ABOVE``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from chunkmill.extract import Extracted, extract
from chunkmill.isolation import IsolatedExtractor


def make_pdfs(n: int) -> list[bytes]:
    from fpdf import FPDF

    out = []
    for i in range(n):
        pdf = FPDF()
        pdf.set_font("Helvetica", size=11)
        for page in range(1 + i % 3):
            pdf.add_page()
            pdf.multi_cell(0, 6, f"Document {i} page {page}. " + "Some words of prose. " * 40)
        out.append(bytes(pdf.output()))
    return out


def echo(path: str, data: bytes, **options: object) -> Extracted:
    """No parsing at all: what is left is the cost of the round trip itself."""
    return Extracted(text=f"{len(data)} bytes", format="text")


def markdown(size: int) -> bytes:
    """A Markdown document of about ``size`` bytes: sections of a few paragraphs of prose."""
    section = "## A heading\n\n" + ("Some words of prose, in a sentence. " * 12 + "\n\n") * 3
    return (section * (size // len(section) + 1)).encode()[:size]


def chunking(repeat: int) -> None:
    from chunkmill import document, ids
    from chunkmill.config import Chunking, ChunkingConfig, Limits
    from chunkmill.isolation import Extractor
    from chunkmill.items import WorkItem

    config = ChunkingConfig()
    here = Chunking(config)
    extractor = Extractor(Limits())
    in_child = document.ChunkInChild(extractor.call, config)
    print("size      in-process   in a child   (median ms per document)")
    for size in (16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20):
        data = markdown(size)
        item = WorkItem(ids.doc_id("/a.md"), "/a.md", len(data))
        sha = ids.sha256_hex(data)
        in_child(item, data, sha, None)  # warm: the child builds its Chunking once
        times: dict[str, list[float]] = {"here": [], "child": []}
        for _ in range(repeat):
            t = time.perf_counter()
            document.process_document(item, data, here)
            times["here"].append(time.perf_counter() - t)
            t = time.perf_counter()
            in_child(item, data, sha, None)
            times["child"].append(time.perf_counter() - t)
        a, b = (statistics.median(times[k]) * 1e3 for k in ("here", "child"))
        print(f"{size >> 10:>6} KB  {a:>10.1f}   {b:>10.1f}")
    extractor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunking", action="store_true")
    args = parser.parse_args()
    if args.chunking:
        chunking(args.repeat)
        return
    pdfs = make_pdfs(args.docs)
    iso = IsolatedExtractor(timeout_seconds=60, memory_mb=2048)
    started = time.perf_counter()
    iso("warm.pdf", pdfs[0])
    startup = time.perf_counter() - started
    inproc, isolated = [], []
    for _ in range(args.repeat):
        for runs, fn in ((inproc, extract), (isolated, iso)):
            t = time.perf_counter()
            for data in pdfs:
                fn("a.pdf", data)
            runs.append((time.perf_counter() - t) / len(pdfs))
    iso.close()
    # By its module's name: the child cannot import a function of this __main__.
    from benchmarks.isolation import echo as bare_echo

    with IsolatedExtractor(timeout_seconds=60, memory_mb=2048, target=bare_echo) as bare:
        bare("warm.pdf", pdfs[0])
        trips = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            for data in pdfs:
                bare("a.pdf", data)
            trips.append((time.perf_counter() - t) / len(pdfs))
    a, b = statistics.median(inproc) * 1e3, statistics.median(isolated) * 1e3
    size = statistics.mean(len(p) for p in pdfs) / 1024
    print(f"{args.docs} PDFs of {size:.1f} KB on average, median of {args.repeat} runs")
    print(f"in-process   {a:.3f} ms/doc")
    print(f"isolated     {b:.3f} ms/doc")
    print(f"overhead     {b - a:.3f} ms/doc ({(b - a) / a:.0%})")
    print(f"round trip   {statistics.median(trips) * 1e3:.3f} ms/doc (no-op extractor)")
    print(f"child start  {startup * 1e3:.0f} ms (once per DoFn instance, and after a kill)")


if __name__ == "__main__":
    main()
