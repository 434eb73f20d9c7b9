"""The code blocks of README.md and docs/*.md, and what each declares it needs.

Every fenced block of a command language (``sh``, ``bash``, ``python``, ``sql``) is preceded
by a comment saying how the docs test handles it::

    <!-- docs-test: run -->                 run it in the page's sandbox (exit 0)
    <!-- docs-test: run exit=2 -->          run it; it must exit 2
    <!-- docs-test: run pg -->              run it with DATABASE_URL set (PostgreSQL)
    <!-- docs-test: output -->              a ``text`` block: the output of the run block before
    <!-- docs-test: file=NAME -->           written to NAME in the sandbox, for a later block
    <!-- docs-test: make -->                make targets: their recipe is read with
                                            ``make -n`` and its chunkmill lines are run
    <!-- docs-test: parse: WHY -->          cannot run here (WHY): each chunkmill command is
                                            parsed and validated by the real parsers (chunkmill's
                                            and Beam's); Python is compiled

A page whose commands go on from another's declares it once, near its top::

    <!-- docs-test-page: continues README.md -->

and its blocks run in a copy of that page's sandbox after that page's blocks, with the same
database. Blocks of a page run in order in one sandbox: a temporary working folder, with
``chunkmill`` on PATH, ``CORPUS`` a glob of a few documents of the bundled sample corpus,
and, for ``pg`` blocks, ``DATABASE_URL`` a fresh PostgreSQL database with pgvector. Data
blocks (``text``, ``json``, ``toml``) need no comment. A command block without one, a fenced
block without a language, or a command in an indented block fails the test.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

COMMAND_LANGUAGES = {"sh", "bash", "python", "sql"}
DATA_LANGUAGES = {"text", "json", "toml"}
MODES = {"run", "output", "file", "make", "parse"}

_SPEC = re.compile(r"<!--\s*docs-test:\s*(?P<spec>.*?)\s*-->")
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
# A line of an indented (unfenced) block that is a command: it would escape the test.
_INDENTED_COMMAND = re.compile(r"^    (\$ )?(chunkmill|python3?|make|pip|duckdb|psql|source)\b")


@dataclass(frozen=True)
class Spec:
    mode: str
    exit: int = 0
    pg: bool = False
    file: str | None = None
    reason: str = ""

    @classmethod
    def parse(cls, text: str) -> Spec:
        head, _, reason = text.partition(":")
        words = head.split()
        if not words:
            raise ValueError(f"empty docs-test comment: {text!r}")
        mode, options = words[0], words[1:]
        kwargs: dict = {"reason": reason.strip()}
        if mode.startswith("file="):
            mode, kwargs["file"] = "file", mode.removeprefix("file=")
        if mode not in MODES:
            raise ValueError(f"unknown docs-test mode {mode!r} (modes: {sorted(MODES)})")
        for option in options:
            if option == "pg":
                kwargs["pg"] = True
            elif option.startswith("exit="):
                kwargs["exit"] = int(option.removeprefix("exit="))
            else:
                raise ValueError(f"unknown docs-test option {option!r}")
        if mode == "parse" and not kwargs["reason"]:
            raise ValueError("a parse-only block says why it cannot run: parse: WHY")
        return cls(mode, **kwargs)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    spec: Spec | None
    problems: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start, language = i, fence.group("lang")
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        problems: list[str] = []
        spec = None
        before = lines[start - 1] if start else ""
        found = _SPEC.fullmatch(before.strip())
        if found:
            try:
                spec = Spec.parse(found.group("spec"))
            except ValueError as e:
                problems.append(str(e))
        if not language:
            problems.append("a fenced block without a language")
        elif language in COMMAND_LANGUAGES and spec is None and not problems:
            problems.append(f"a {language} block without a <!-- docs-test: ... --> comment")
        elif language not in COMMAND_LANGUAGES | DATA_LANGUAGES:
            problems.append(f"language {language!r} has no handling in the docs test")
        if spec and spec.mode == "output" and language != "text":
            problems.append("an output block is a text block")
        text = "\n".join(lines[start + 1 : end]) + "\n"
        blocks.append(Block(page, start + 1, language, text, spec, tuple(problems)))
        i = end + 1
    return blocks


def indented_commands(page: Path) -> list[str]:
    """Lines of indented code blocks that are commands (they must be fenced, so they run)."""
    found, fenced = [], False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and _INDENTED_COMMAND.match(line):
            found.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


def commands(text: str) -> list[list[str]]:
    """The shell commands of a block as word lists (continuations joined, comments and
    ``...`` placeholders dropped)."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        words = [w for w in shlex.split(line, comments=True) if w != "..."]
        if words:
            out.append(words)
    return out


def chunkmill_argv(words: list[str]) -> list[str] | None:
    """The arguments of a ``chunkmill`` (or ``python -m chunkmill``) command, else None."""
    if words[:1] == ["chunkmill"]:
        return words[1:]
    if words[:3] in (["python", "-m", "chunkmill"], ["python3", "-m", "chunkmill"]):
        return words[3:]
    return None


_CONTINUES = re.compile(r"<!--\s*docs-test-page:\s*continues\s+(\S+)\s*-->")


def continues(page: Path) -> Path | None:
    """The page whose sandbox this page's blocks go on in, if it names one."""
    found = _CONTINUES.search(page.read_text())
    return ROOT / found.group(1) if found else None
