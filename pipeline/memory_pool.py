"""The Arrow memory pool of chunkmill's commands.

Arrow allocates every table and buffer of a run from one pool, chosen when the process first
allocates: mimalloc by default in pyarrow's wheels. Measured on a run's shape (many small
tables built, written and dropped), jemalloc returns freed memory to the system sooner, so a
run's peak RSS is lower at the same speed (docs/operations.md, "Memory"). ``choose()``
names it in ``ARROW_DEFAULT_MEMORY_POOL`` before pyarrow is imported, unless the user named
a pool there already; Beam's SDK worker processes inherit the variable, so they use the
same pool.

Only the chunkmill command chooses (``chunkmill.pipeline.cli``): a program that imports
chunkmill keeps its own pool.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
# The pool of chunkmill's commands, where pyarrow's wheels have it (Linux: on other systems
# Arrow would warn that it lacks it, and the default stays).
POOL = "jemalloc"


def choose(environ: MutableMapping[str, str] = os.environ, platform: str = sys.platform) -> str:
    """The pool this process will use: the user's ``ARROW_DEFAULT_MEMORY_POOL`` when set,
    else ``POOL`` on Linux (set in ``environ``), else pyarrow's default ("")."""
    if VARIABLE in environ:
        return environ[VARIABLE]
    if not platform.startswith("linux"):
        return ""
    environ[VARIABLE] = POOL
    return POOL
