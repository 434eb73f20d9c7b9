"""Any name is listed, a presigned URL is an input, and a parser child killed from outside is
tried again: a newline in a file or folder name, a ``?`` in an http(s) URL, SIGKILL."""

from __future__ import annotations

import functools
import http.server
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkmill import carryover
from chunkmill.extract import ExtractionError
from chunkmill.isolation import IsolatedExtractor
from chunkmill.items import PriorError, SourceFile
from chunkmill.redact import redact_uri
from chunkmill.transforms import storage
from tests import isolation_targets as targets


def listed(pattern: str) -> list[str]:
    return sorted(
        item.uri
        for shard in storage.plan(pattern)
        for item in storage.list_shard(shard)
        if isinstance(item, SourceFile)
    )


@pytest.mark.parametrize("glob", ["**", "**/*.md", "**.md", "*/**"])
def test_a_newline_in_a_file_or_folder_name_is_listed(tmp_path: Path, glob: str):
    folder = tmp_path / "two\nlines"
    folder.mkdir()
    (folder / "a\nb.md").write_text("# A\n\ntext\n")
    (tmp_path / "c\n.md").write_text("# C\n\ntext\n")
    expected = [str(folder / "a\nb.md")]
    if glob != "*/**":
        expected.append(str(tmp_path / "c\n.md"))
    assert listed(f"{tmp_path}/{glob}") == sorted(expected)


def test_include_and_exclude_match_names_with_newlines():
    rules = storage.ListingRules(exclude=("drafts/**",), include=("**.png",))
    assert rules.screen("drafts/a\nb.md") == storage.EXCLUDED
    assert rules.screen("img/a\nb.png") is None


@pytest.fixture
def http_folder(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "doc.md").write_text("# Signed\n\nserved over http\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_presigned_url_is_one_input_and_its_question_mark_no_wildcard(http_folder: str):
    url = (
        f"{http_folder}/doc.md?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIA/20260101/us-east-1/s3/aws4_request&X-Amz-Signature=abc123"
    )
    assert not storage.has_glob(url)
    assert storage.pattern_root(url) == f"{http_folder}/"
    assert storage.has_match(url)
    assert listed(url) == [url]
    assert storage.read_object(url) == b"# Signed\n\nserved over http\n"
    # What the document is known by is redacted as before.
    shown = redact_uri(url)
    assert "abc123" not in shown and "AKIA" not in shown and shown.startswith(f"{http_folder}/doc")


def test_wildcards_in_an_http_urls_path_are_still_wildcards():
    assert storage.has_glob("https://host/docs/*.md?token=x")
    assert storage.fixed_prefix("https://host/docs/*.md?token=x") == "https://host/docs/"
    assert storage.has_glob("s3://bucket/a?.md")


def test_a_parser_child_killed_from_outside_is_a_transient_failure():
    iso = IsolatedExtractor(timeout_seconds=60.0, memory_mb=256, target=targets.hang)

    def kill_the_child() -> None:
        while iso._proc is None:
            time.sleep(0.01)
        time.sleep(0.3)  # the document is in the parser
        os.kill(iso._proc.pid, signal.SIGKILL)  # as the OOM killer or an operator does

    killer = threading.Thread(target=kill_the_child)
    killer.start()
    with iso, pytest.raises(ExtractionError) as info:
        iso("stuck.pdf", b"hang")
    killer.join()
    assert info.value.reason == "killed" and "SIGKILL" in info.value.message

    # Not a known failure: the next run reads the document again.
    def prior(reason: str) -> PriorError:
        return PriorError("v1", "k", "extract", reason, "", None)

    assert not carryover.is_known_failure(prior("killed"), "v1", "k")
    assert carryover.is_known_failure(prior("corrupt"), "v1", "k")


def test_a_parser_that_crashes_itself_is_still_corrupt():
    with (
        IsolatedExtractor(timeout_seconds=60.0, memory_mb=256, target=targets.crash) as iso,
        pytest.raises(ExtractionError) as info,
    ):
        iso("bad.pdf", b"crash")
    assert info.value.reason == "corrupt" and "SIGSEGV" in info.value.message
