"""The storage flags and start-up checks of ``chunkmill run`` (no store needed: the checks are
fed a fake bucket answer)."""

from __future__ import annotations

import pytest

from chunkmill import stores
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.transforms import storage


def test_billing_project_reaches_the_settings(tmp_path):
    (tmp_path / "a.md").write_text("hello\n")
    argv = ["--input", str(tmp_path / "*.md"), "--output", str(tmp_path / "out")]
    assert run_settings(argv).billing_project is None
    assert run_settings([*argv, "--billing-project", "payer"]).billing_project == "payer"


def test_billing_project_needs_a_value(capsys):
    assert main(["run", "--billing-project"]) == 2
    assert "--billing-project" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        (stores.StoreAccessError("bucket gs://corpus does not exist"), "bucket gs://corpus"),
        (ConnectionError("no route to host\ntraceback..."), "cannot reach gs://corpus"),
    ],
)
def test_an_unusable_input_bucket_is_one_line_before_anything_runs(
    problem, expected, monkeypatch, tmp_path, capsys
):
    seen = []

    def check(uri, billing_project=None):
        seen.append((uri, billing_project))
        raise problem

    monkeypatch.setattr(storage, "check_bucket", check)
    argv = ["run", "--input", "gs://corpus/docs/**", "--output", str(tmp_path / "out")]
    assert main([*argv, "--billing-project", "payer"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("chunkmill: error: argument --input: ")
    assert expected in err
    # The billing project is used for the input bucket's check (requester pays).
    assert seen == [("gs://corpus/docs/**", "payer")]
