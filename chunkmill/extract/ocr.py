"""Text of PDF pages that have no text layer (scans, pictures of pages), by OCR.

The engine is RapidOCR on ONNX Runtime (the ``ocr`` extra, ``rapidocr-onnxruntime``), whose
wheel ships its models: it reads offline, and nothing is fetched at run time. It runs where
the PDF is parsed, in the parser child (``chunkmill.isolation``), so a page that takes too
long or too much memory costs its document a ``timeout`` or ``memory`` error, not the worker.
A page is rendered with PDFium at ``DPI`` (200: the recognition model reads words of a
12-point font best at about that size), its longest side capped at ``MAX_SIDE_PIXELS``.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Iterator, Sequence
from typing import Any

DISTRIBUTION = "rapidocr-onnxruntime"
MISSING = f"--ocr always needs an OCR engine: pip install 'chunkmill[ocr]' ({DISTRIBUTION})"
DPI = 200
# A poster-sized page at 200 dpi is tens of millions of pixels; past this side the page is
# rendered smaller, so one page's image stays under ~100 MB.
MAX_SIDE_PIXELS = 5000


@functools.cache
def available() -> bool:
    """Whether the OCR engine is installed and imports (OpenCV, which it needs, fails to
    import on a system without libGL): asked once per process, and only where a page needs
    OCR or ``--ocr always`` is given."""
    if importlib.util.find_spec("rapidocr_onnxruntime") is None:
        return False
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except Exception:
        return False
    return True


@functools.cache
def _engine() -> Any:
    """The engine, loaded once per process (about a second: its three models)."""
    from rapidocr_onnxruntime import RapidOCR

    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    return RapidOCR()


def read_pages(data: bytes, pages: Sequence[int], password: str | None = None) -> Iterator[str]:
    """The OCR'd text of each of ``pages`` (0-based) of the PDF ``data``, in order: lines
    top to bottom, each line's boxes left to right joined by a space."""
    import numpy as np

    from chunkmill.extract.pdf import open_pdfium

    engine = _engine()
    pdf = open_pdfium(data, password)
    try:
        for index in pages:
            page = pdf[index]
            try:
                width, height = page.get_size()
                scale = min(DPI / 72, MAX_SIDE_PIXELS / max(width, height, 1))
                image = page.render(scale=scale).to_pil().convert("RGB")
            finally:
                page.close()
            found, _ = engine(np.asarray(image))
            del image
            yield _lines(found or [])
    finally:
        pdf.close()


def _lines(found: list[Any]) -> str:
    """RapidOCR's ``[box, text, score]`` results as text: boxes whose vertical middles lie
    within half a box height of each other form one line."""
    boxes = []
    for box, text, _score in found:
        ys = [point[1] for point in box]
        xs = [point[0] for point in box]
        top, bottom = min(ys), max(ys)
        boxes.append(((top + bottom) / 2, bottom - top, min(xs), str(text)))
    boxes.sort()
    lines: list[list[tuple[float, str]]] = []
    middle = height = 0.0
    for mid, size, left, text in boxes:
        if lines and abs(mid - middle) <= max(size, height) / 2:
            lines[-1].append((left, text))
        else:
            lines.append([(left, text)])
            middle, height = mid, size
    return "\n".join(" ".join(text for _, text in sorted(line)) for line in lines)
