"""Every command in README.md and docs/*.md runs here, so none can go stale (tests/docs/blocks.py
says how a block declares what it needs), and docs/cli.md and docs/tables.md name exactly
what the parsers and the schemas define."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from chunkmill import schema
from tests.docs import parsers
from tests.docs.blocks import (
    PAGES,
    ROOT,
    Block,
    chunkmill_argv,
    commands,
    continues,
    indented_commands,
    read_blocks,
)
from tests.pg import fresh_database, postgres  # noqa: F401 (a fixture)

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (pyproject.toml installs tomli there)
    import tomli as tomllib

SAMPLE_CORPUS = ROOT / "pipeline" / "sample_corpus"  # what chunkmill run reads by default
BLOCKS = [b for page in PAGES for b in read_blocks(page)]
RUN_PAGES = [
    p for p in PAGES if any(b.spec and b.spec.mode in ("run", "make") for b in read_blocks(p))
]
PARSED = [b for b in BLOCKS if b.spec and b.spec.mode == "parse"]
# A few documents of the bundled corpus: Markdown, a PDF, and the PDF broken on purpose.
CORPUS_FILES = ("runbooks", "pdfs/memo.pdf", "pdfs/broken.pdf")


def test_every_block_declares_how_it_is_tested():
    problems = [f"{b.where}: {p}" for b in BLOCKS for p in b.problems]
    problems += [f"{line}: fence it so it runs" for p in PAGES for line in indented_commands(p)]
    assert not problems, "\n".join(problems)


def test_every_flag_of_every_command_is_in_the_cli_page_and_every_flag_there_exists():
    page = (ROOT / "docs" / "cli.md").read_text()
    # The prose and tables; the blocks' flags are checked by running them (some are wrong on
    # purpose, to show the error).
    prose = re.sub(r"^```.*?^```", "", page, flags=re.M | re.S)
    documented = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", prose))
    defined: set[str] = set()
    missing = []
    for command in parsers.commands():
        flags = parsers.flags(parsers.parser_of(command))
        defined.update(flags)
        missing += [f"chunkmill {' '.join(command)} {f}" for f in flags if f not in documented]
        name = " ".join(command)
        assert f"`chunkmill {name}" in page, f"docs/cli.md has no section on chunkmill {name}"
    assert not missing, "not in docs/cli.md:\n" + "\n".join(missing)
    beam = set(parsers.flags(parsers.beam_parser()))
    unknown = documented - defined - beam - {"--version", "--help"}
    assert not unknown, f"docs/cli.md documents flags nothing defines: {sorted(unknown)}"


def test_the_tables_page_names_every_table_and_column():
    page = (ROOT / "docs" / "tables.md").read_text()
    for table, fields in schema.TABLES.items():
        assert f"OUTPUT/runs/RUN_ID/{table}/" in page, f"{table} missing from the layout"
        for name in fields.names:
            assert f"`{name}`" in page, f"column {table}.{name} is not documented"


@pytest.mark.parametrize("block", PARSED, ids=[b.where for b in PARSED])
def test_a_block_that_cannot_run_here_is_checked_as_far_as_it_can_be(block: Block):
    # Each says why it cannot run (its comment); what can be checked here is: chunkmill's
    # arguments by its own and Beam's parsers, make targets by make -n, extras and packages
    # by pyproject.toml and this environment, Python modules by import, Python by compiling.
    if block.language == "python":
        compile(block.text, block.where, "exec")
        return
    checked = [check_command(words) for words in commands(block.text)]
    assert any(checked), f"{block.where}: nothing in it was checked"


def check_command(words: list[str]) -> bool:
    """Check one command of a block that is not run; False for a shell assignment."""
    argv = chunkmill_argv(words)
    if argv is not None:
        parsers.validate(argv)
    elif words[0] == "make":
        venv = Path(sys.executable).parent.parent
        subprocess.run(
            ["make", "-n", "-C", str(ROOT), *words[1:], f"VENV={venv}"],
            capture_output=True,
            check=True,
        )
    elif words[:2] == ["pip", "install"]:
        check_pip_install(words[2:])
    elif words[:2] in (["python", "-m"], ["python3", "-m"]):
        assert importlib.util.find_spec(words[2]), f"no module {words[2]}"
    elif len(words) == 1 and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        return False  # a variable for the commands after it
    else:
        raise AssertionError(f"no check for {words}")
    return True


def check_pip_install(args: list[str]) -> None:
    """The extras named exist in pyproject.toml; a package named is one this environment has."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
        elif arg in ("--index-url", "--extra-index-url"):
            skip_next = True
        elif arg.startswith("-"):
            continue
        elif arg.startswith("."):
            named = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", arg)
            assert named, arg
            missing = set((named.group(1) or "").split(",")) - set(extras) - {""}
            assert not missing, f"pyproject.toml defines no extra {missing}"
        else:
            name = re.split(r"[=<>\[]", arg)[0]
            importlib.metadata.version(name)  # raises when it is not installed


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("corpus")
    for name in CORPUS_FILES:
        source, target = SAMPLE_CORPUS / name, root / name
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    return f"{root}/**"


def sandbox_env(corpus: str, database: str | None) -> dict[str, str]:
    env = dict(
        os.environ, CORPUS=corpus, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    )
    env.pop("DATABASE_URL", None)
    if database:
        env["DATABASE_URL"] = database
    return env


