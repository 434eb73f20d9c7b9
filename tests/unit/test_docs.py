"""The project's own documents cite only files that are in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.tree import ROOT, source_files

DOCUMENTS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")]
# A backticked path into the repository, e.g. `transforms/schema.py` or `deploy/flink/`.
TOP_LEVEL = "|".join(re.escape(p.name) for p in ROOT.iterdir() if not p.name.startswith(".git"))
CITED_PATH = re.compile(rf"`((?:{TOP_LEVEL})(?:/[\w./-]*)?)`")
MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# Documents kept outside the repository, which a reader of it cannot open.
OUTSIDE = re.compile(r"shared/|seeds/|DESIGN\.md|ADR-?\d")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_file_exists(document):
    text = document.read_text()
    cited = set(CITED_PATH.findall(text))
    cited |= {
        str((document.parent / link).resolve().relative_to(ROOT))
        for link in MARKDOWN_LINK.findall(text)
        if "://" not in link
    }
    assert cited, "the pattern finds the document's citations"
    missing = sorted(path for path in cited if not (ROOT / path).exists())
    assert missing == []
    assert OUTSIDE.findall(text) == []


SOURCES = [
    p
    for p in source_files({".py", ".md", ".sh", ".yaml", ".tf", ".toml", ".options"})
    if p != Path(__file__).resolve()
]
CITED_DOC = re.compile(r"(?<![\w/.-])docs/[\w-]+\.md\b")


def test_the_sources_are_found():
    assert (
        ROOT / "transforms" / "core.py" in SOURCES and ROOT / "chunkmill" / "document.py" in SOURCES
    )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_cites_only_documents_in_the_repository(source: Path):
    text = source.read_text()
    if "tests" not in source.relative_to(ROOT).parts:  # tests use docs/x.md as sample paths
        cited = set(CITED_DOC.findall(text))
        assert sorted(d for d in cited if not (ROOT / d).exists()) == []
    assert OUTSIDE.findall(text) == []
    assert "chunking-context-window-api" not in text
