"""Versions of chunkmill and the libraries whose behaviour shapes its output."""

from __future__ import annotations

import functools
from importlib import metadata


@functools.cache
def library_versions() -> str:
    """E.g. ``"chunkmill 0.1.0; pypdf 7.1.0"``; recorded on every errors/ row."""
    parts = []
    for dist in ("chunkmill", "pypdf"):
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