def normalise(text: str, sandbox: Path) -> str:
    """What differs between two runs of the same command: folders, run ids, times, rates."""
    text = text.replace(str(sandbox), "/home/me/chunkmill").replace(str(ROOT), "/home/me/chunkmill")
    text = re.sub(r"\d{8}T\d{6}Z(-\d+)?", "RUN_ID", text)
    text = re.sub(r"\b\d+(\.\d+)? s\b", "N s", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def matches(expected: str, actual: str) -> bool:
    """``expected`` in order in ``actual``, a ``...`` line standing for any lines."""
    parts = [
        re.escape(line) if line.strip() != "..." else r"(?:.*\n)*?"
        for line in expected.splitlines()
    ]
    pattern = "".join(p if p.startswith("(?:") else p + r"\n" for p in parts)
    return re.search(pattern, actual + "\n") is not None


_SQL = """import os, sys, psycopg
with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as c:
    c.execute(sys.stdin.read())
"""


def run_block(block: Block, sandbox: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    if block.language == "python":
        argv, stdin = [sys.executable, "-c", block.text], None
    elif block.language == "sql":
        argv, stdin = [sys.executable, "-c", _SQL], block.text
    else:
        argv, stdin = ["bash", "-e", "-o", "pipefail", "-c", block.text], None
    return subprocess.run(
        argv, cwd=sandbox, env=env, input=stdin, capture_output=True, text=True, timeout=600
    )


def make_recipe(block: Block) -> list[list[str]]:
    """The chunkmill and pytest lines of the make targets in the block, as ``make -n`` prints
    them with this interpreter's environment as the venv."""
    venv = Path(sys.executable).parent.parent
    recipe = []
    for words in commands(block.text):
        assert words[0] == "make", words
        shown = subprocess.run(
            ["make", "-n", "-C", str(ROOT), *words[1:], f"VENV={venv}", "OUT=out"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        ours = (f"{venv}/bin/chunkmill ", f"{venv}/bin/pytest")
        recipe += [shlex.split(line) for line in shown.splitlines() if line.startswith(ours)]
    return recipe


@dataclass
class Sandbox:
    folder: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory, corpus: str, request) -> Callable[[Path], Sandbox]:
    """Runs a page's blocks (once), in a sandbox of its own or in a copy of the sandbox of the
    page it continues; returns the sandbox as the blocks left it."""
    done: dict[Path, Sandbox] = {}

    def run(page: Path) -> Sandbox:
        if page in done:
            return done[page]
        blocks = read_blocks(page)
        folder = tmp_path_factory.mktemp(page.stem.lower())
        before = continues(page)
        if before is not None:
            earlier = run(before)
            shutil.copytree(earlier.folder, folder, dirs_exist_ok=True, symlinks=True)
            env = earlier.env
        else:
            database = None
            if any(b.spec and b.spec.pg for b in blocks):
                url = request.getfixturevalue("postgres")
                database = fresh_database(url, "docs_" + re.sub(r"\W", "_", page.stem.lower()))
            env = sandbox_env(corpus, database)
        run_blocks(blocks, folder, env)
        done[page] = Sandbox(folder, env)
        return done[page]

    return run


def run_blocks(blocks: list[Block], folder: Path, env: dict[str, str]) -> None:
    last: subprocess.CompletedProcess | None = None
    for block in blocks:
        started = time.monotonic()
        spec = block.spec
        if spec is None or spec.mode == "parse":
            continue  # data, or checked by the test above
        assert not spec.pg or "DATABASE_URL" in env, f"{block.where}: no database"
        if spec.mode == "file":
            (folder / str(spec.file)).write_text(block.text)
        elif spec.mode == "output":
            assert last is not None, f"{block.where}: an output block follows a run block"
            expected = normalise(block.text, folder)
            actual = normalise(last.stdout, folder)
            assert matches(expected, actual), f"{block.where} is not what it shows:\n{actual}"
        elif spec.mode == "make":
            for words in make_recipe(block):
                if words[0].endswith("/pytest"):
                    continue  # make test runs this suite: its recipe was read, not run again
                last = subprocess.run(
                    words, cwd=folder, env=env, capture_output=True, text=True, timeout=600
                )
                assert last.returncode == 0, f"{block.where}: {words}\n{last.stderr}"
        else:
            last = run_block(block, folder, env)
            assert last.returncode == spec.exit, (
                f"{block.where} exited {last.returncode}, not {spec.exit}:\n"
                f"{last.stdout}\n{last.stderr}"
            )
        print(f"{block.where}: {spec.mode} {time.monotonic() - started:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_the_commands_of_a_page_run(page: Path, sandboxes):
    sandboxes(page)


@pytest.mark.slow
def test_the_tables_page_names_every_count_of_a_real_run_report(sandboxes):
    page = ROOT / "docs" / "tables.md"
    out = sandboxes(page).folder / "out"  # the page's own run
    run_id = (out / "LATEST").read_text().strip()
    report = json.loads((out / "runs" / run_id / "_SUCCESS").read_text())
    text = page.read_text()
    for key in [*report, *report["counts"], *report["limits"]]:
        assert f"`{key}`" in text, f"_SUCCESS key {key} is not in docs/tables.md"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_between_the_pages_leads_somewhere():
    broken = []
    for page in PAGES:
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", file.read_text(), flags=re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_test_the_guarantees_page_cites_exists():
    page = (ROOT / "docs" / "guarantees.md").read_text()
    missing = []
    for path, names in re.findall(
        r"`(?:tests/)?((?:unit|e2e|transform|benchmarks)/[\w/]+\.py)((?:::\w+)*)`", page
    ):
        file = ROOT / "tests" / path
        if not file.exists():
            missing.append(path)
            continue
        for name in filter(None, names.split("::")):
            if f"def {name}(" not in file.read_text():
                missing.append(f"{path}::{name}")
    assert not missing, missing
