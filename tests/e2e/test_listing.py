"""The input edge end to end: what a shell user's globs list, what is skipped and counted,
what a failure keeps, through ``chunkmill run`` and ``chunkmill plan``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from chunkmill import schema
from chunkmill.pipeline.cli import main
from chunkmill.transforms import storage
from tests.e2e.conftest import Run, prose
from tests.helpers import AS_NOBODY

pytestmark = pytest.mark.slow

SECRET = "aws_secret_access_key = wJalrXUtnFEMI"


@pytest.fixture
def awkward(tmp_path: Path) -> Path:
    """A book with what real folders hold besides documents."""
    root = tmp_path / "book"
    (root / "ch1").mkdir(parents=True)
    (root / "intro.md").write_text("# Intro\n\n" + prose("intro"))
    (root / "ch1" / "one.md").write_text("# One\n\n" + prose("one"))
    (root / "ch1" / "target.md").write_text("# Target\n\n" + prose("target"))
    (root / "ch1" / "link.md").symlink_to(root / "ch1" / "target.md")
    (root / "fig.svg").write_text("<svg>" + "<polygon points='1,2 3,4'/>" * 50 + "</svg>")
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    os.mkfifo(root / "doc.md")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.md"), "wb") as f:
        f.write(b"# Cafe\n\nLatin-1 named.\n")
    outside = tmp_path / "home" / "credentials.md"
    outside.parent.mkdir()
    outside.write_text(SECRET)
    (root / "creds.md").symlink_to(outside)
    return root


def test_awkward_folder_runs_skips_and_keeps(chunkmill, awkward: Path, tmp_path: Path, capsys):
    out = tmp_path / "out"
    # The output reached through a symlink inside the input: never read back in.
    (awkward / "published").symlink_to(out, target_is_directory=True)
    out.mkdir()
    (out / "stale.md").write_text(SECRET)

    first = chunkmill(
        "--input", f"{awkward}/**/*.md", "--input", f"{awkward}/", "--max-error-ratio", "0",
        run_id="r1",
    )  # fmt: skip
    manifest = first.table("manifest").to_pylist()
    uris = {r["source_uri"] for r in manifest}
    assert f"{awkward}/intro.md" in uris  # ** is zero folders too
    assert {f"{awkward}/ch1/one.md", f"{awkward}/ch1/link.md"} <= uris
    assert not any("credentials" in u or "stale" in u or "doc.md" in u for u in uris)
    assert SECRET not in str(first.table("chunks").column("text").to_pylist())
    c = first.counts
    assert c["skipped_by_reason"] == {
        storage.NOT_REGULAR: 1,
        storage.SYMLINK_OUTSIDE_INPUT: 1,
        storage.UNSUPPORTED_FORMAT: 2,
    }
    assert c["docs_skipped"] == 4
    assert c["docs_failed"] == 0 and c["failed_by_reason"] == {}
    assert c["docs_listed"] == c["docs_processed"] + c["docs_carried_over"] + c["docs_failed"]
    errors = first.rows("errors")
    assert [(e["source_uri"], e["stage"], e["reason"]) for e in errors] == [
        (f"{awkward}/caf\\xe9.md", "list", storage.BAD_NAME)
    ]
    assert c["listing_errors_by_reason"] == {storage.BAD_NAME: 1}

    # The link's target goes missing between two runs: an errors/ row, nothing removed.
    (awkward / "ch1" / "target.md").rename(tmp_path / "target.md.away")
    (awkward / "ch1" / "extra.svg").write_text("<svg><text>A labelled figure</text></svg>")
    second = chunkmill("--input", f"{awkward}", "--include", "ch1/*.svg", run_id="r2")
    link = f"{awkward}/ch1/link.md"
    failed = {e["source_uri"]: e for e in second.rows("errors")}
    assert failed[link]["stage"] == "read"
    assert failed[link]["reason"] == storage.LINK_TARGET_MISSING
    removed = {r["source_uri"] for r in second.table("removed").to_pylist()}
    assert removed == {f"{awkward}/ch1/target.md"}
    kept = [r for r in second.table("manifest").to_pylist() if r["source_uri"] == link]
    assert kept and len(kept) == sum(r["source_uri"] == link for r in manifest)
    # --include brought one SVG back (it went through extraction); the other stays skipped.
    assert f"{awkward}/ch1/extra.svg" in {r["source_uri"] for r in second.rows("manifest")}
    assert second.counts["skipped_by_reason"][storage.UNSUPPORTED_FORMAT] == 2  # fig, photo
    assert "skipped 4 (" in main_summary(second)

    # plan lists the same way and does not fail on the odd name.
    plan = ["plan", "--input", f"{awkward}/", "--output", str(out)]
    assert main([*plan, "--include", "ch1/*.svg"]) == 0
    assert "removed    " not in capsys.readouterr().out  # nothing would be removed
    # Without --include the SVG it brought back is left out again, so it would be removed.
    assert main(plan) == 0
    assert f"removed    {awkward}/ch1/extra.svg" in capsys.readouterr().out


def main_summary(run: Run) -> str:
    from chunkmill.pipeline.report import summary

    return summary(run.report, None)


_RUN_AS_NOBODY = [*AS_NOBODY, sys.executable, "-m", "chunkmill", "run"]


def test_a_folder_that_cannot_be_listed_removes_nothing():
    """Run twice as an unprivileged user (root lists any folder); before the second run a
    folder loses its permissions: its documents keep their rows, and an errors/ row says
    which folder could not be listed."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        base = Path(d)
        base.chmod(0o777)
        corpus = base / "corpus"
        (corpus / "locked").mkdir(parents=True)
        (corpus / "open.md").write_text("# Open\n\n" + prose("open"))
        (corpus / "locked" / "a.md").write_text("# Locked\n\n" + prose("locked"))
        for p in (corpus, corpus / "locked"):
            p.chmod(0o755)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": d}
        args = ["--input", f"{corpus}/**", "--output", f"{base}/out"]

        def run(run_id: str) -> Run:
            done = subprocess.run(
                [*_RUN_AS_NOBODY, *args, "--run-id", run_id],
                cwd=d, env=env, capture_output=True, text=True,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
            return Run(base / "out", run_id)

        run("r1")
        (corpus / "locked").chmod(0o000)
        second = run("r2")
        locked = f"{corpus}/locked/a.md"
        assert locked in {r["source_uri"] for r in second.table("manifest").to_pylist()}
        assert second.counts["docs_removed"] == 0
        assert second.counts["docs_kept_unlisted"] == 1
        removed = second.dir / "removed"
        assert not list(removed.glob("*.parquet")) or second.table("removed").num_rows == 0
        errors = second.rows("errors")
        assert [(e["source_uri"], e["stage"], e["reason"]) for e in errors] == [
            (f"{corpus}/locked", "list", storage.LIST_FAILED)
        ]
        assert set(schema.ERRORS.names) <= set(errors[0])
