"""The isolation and limit flags (one-line usage errors, what reaches the config and the run
report) and the --max-error-ratio and --max-removed-ratio checks before publishing."""

from __future__ import annotations

import pytest

from chunkmill import document, ids
from chunkmill.config import Limits
from chunkmill.items import WorkItem
from chunkmill.pipeline import graph
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.refusal import RunRefused, refusal_line
from chunkmill.transforms.publish import check_error_ratio, check_removed_ratio


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--pdf-engine", "tesseract"], "--pdf-engine"),
        (["--doc-timeout-seconds", "0"], "--doc-timeout-seconds"),
        (["--doc-timeout-seconds", "soon"], "--doc-timeout-seconds"),
        (["--doc-timeout-seconds", "inf"], "--doc-timeout-seconds"),
        (["--doc-memory-mb", "0"], "--doc-memory-mb"),
        (["--doc-memory-mb", "1.5"], "--doc-memory-mb"),
        (["--max-document-bytes", "-1"], "--max-document-bytes"),
        (["--max-pdf-pages", "0"], "--max-pdf-pages"),
        (["--max-error-ratio", "1.5"], "--max-error-ratio"),
        (["--max-error-ratio", "-0.1"], "--max-error-ratio"),
        (["--max-error-ratio", "half"], "--max-error-ratio"),
        (["--max-removed-ratio", "1.01"], "--max-removed-ratio"),
        (["--max-removed-ratio", "nan"], "--max-removed-ratio"),
    ],
)
def test_bad_limit_flag_is_one_line_naming_it(args, flag, docs, tmp_path, capsys):
    code = main(["run", "--input", str(docs / "*"), "--output", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("chunkmill: error: "), err
    assert flag in err
    assert not (tmp_path / "out").exists()


def test_defaults_and_flags_reach_the_config_and_the_report(docs, tmp_path):
    base = ["--input", str(docs / "*"), "--output", str(tmp_path / "out")]
    default = run_settings(base)
    assert default.config.limits == Limits()
    assert default.config.pdf_engine == "pypdf" and default.max_error_ratio is None
    assert graph.report_header(default)["limits"]["max_error_ratio"] is None
    assert graph.report_header(default)["limits"]["max_removed_ratio"] == 0.5

    settings = run_settings(
        [
            *base,
            "--pdf-engine=auto",
            "--doc-timeout-seconds=2.5",
            "--doc-memory-mb=300",
            "--max-document-bytes=1000",
            "--max-pdf-pages=9",
            "--max-error-ratio=0.1",
            "--max-removed-ratio=1",
        ]
    )
    assert settings.config.limits == Limits(
        timeout_seconds=2.5, memory_mb=300, max_document_bytes=1000, max_pdf_pages=9
    )
    assert settings.config.pdf_engine == "auto"
    assert settings.config.description["pdf_engine"] == "auto"
    assert settings.config.fingerprint != default.config.fingerprint
    assert graph.report_header(settings)["limits"] == {
        "timeout_seconds": 2.5,
        "memory_mb": 300,
        "max_document_bytes": 1000,
        "max_pdf_pages": 9,
        "max_error_ratio": 0.1,
        "max_removed_ratio": 1.0,
    }


def counts(listed: int, failed: int) -> dict[str, int]:
    return {"docs_listed": listed, "docs_failed": failed, "docs_processed": listed - failed}


@pytest.mark.parametrize(
    ("listed", "failed", "ratio"),
    [(10, 3, None), (10, 3, 0.3), (10, 0, 0.0), (0, 0, 0.0), (4, 4, 1.0)],
)
def test_error_ratio_at_or_under_the_limit_passes(listed, failed, ratio) -> None:
    check_error_ratio(counts(listed, failed), ratio)


@pytest.mark.parametrize(("listed", "failed", "ratio"), [(10, 4, 0.3), (10, 1, 0.0)])
def test_error_ratio_over_the_limit_fails_with_one_line(listed, failed, ratio) -> None:
    with pytest.raises(RunRefused) as info:
        check_error_ratio(counts(listed, failed), ratio)
    line = info.value.line
    assert "\n" not in line
    assert line.startswith(f"{failed} of {listed} listed documents failed")
    assert f"--max-error-ratio {ratio:g}" in line
    # As a runner re-raises it: wrapped, with its step name appended.
    wrapped = RuntimeError(f"Pipeline failed: {info.value} [while running 'Publish/Write']")
    assert refusal_line(wrapped) == line
    assert refusal_line(RuntimeError("something else")) is None


@pytest.mark.parametrize(
    ("prior", "removed", "ratio"),
    [(1000, 500, 0.5), (0, 0, 0.0), (1000, 1000, 1.0), (10, 9, None), (4, 0, 0.0)],
)
def test_removals_at_or_under_the_limit_pass(prior, removed, ratio) -> None:
    check_removed_ratio({"docs_prior": prior, "docs_removed": removed}, ratio)


def test_removals_over_the_limit_refuse_the_run_in_one_line() -> None:
    with pytest.raises(RunRefused) as info:
        check_removed_ratio({"docs_prior": 1000, "docs_removed": 990}, 0.5)
    assert info.value.line == (
        "the run removes 990 of 1000 documents of the prior run (99.0%), more than "
        "--max-removed-ratio 0.5; nothing was published. If this is intended, re-run with "
        "--max-removed-ratio 1"
    )


def test_over_max_document_bytes_is_too_large_from_the_listing() -> None:
    item = WorkItem(ids.doc_id("/c/huge.pdf"), "/c/huge.pdf", 1001)
    assert document.too_large(item, 1001) is None
    assert document.too_large(item, None) is None
    outcome = document.too_large(item, 1000)
    assert outcome is not None and outcome.status == document.FAILED
    assert outcome.error is not None
    assert (outcome.error["stage"], outcome.error["reason"]) == ("read", "too_large")
    assert outcome.error["content_sha256"] is None
    assert "1001 bytes" in outcome.error["message"] and "1000" in outcome.error["message"]


def test_plan_warns_when_the_planned_removals_would_be_refused(docs, tmp_path) -> None:
    import dataclasses

    from chunkmill.pipeline.plan import removal_warning

    settings = run_settings(["--input", str(docs / "*"), "--output", str(tmp_path / "out")])
    warning = removal_warning(6, 10, settings)
    assert warning is not None and "removes 6 of 10 documents" in warning
    assert "--max-removed-ratio 0.5" in warning
    assert removal_warning(5, 10, settings) is None
    assert removal_warning(0, 0, settings) is None
    told = dataclasses.replace(settings, max_removed_ratio=1.0)
    assert removal_warning(10, 10, told) is None
