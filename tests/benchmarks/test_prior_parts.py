"""The prior-parts benchmark's machinery: each part of a manifest gets one row, with its rows
and every figure, and a night's verdicts cover every row. No timing is asserted."""

from __future__ import annotations

from benchmarks import prior_parts
from tests.helpers import manifest_rows, paragraphs, write_prior


def test_each_part_is_measured_with_its_rows(tmp_path, capsys):
    rows = [
        r for i in range(20) for r in manifest_rows(f"/c/{i}.md", paragraphs(f"w{i}", "x", "y"))
    ]
    parts = write_prior(rows, str(tmp_path), row_group_rows=len(rows) // 2 + 1)
    (path,) = {p.path for p in parts}
    assert prior_parts.main([path, "--repeat", "1", "--edited", "0.1"]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    assert [line.split(" | ")[0].lstrip("| ") for line in lines] == [p.key for p in parts]
    assert sum(int(line.split(" | ")[1].replace(",", "")) for line in lines) == len(rows)
    assert all(len(line.split(" | ")) == 6 for line in lines)  # the hash join's two figures
