"""Flag validation: every mistake is one line naming the flag, before any graph is built."""

from __future__ import annotations

import datetime as dt
import shutil

import pyarrow as pa
import pytest

from chunkmill import schema
from chunkmill.pipeline import graph
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.pipeline.options import SAMPLE_CORPUS
from tests.helpers import write_finished_run


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--max-tokens", "ten"], "--max-tokens"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--overlap-tokens", "-1"], "--overlap-tokens"),
        (["--strategy", "nope"], "--strategy"),
        (["--tokenizer", "nope"], "--tokenizer"),
        (["--no-such-flag"], "--no-such-flag"),
        (["--runnr=DirectRunner"], "--runnr"),
        (["--run-id", "../escape"], "--run-id"),
        # "$" in a regex matches before a final newline: the id must match whole.
        (["--run-id", "r1\n"], "--run-id"),
        (["--input", "/nonexistent/**"], "/nonexistent/**"),
        (["--prior-manifest", "/nonexistent/run"], "--prior-manifest"),
        (["--max-tokens", "10", "--overlap-tokens", "10"], "--overlap-tokens (10) must be less"),
        (["--exclude", "/abs/**"], "--exclude"),
        (["--include", "gs://b/*.svg"], "--include"),
    ],
)
def test_bad_flag_is_one_line_naming_it(args, names, docs, tmp_path, capsys):
    argv = ["run", "--output", str(tmp_path / "out")]
    if "--input" not in args:
        argv += ["--input", str(docs / "*")]
    code = main(argv + args)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("chunkmill: error: "), err
    assert names in err
    assert not (tmp_path / "out").exists(), "nothing is written on a usage error"


def test_unknown_command(capsys):
    assert main(["frobnicate"]) == 2
    assert "frobnicate" in capsys.readouterr().err


def test_existing_run_id_is_refused(docs, tmp_path, capsys):
    (tmp_path / "out" / "runs" / "r1" / "manifest").mkdir(parents=True)
    (tmp_path / "out" / "runs" / "r1" / "manifest" / "part.parquet").write_bytes(b"x")
    code = main(
        ["run", "--input", str(docs / "*"), "--output", str(tmp_path / "out"), "--run-id", "r1"]
    )
    assert code == 2 and "already exists" in capsys.readouterr().err


