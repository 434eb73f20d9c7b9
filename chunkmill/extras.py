"""Which of chunkmill's optional extras a location needs.

Cloud storage is an extra (``chunkmill[gcp]``, ``chunkmill[aws]``) rather than a dependency:
Beam imports every cloud client it finds installed when it is imported, which costs a run
on local disk most of a second of start-up (docs/design.md, "Why the shapes are what they
are"). A location whose store is not installed is a usage error naming the extra, before
anything runs.
"""

from __future__ import annotations

import importlib.util

# scheme -> (extra, the module its store cannot work without)
_NEEDS = {
    "gs": ("gcp", "google.cloud.storage"),
    "s3": ("aws", "boto3"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or half-installed
        return False


def missing_extra(location: str) -> str | None:
    """None if ``location``'s store is installed, else a sentence saying which extra to
    install."""
    scheme, sep, _ = location.partition("://")
    if not sep or scheme.lower() not in _NEEDS:
        return None
    extra, module = _NEEDS[scheme.lower()]
    if _installed(module):
        return None
    return f"{scheme}:// needs chunkmill's {extra} extra: pip install 'chunkmill[{extra}]'"
