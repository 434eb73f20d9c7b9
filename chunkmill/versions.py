"""Versions of chunkmill and the libraries whose behaviour shapes its output."""

from __future__ import annotations

import functools
from importlib import metadata


@functools.cache
def library_versions() -> str:
    """E.g. ``"chunkmill 0.1.0; pypdf 7.1.0; pypdfium2 5.15.2; ..."``; recorded on every
    errors/ row."""
    parts = []
    # Every library whose behaviour decides a document's text or its failure.
    # The OCR engine among them: a PDF that failed with no_text before it was installed
    # (``unknown``) is tried again once it is, as the attempt key holds these versions.
    parsers = (
        "pypdf",
        "pypdfium2",
        "beautifulsoup4",
        "lxml",
        "python-docx",
        "charset-normalizer",
        "rapidocr-onnxruntime",
    )
    for dist in ("chunkmill", *parsers):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} unknown")
    return "; ".join(parts)


def chunkmill_version() -> str:
    try:
        return metadata.version("chunkmill")
    except metadata.PackageNotFoundError:
        return "unknown"
