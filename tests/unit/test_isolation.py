"""chunkmill.isolation: a hanging, memory-hungry or crashing parser costs one document, and
the next document gets a fresh child. Budgets are small so each case takes seconds."""

from __future__ import annotations

import os
import time

import pytest

from chunkmill.config import Limits
from chunkmill.extract import ExtractionError
from chunkmill.isolation import Extractor, IsolatedExtractor
from tests import isolation_targets as targets


def isolated(target, *, timeout: float = 60.0, memory_mb: int = 256) -> IsolatedExtractor:
    return IsolatedExtractor(timeout_seconds=timeout, memory_mb=memory_mb, target=target)


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` is dead and can be reaped: a zombie with none of its threads still
    exiting (a killed process's main thread is a zombie before its other threads are gone,
    and the parent cannot reap it until they are)."""
    with open(f"/proc/{pid}/stat") as f:
        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
            return False
    return len(os.listdir(f"/proc/{pid}/task")) <= 1


def child_pid(text: str) -> int:
    return int(text.split()[0].removeprefix("pid="))


def test_runs_in_one_long_lived_child_with_the_options() -> None:
    with isolated(targets.whose) as iso:
        first = iso("a.pdf", b"one", pdf_engine="pdfium")
        second = iso("b.pdf", b"two")
    assert first.text.endswith("b'one' [('pdf_engine', 'pdfium')]")
    assert child_pid(first.text) == child_pid(second.text) != os.getpid()
    assert iso.starts == 1


def test_hanging_parser_is_killed_by_the_time_budget_and_the_next_document_goes_on() -> None:
    with isolated(targets.hang, timeout=1.0) as iso:
        before = child_pid(iso("a.pdf", b"fine").text)
        with pytest.raises(ExtractionError) as info:
            iso("stuck.pdf", b"hang")
        after = child_pid(iso("b.pdf", b"fine").text)
    assert info.value.reason == "timeout"
    assert "1 s" in info.value.message
    assert before != after, "a killed child is replaced"
    assert iso.starts == 2


@pytest.mark.parametrize(
    ("target", "data"), [(targets.allocate, b"allocate"), (targets.exhaust, b"exhaust")]
)
def test_memory_hungry_parser_is_stopped_by_the_memory_budget(target, data) -> None:
    # Large blocks, or a heap full of small objects where even the reply's allocation fails
    # until the parser's frames are gone.
    with isolated(target, memory_mb=64) as iso:
        with pytest.raises(ExtractionError) as info:
            iso("huge.pdf", data)
        assert info.value.reason == "memory"
        assert "64 MB" in info.value.message
        assert iso("next.pdf", b"fine").text.startswith("pid=")
    assert iso.starts == 2


def test_crashing_parser_costs_one_document() -> None:
    with isolated(targets.crash) as iso:
        with pytest.raises(ExtractionError) as info:
            iso("bad.pdf", b"crash")
        assert iso("next.pdf", b"fine").text.startswith("pid=")
    assert info.value.reason == "corrupt"
    assert "SIGSEGV" in info.value.message


@pytest.mark.parametrize(
    ("target", "reason", "message"),
    [
        (targets.reject, "encrypted", "needs a password"),
        (targets.bug, "corrupt", "KeyError: '/Root'"),
    ],
)
def test_errors_of_the_target_come_back_and_keep_the_child(target, reason, message) -> None:
    with isolated(target) as iso:
        for _ in range(2):
            with pytest.raises(ExtractionError) as info:
                iso("a.pdf", b"x")
            assert (info.value.reason, info.value.message) == (reason, message)
    assert iso.starts == 1


def test_a_child_that_died_between_documents_is_replaced() -> None:
    with isolated(targets.whose) as iso:
        pid = child_pid(iso("a.pdf", b"x").text)
        os.kill(pid, 9)
        while not _is_zombie(pid):  # dead, not yet reaped by the extractor
            time.sleep(0.01)
        assert child_pid(iso("b.pdf", b"y").text) != pid
    assert iso.starts == 2


@pytest.mark.parametrize(
    ("path", "data", "in_child"),
    [
        ("a.pdf", b"%PDF-1.4", True),
        ("page.html", b"<p>x</p>", True),
        ("rows.csv", b"a,b", True),
        ("data.json", b"{}", True),
        ("log.jsonl", b"{}", True),
        ("memo.docx", b"PK", True),
        ("no-extension", b"%PDF-1.7 sniffed", True),
        ("no-extension", b"<!DOCTYPE html><p>sniffed</p>", True),
        ("notes.md", b"# x", False),
        ("notes.txt", b"x", False),
        ("index.rst", b"x", False),
        ("main.py", b"x", False),
        ("png.md", b"\x89PNG\r\n\x1a\n", False),
    ],
)
def test_extractor_isolates_parsed_formats_only(path: str, data: bytes, in_child: bool) -> None:
    extractor = Extractor(Limits(max_pdf_pages=7), target=targets.whose, pdf_engine="auto")
    try:
        text = extractor(path, data).text
    finally:
        extractor.close()
    assert (child_pid(text) != os.getpid()) is in_child
    assert "('max_pdf_pages', 7), ('pdf_engine', 'auto')" in text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout_seconds": 0},
        {"memory_mb": 0},
        {"max_document_bytes": -1},
        {"max_pdf_pages": 0},
    ],
)
def test_limits_reject_non_positive_budgets(kwargs) -> None:
    with pytest.raises(ValueError):
        Limits(**kwargs)


@pytest.mark.parametrize(("engine", "falls_back"), [("auto", True), ("pdfium", False)])
def test_auto_engine_falls_back_to_pypdf_when_pdfium_crashes(engine: str, falls_back: bool):
    extractor = Extractor(Limits(), target=targets.pdfium_crashes, pdf_engine=engine)
    try:
        if falls_back:
            assert "('pdf_engine', 'pypdf')" in extractor("a.pdf", b"%PDF-1.7").text
        else:
            with pytest.raises(ExtractionError) as info:
                extractor("a.pdf", b"%PDF-1.7")
            assert info.value.reason == "corrupt" and "SIGSEGV" in info.value.message
    finally:
        extractor.close()


@pytest.mark.parametrize(("path", "falls_back"), [("a.pdf", True), ("a.html", False)])
def test_pypdf_reads_a_pdf_again_without_pdfium_when_pdfium_crashes(path: str, falls_back: bool):
    # pypdf asks PDFium for line ends (and OCR renders with it): a PDF PDFium crashes on is
    # read again by pypdf alone; another format's crash is not retried.
    extractor = Extractor(
        Limits(), target=targets.pdfium_crashes_for_pypdf_too, pdf_engine="pypdf", ocr="auto"
    )
    try:
        if falls_back:
            assert "('use_pdfium', False)" in extractor(path, b"%PDF-1.7").text
        else:
            with pytest.raises(ExtractionError) as info:
                extractor(path, b"<p>x</p>")
            assert info.value.reason == "corrupt" and "SIGSEGV" in info.value.message
    finally:
        extractor.close()


SECRETS = {
    "AWS_ACCESS_KEY_ID": "SENTINEL-id",
    "AWS_SECRET_ACCESS_KEY": "SENTINEL-secret",
    "AWS_SESSION_TOKEN": "SENTINEL-session",
    "GOOGLE_APPLICATION_CREDENTIALS": "/SENTINEL/key.json",
    "GITHUB_TOKEN": "SENTINEL-gh",
    "DB_PASSWORD": "SENTINEL-db",
    "MY_SERVICE_KEY": "SENTINEL-key",
    "AZURE_STORAGE_CONNECTION_STRING": "SENTINEL-az",
    "PYTHONPATH": "/SENTINEL/path",
}


def test_the_parser_child_gets_a_minimal_environment_and_no_secret(monkeypatch) -> None:
    import json

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with isolated(targets.environment) as iso:
        seen = json.loads(iso("a.pdf", b"x").text)
        home = seen["env"]["HOME"]
        assert os.path.isdir(home)
    env = seen["env"]
    assert "SENTINEL" not in json.dumps(env)
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH", "HOME", "TMPDIR"}
    assert env["PATH"] == os.environ["PATH"]
    assert env["TMPDIR"] == home == seen["cwd"] != os.environ.get("HOME")
    assert not os.path.exists(home), "the child's private folder goes with it"
