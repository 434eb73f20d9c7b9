"""mypy over the package as it is installed: ``python scripts/typecheck.py [mypy's arguments]``.

mypy names a file's module after its folders and follows neither setuptools' ``package-dir``
nor the editable install's finder, so on its own it would check ``pipeline/cli.py`` as
``pipeline.cli`` and find no file for ``chunkmill.pipeline.cli``. This hands mypy every file
of ``[tool.mypy] files`` under the name the package gives it (the ``package-dir`` table of
pyproject.toml), so each ``chunkmill.*`` import resolves to a file of this tree
(docs/packaging.md). Output and exit status are mypy's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mypy import util
from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def folder_packages(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """Each mapped folder and the package it is installed as (pipeline: chunkmill.pipeline)."""
    with pyproject.open("rb") as f:
        table = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in table.items()}


def installed_name(module: str, folders: dict[str, str]) -> str:
    """``module`` as mypy named it from its path, renamed to the installed package's name."""
    top, dot, rest = module.partition(".")
    return folders[top] + dot + rest if top in folders else module


def main(argv: list[str]) -> int:
    started = time.time()
    fscache = FileSystemCache()
    sources, options = process_options(argv, fscache=fscache)
    folders = folder_packages()
    sources = [
        BuildSource(s.path, installed_name(s.module, folders), s.text, s.base_dir, s.followed)
        for s in sources
    ]
    _, messages, blockers = run_build(sources, options, fscache, started, sys.stdout, sys.stderr)
    errors, notes, files = util.count_stats(messages)
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    if errors:
        print(formatter.format_error(errors, files, len(sources), blockers=blockers))
    elif notes == len(messages):
        print(formatter.format_success(len(sources), options.color_output))
    if messages and notes < len(messages):
        return 2 if blockers else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
