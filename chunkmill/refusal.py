"""A run that refuses to publish, on purpose, in one line.

Some failures are decisions, not bugs: too many documents failed (``--max-error-ratio``), the
run would remove most of the corpus (``--max-removed-ratio``), a prior manifest file is
corrupt. Each stops the run before ``_SUCCESS`` with a ``RunRefused`` whose message says what
is wrong and how to go on. Runners re-raise a DoFn's exception as its own type, wrapped in
their own error, or only as text inside another (a worker's traceback), so the line travels
between two fixed markers and ``refusal_line`` finds it again in whatever text arrives.
"""

from __future__ import annotations

import re

_OPEN = "<<chunkmill refused>> "
_CLOSE = " <</chunkmill refused>>"
_LINE = re.compile(re.escape(_OPEN) + r"(.*?)" + re.escape(_CLOSE))


class RunRefused(RuntimeError):
    """The run stops unpublished; ``line`` is the one line the CLI prints."""

    def __init__(self, line: str) -> None:
        # A runner may rebuild the exception from its own augmented text (Beam:
        # ``type(e)(f"{e} [while running ...]")``): the line inside the markers is kept.
        marked = _LINE.search(line)
        self.line = " ".join((marked.group(1) if marked else line).split())  # one line
        super().__init__(f"{_OPEN}{self.line}{_CLOSE}")

    def __reduce__(self):  # pickled by multi-process runners: rebuilt from the line alone
        return (type(self), (self.line,))


def refusal_line(e: BaseException) -> str | None:
    """The line of a ``RunRefused`` that failed the run, found in ``e``, the exceptions it
    was raised from, or their text; ``None`` when the failure was not a refusal."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [e]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, RunRefused):
            return current.line
        line = line_in_text(str(current))
        if line is not None:
            return line
        stack += [current.__cause__, current.__context__]
    return None


def line_in_text(text: str) -> str | None:
    """The line of a ``RunRefused`` quoted in ``text`` (a relayed worker log, a traceback),
    or ``None``."""
    match = _LINE.search(text)
    return match.group(1) if match else None
