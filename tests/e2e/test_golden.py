"""No behaviour change unannounced: the tables of a first run and an edited re-run of the
sample corpus have the digests recorded before chunkmill became one package
(tests/fixtures/golden/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main
from tests import golden

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "golden" / "sample_two_nights.json"


def test_two_nights_write_the_tables_they_always_wrote(tmp_path: Path, capsys):
    def run(argv: list[str]) -> None:
        code = main(argv)
        assert code == 0, capsys.readouterr().err

    got, recorded = golden.two_nights(tmp_path, run), json.loads(FIXTURE.read_text())
    assert got.keys() == recorded.keys()
    for run_id, tables in recorded.items():
        # A later version may add counts (and tables, and columns), never change these.
        counts = {k: got[run_id]["counts"].get(k) for k in tables["counts"]}
        assert {**got[run_id], "counts": counts} == tables, run_id
