"""The repository's own files, as the tests that check the tree walk them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders of the project's code.
CODE_FOLDERS = ("chunkmill", "pipeline", "transforms", "tests", "benchmarks", "deploy", "scripts")


def source_files(suffixes: set[str]) -> list[Path]:
    """Every file of ``CODE_FOLDERS`` with one of ``suffixes``, the sample corpus left out."""
    return sorted(
        p
        for folder in CODE_FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and p.suffix in suffixes and "sample_corpus" not in p.parts
    )
