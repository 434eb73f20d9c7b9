"""Digests of the tables of two runs on the sample corpus (a first run, then a run after
deterministic edits), independent of where the corpus lies and of library versions: the
fixture tests/e2e/test_golden.py compares the current code's tables with.

    python -m tests.golden OUT.json --command "python -m chunkmill"

writes the digests a command makes (the fixture was made with the command of the release
before the package was restructured); ``tables_digest`` is what the test computes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

SAMPLE = Path(__file__).resolve().parents[1] / "pipeline" / "sample_corpus"
TABLES = ("chunks", "manifest", "removed", "errors")
# The columns of schema version 3, the version the fixture was made with: a later version
# may add columns, never change these.
COLUMNS = {
    "occurrence": (
        "chunk_hash",
        "source_uri",
        "chunk_index",
        "char_start",
        "char_end",
        "token_count",
        "page_start",
        "page_end",
        "strategy",
        "config_fingerprint",
        "content_sha256",
        "doc_format",
        "section_path",
        "section_anchor",
        "section_chunk_index",
        "paragraph_index",
        "total_paragraphs",
        "has_prev_context",
        "has_next_context",
        "source_version",
        "decode_lossy",
    ),
    # One row per new hash; which of a hash's occurrences stands for it follows the chunk
    # ids, which depend on where the corpus lies: its occurrence columns are left out.
    "chunks": (
        "chunk_hash",
        "token_count",
        "strategy",
        "config_fingerprint",
        "text",
        "text_with_context",
    ),
    "manifest": ("is_new",),
    "removed": ("removed_reason",),
    "errors": (
        "source_uri",
        "stage",
        "reason",
        "message",
        "size_bytes",
        "content_sha256",
        "source_version",
        "attempted",
    ),
}
# Every file gets this modification time, so listed versions do not depend on the clock.
MTIME = 1_700_000_000


def prepare(corpus: Path) -> None:
    """The sample corpus, copied to ``corpus`` with fixed modification times."""
    shutil.copytree(SAMPLE, corpus, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    _fix_times(corpus, MTIME)


def edit(corpus: Path) -> None:
    """The second night: one document grows, one changes in the middle, one goes, one comes."""
    grown = corpus / "guides" / "getting-started.md"
    grown.write_text(grown.read_text() + "\n\n## Later\n\nA section added at the end.\n")
    middle = corpus / "design" / "retries.md"
    text = middle.read_text()
    half = text.index("\n\n", len(text) // 2)
    middle.write_text(text[:half] + "\n\nA paragraph added in the middle.\n" + text[half:])
    (corpus / "notes" / "standup-2024-03-12.txt").unlink()
    (corpus / "notes" / "added.md").write_text("# Added\n\nA new document on the second night.\n")
    _fix_times(corpus, MTIME + 86_400)
    # Unchanged documents keep their times: only the edited ones look new to the listing.
    for path in corpus.rglob("*"):
        if path.is_file() and path not in (grown, middle, corpus / "notes" / "added.md"):
            os.utime(path, (MTIME, MTIME))


def _fix_times(root: Path, mtime: int) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (mtime, mtime))


def _normal(value: Any, corpus: str) -> Any:
    if isinstance(value, str):
        return value.replace(corpus, "<corpus>")
    if isinstance(value, list):
        return [_normal(v, corpus) for v in value]
    return value


def tables_digest(run: Path, corpus: Path) -> dict[str, Any]:
    """Per table: its row count and the SHA-256 of its rows (schema-3 columns, source URIs
    relative to the corpus, doc and chunk ids named by what determines them), sorted."""
    root = str(corpus)
    out: dict[str, Any] = {}
    for name in TABLES:
        if name in ("errors", "chunks"):
            columns = COLUMNS[name]
        else:
            columns = COLUMNS["occurrence"] + COLUMNS[name]
        files = sorted((run / name).glob("*.parquet"))
        rows = [r for f in files for r in pq.read_table(f, columns=list(columns)).to_pylist()]
        canonical = sorted(
            json.dumps({k: _normal(r[k], root) for k in columns}, sort_keys=True) for r in rows
        )
        blob = "\n".join(canonical).encode()
        out[name] = {"rows": len(rows), "sha256": hashlib.sha256(blob).hexdigest()}
    counts = json.loads((run / "_SUCCESS").read_text())["counts"]
    out["counts"] = {k: v for k, v in sorted(counts.items()) if not k.endswith(("_s", "_seconds"))}
    return out


def two_nights(work: Path, run: Callable[[list[str]], None]) -> dict[str, Any]:
    """The digests of a first run and a run after ``edit``, ``run(argv)`` running the CLI."""
    corpus, output = work / "corpus", work / "out"
    prepare(corpus)
    common = ["--input", f"{corpus}/**", "--output", str(output)]
    run(["run", *common, "--run-id", "r1", "--prior-manifest", "none"])
    first = tables_digest(output / "runs" / "r1", corpus)
    edit(corpus)
    run(["run", *common, "--run-id", "r2"])
    return {"r1": first, "r2": tables_digest(output / "runs" / "r2", corpus)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--command", default=f"{sys.executable} -m chunkmill")
    parser.add_argument("--work", type=Path, required=True, help="an empty folder to run in")
    args = parser.parse_args(argv)

    def run(cli: list[str]) -> None:
        # In the work folder: `-m` looks in the current folder first.
        subprocess.run(
            [*shlex.split(args.command), *cli], check=True, capture_output=True, cwd=args.work
        )

    digests = two_nights(args.work, run)
    args.out.write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
