"""`chunkmill plan` end to end: it predicts what `run` then does, and writes nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from apache_beam.io.filesystems import FileSystems

from pipeline.cli import main

pytestmark = pytest.mark.slow


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def plan(capsys, *args: str) -> tuple[dict[str, int], dict[str, set[str]], str]:
    """Runs `chunkmill plan`; returns its counts, the documents it names, and its output."""
    assert main(["plan", *args]) == 0
    out = capsys.readouterr().out
    m = re.search(r"listed (\d+)  new (\d+)  changed (\d+)  unchanged (\d+)  removed (\d+)", out)
    assert m, out
    counts = dict(
        zip(("listed", "new", "changed", "unchanged", "removed"), map(int, m.groups()), strict=True)
    )
    named: dict[str, set[str]] = {"new": set(), "changed": set(), "removed": set()}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word in named:
            named[word].add(rest.strip())
    return counts, named, out


def test_plan_predicts_what_run_reads_and_writes_nothing(
    chunkmill, corpus, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out"
    first = chunkmill("--input", str(corpus / "**"), run_id="r1")
    start, faq, new = (
        corpus / "guides" / "start.md",
        corpus / "guides" / "faq.md",
        corpus / "new.md",
    )
    start.write_text(start.read_text().replace("start paragraph 5:", "start paragraph V:"))
    faq.unlink()
    new.write_text("# New\n\nA document that did not exist last night.\n")

    before = tree(tmp_path)
    opened: list[str] = []
    real_open = FileSystems.open

    def spy(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(FileSystems, "open", spy)
    counts, named, text = plan(capsys, "--input", str(corpus / "**"), "--output", str(out))
    by_plan = list(opened)
    assert tree(tmp_path) == before, "plan wrote something"
    assert by_plan and not [p for p in by_plan if p.startswith(str(corpus))], "plan read a doc"
    assert all(p.startswith(str(out)) for p in by_plan)  # LATEST and the prior manifest
    broken = str(corpus / "broken.pdf")  # failed last night: no manifest rows, so new again
    assert counts == {"listed": 6, "new": 2, "changed": 1, "unchanged": 3, "removed": 1}
    assert named == {"new": {str(new), broken}, "changed": {str(start)}, "removed": {str(faq)}}
    m = re.search(r"at most ~(\d+) chunks, ~(\d+) tokens to embed", text)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0
    assert "from the prior manifest's" in text

    second = chunkmill("--input", str(corpus / "**"), run_id="r2")
    c = second.counts
    assert c["docs_read"] == counts["new"] + counts["changed"]
    assert c["docs_carried_over"] == counts["unchanged"]
    assert c["docs_removed"] == counts["removed"] and c["docs_listed"] == counts["listed"]
    # The documents the run processed or failed are exactly the ones the plan named.
    old = {(r["source_uri"], r["content_sha256"]) for r in first.rows("manifest")}
    redone = [
        r for r in second.rows("manifest") if (r["source_uri"], r["content_sha256"]) not in old
    ]
    failed = {r["source_uri"] for r in second.rows("errors")}
    assert {r["source_uri"] for r in redone} | failed == named["new"] | named["changed"]
    # The estimate is of every chunk of those documents; here it is within a factor of two.
    chunks, tokens = len(redone), sum(r["token_count"] for r in redone)
    assert chunks / 2 <= int(m.group(1)) <= chunks * 2
    assert tokens / 2 <= int(m.group(2)) <= tokens * 2


def test_plan_after_a_config_change_calls_every_document_changed(chunkmill, corpus, capsys):
    chunkmill("--input", str(corpus / "**"), run_id="r1")
    counts, _, _ = plan(
        capsys,
        "--input",
        str(corpus / "**"),
        "--output",
        str(corpus.parent / "out"),
        "--strategy",
        "sentence",
    )
    assert counts["changed"] == 5 and counts["unchanged"] == 0 and counts["new"] == 1


def test_plan_of_a_first_run_creates_no_output(corpus, tmp_path, capsys):
    out = tmp_path / "nothing-here"
    counts, named, text = plan(capsys, "--input", str(corpus / "**"), "--output", str(out))
    assert counts["new"] == 6 and counts["listed"] == 6
    assert "no prior manifest to learn from" in text
    assert not out.exists()