def test_defaults(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    now = dt.datetime(2026, 11, 22, 7, 30, 5, tzinfo=dt.timezone.utc)
    s = run_settings([], now=now)
    assert s.inputs == (str(SAMPLE_CORPUS / "**"),)
    assert s.output == str(tmp_path / "out")
    assert s.run_id == "20261122T073005Z"
    assert (s.prior_mode, s.prior_manifest) == ("auto", None)
    assert s.config.strategy == "auto"
    assert s.config.description["text"] == {
        "strategy": "paragraph",
        "params": {
            "max_tokens": 700,
            "overlap_tokens": 80,
            "max_embed_tokens": 700,
            "min_chunk_tokens": 16,
        },
    }
    assert s.config.context() == (0, 0)


def test_beam_options_pass_through_and_stay_out_of_the_report(docs, tmp_path):
    s = run_settings(
        [
            "--input",
            str(docs / "*"),
            "--output",
            str(tmp_path / "o"),
            "--direct_num_workers=2",
            "--temp_location",
            "/tmp/x",
        ]
    )
    assert s.beam_args == ("--direct_num_workers=2", "--temp_location", "/tmp/x")
    assert "temp_location" not in str(graph.report_header(s))


def test_relative_paths_become_absolute(docs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = run_settings(["--input", "docs/*", "--output", "o"])
    assert s.inputs == (str(docs / "*"),) and s.output == str(tmp_path / "o")


def _prior_run(out, metadata=None, errors=None):
    """An empty manifest file under OUTPUT/runs/r1, a finished run named by LATEST."""
    table = schema.MANIFEST.empty_table()
    if metadata is not None:
        table = table.replace_schema_metadata(metadata)
    write_finished_run(out, "r1", [table], errors=errors)


def _one_failure() -> pa.Table:
    row = {
        "doc_id": "d" * 32,
        "source_uri": "/docs/broken.pdf",
        "stage": "extract",
        "reason": "corrupt",
        "message": "bad xref",
        "versions": "{}",
        "attempted": True,
    }
    return pa.Table.from_pylist([row], schema=schema.ERRORS)


def test_prior_manifest_auto_follows_latest(docs, tmp_path):
    out = tmp_path / "out"
    _prior_run(out)
    s = run_settings(["--input", str(docs / "*"), "--output", str(out), "--run-id", "r2"])
    assert s.prior_run_id == "r1"
    assert s.prior_manifest == str(out / "runs" / "r1" / "manifest" / "*.parquet")
    assert s.prior_files == (str(out / "runs" / "r1" / "manifest" / "part-00000-of-00001.parquet"),)


def test_prior_manifest_of_another_schema_version_is_one_line_naming_the_writer(
    docs, tmp_path, capsys
):
    out = tmp_path / "out"
    _prior_run(out, {b"chunkmill.schema_version": b"1", b"chunkmill.version": b"0.0.9"})
    code = main(["run", "--input", str(docs / "*"), "--output", str(out), "--run-id", "r2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "schema version 1" in err and "chunkmill 0.0.9" in err
    assert "--prior-manifest none" in err
    assert not (out / "runs" / "r2").exists()


def test_prior_manifest_that_is_not_parquet_is_one_line(docs, tmp_path, capsys):
    out = tmp_path / "out"
    (out / "elsewhere").mkdir(parents=True)
    (out / "elsewhere" / "part-0.parquet").write_bytes(b"not parquet")
    prior = str(out / "elsewhere")
    code = main(
        ["run", "--input", str(docs / "*"), "--output", str(out), "--prior-manifest", prior]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "part-0.parquet" in err, err


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_glob_the_shell_expanded_is_one_line_asking_to_quote_it(command, tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (docs / name).write_text("hello\n")
    # What `chunkmill run --input docs/*.md` becomes after the shell expands the glob.
    argv = [command, "--input", str(docs / "a.md"), str(docs / "b.md"), str(docs / "c.md")]
    code = main([*argv, "--output", str(tmp_path / "out"), "--runner", "FnApiRunner"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err == (
        f"chunkmill: error: unexpected argument {str(docs / 'b.md')!r}: quote the --input glob "
        f"('{docs}/*.md') so the shell does not expand it\n"
    )
    assert not (tmp_path / "out").exists()


def test_values_of_beam_flags_are_not_stray_arguments(docs, tmp_path):
    s = run_settings(
        ["--input", str(docs / "*"), "--output", str(tmp_path / "o"), "--runner", "FnApiRunner"]
        + ["--experiments", "use_runner_v2", "--s3_disable_ssl", "--project", "p"]
    )
    assert s.beam_args == (
        "--runner", "FnApiRunner", "--experiments", "use_runner_v2", "--s3_disable_ssl",
        "--project", "p",
    )  # fmt: skip


def test_a_usage_error_quoting_a_uri_shows_no_credential(tmp_path, capsys):
    from chunkmill.pipeline.cli import main
    from chunkmill.pipeline.options import UsageError

    signed = "s3://key:SENTINEL@bucket/docs/*?X-Amz-Signature=SENTINEL"
    err = UsageError(f"argument --input: {signed!r} matches no file")
    assert str(err) == "argument --input: 's3://bucket/docs/*?X-Amz-Signature=***' matches no file"
    argv = ["run", "--input", "memory://u:SENTINEL@h/none-*.md", "--output", str(tmp_path)]
    assert main(argv) == 2
    err_text = capsys.readouterr().err
    assert "argument --input" in err_text and "SENTINEL" not in err_text


def test_a_manifest_of_the_previous_schema_version_is_still_a_prior(docs, tmp_path):
    # Version 3 added columns to the errors table only: a version 2 manifest reads the same.
    out = tmp_path / "out"
    _prior_run(out, {b"chunkmill.schema_version": b"2", b"chunkmill.version": b"0.1.0"})
    s = run_settings(["--input", str(docs / "*"), "--output", str(out), "--run-id", "r2"])
    assert s.prior_run_id == "r1"


def test_the_prior_run_s_errors_files_come_from_its_success_unless_retry_failed(docs, tmp_path):
    out = tmp_path / "out"
    _prior_run(out, errors=_one_failure())
    run = out / "runs" / "r1"
    # A stray file beside the listed one (a retry's leftover) is not a prior failure.
    shutil.copy(run / "errors" / "part-00000-of-00001.parquet", run / "errors" / "stray.parquet")
    argv = ["--input", str(docs / "*"), "--output", str(out)]
    listed = (str(run / "errors" / "part-00000-of-00001.parquet"),)
    assert run_settings([*argv, "--run-id", "r2"]).prior_errors == listed
    assert run_settings([*argv, "--run-id", "r2", "--retry-failed"]).prior_errors == ()
    # A run folder given as the prior is a run too; a manifest glob has no errors table.
    assert run_settings([*argv, "--run-id", "r2", "--prior-manifest", str(run)]).prior_errors == (
        listed
    )
    glob = str(run / "manifest" / "*.parquet")
    assert run_settings([*argv, "--run-id", "r2", "--prior-manifest", glob]).prior_errors == ()


def test_a_prior_run_without_failures_has_no_errors_file_to_read(docs, tmp_path):
    out = tmp_path / "out"
    _prior_run(out)  # its errors file has no rows
    argv = ["--input", str(docs / "*"), "--output", str(out), "--run-id", "r2"]
    assert run_settings(argv).prior_errors == ()
