"""chunkmill.pipeline.preflight: the prior manifest is exactly what a finished run's ``_SUCCESS``
lists, every file there with its recorded size and rows, or the run is refused in one line.
Runs are written here by hand (tests.helpers.write_finished_run), damaged, then proven."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkmill import schema
from chunkmill.pipeline import preflight
from chunkmill.pipeline.cli import main
from chunkmill.transforms import publish, runstate
from tests.helpers import write_finished_run
from tests.unit.test_prior_integrity import hand_rows


def manifest(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema.MANIFEST)


@pytest.fixture
def run(tmp_path) -> Path:
    """A finished run r1 whose manifest is two files of 3 and 4 rows, named by LATEST."""
    rows = hand_rows(7)
    return Path(
        write_finished_run(tmp_path / "out", "r1", [manifest(rows[:3]), manifest(rows[3:])])
    )


def refused(run_folder: Path) -> str:
    with pytest.raises(preflight.PriorRefused) as info:
        preflight.prove_run(str(run_folder), "r1")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_sound_run_is_exactly_the_files_its_success_lists(run):
    # A stray file beside them (a copy, a leftover) is not part of the manifest.
    shutil.copy(
        run / "manifest" / "part-00000-of-00002.parquet", run / "manifest" / "stray.parquet"
    )
    proven = preflight.prove_run(str(run), "r1")
    assert proven.files == (
        str(run / "manifest" / "part-00000-of-00002.parquet"),
        str(run / "manifest" / "part-00001-of-00002.parquet"),
    )


def test_a_missing_manifest_file_is_refused_naming_it(run):
    (run / "manifest" / "part-00001-of-00002.parquet").unlink()
    message = refused(run)
    assert "prior run r1 is missing manifest/part-00001-of-00002.parquet" in message
    assert "listed in its _SUCCESS" in message and "--prior-manifest" in message


def test_a_truncated_manifest_file_is_refused_by_its_size(run):
    path = run / "manifest" / "part-00000-of-00002.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    assert "bytes but its _SUCCESS records" in refused(run)


def test_a_file_replaced_by_one_of_other_rows_is_refused_by_its_row_count(run):
    path = run / "manifest" / "part-00000-of-00002.parquet"
    size = path.stat().st_size
    pq.write_table(manifest(hand_rows(2)), path, write_page_checksum=True)
    entry = json.loads((run / "_SUCCESS").read_text())["tables"]["manifest"][0]
    entry["bytes"] = path.stat().st_size  # the size alone would not tell
    report = json.loads((run / "_SUCCESS").read_text())
    report["tables"]["manifest"][0] = entry
    (run / "_SUCCESS").write_text(json.dumps(report))
    assert path.stat().st_size != size
    assert "holds 2 rows but its _SUCCESS records 3" in refused(run)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut short
        lambda text: "",
        lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "tables"}),
        lambda text: json.dumps({**json.loads(text), "tables": {"manifest": ["../../etc"]}}),
        lambda text: "[1, 2]",
    ],
    ids=["truncated", "empty", "no tables", "foreign paths", "not an object"],
)
def test_a_success_that_is_not_a_valid_report_means_the_run_did_not_finish(run, damage):
    success = run / "_SUCCESS"
    success.write_text(damage(success.read_text()))
    message = refused(run)
    assert "did not finish" in message and "_SUCCESS" in message


def test_a_run_without_success_is_refused(run):
    (run / "_SUCCESS").unlink()
    assert "did not finish (it has no _SUCCESS)" in refused(run)


def test_a_success_of_an_earlier_release_lists_bare_paths_and_is_still_proven(run):
    report = json.loads((run / "_SUCCESS").read_text())
    report["tables"] = {k: [e["path"] for e in v] for k, v in report["tables"].items()}
    (run / "_SUCCESS").write_text(json.dumps(report))
    assert len(preflight.prove_run(str(run), "r1").files) == 2
    (run / "manifest" / "part-00001-of-00002.parquet").unlink()
    assert "missing manifest/part-00001-of-00002.parquet" in refused(run)


@pytest.mark.parametrize("table", ["chunks", "removed", "errors"])
def test_another_table_of_a_run_is_refused_by_name(run, table):
    for path in (run / table, run / table / "part-00000-of-00001.parquet"):
        with pytest.raises(preflight.PriorRefused, match=f"is the {table} table of run"):
            preflight.prove_path(str(path))


def test_the_manifest_folder_of_a_run_is_proven_through_its_success(run):
    (run / "manifest" / "part-00001-of-00002.parquet").unlink()
    with pytest.raises(preflight.PriorRefused, match="missing manifest/part-00001"):
        preflight.prove_path(str(run / "manifest"))
    with pytest.raises(preflight.PriorRefused, match="missing manifest/part-00001"):
        preflight.prove_path(str(run))


def test_a_glob_inside_a_run_picks_among_the_files_its_success_lists(run):
    shutil.copy(
        run / "manifest" / "part-00000-of-00002.parquet", run / "manifest" / "stray.parquet"
    )
    proven = preflight.prove_path(str(run / "manifest" / "*.parquet"))
    assert [Path(p).name for p in proven.files] == [
        "part-00000-of-00002.parquet",
        "part-00001-of-00002.parquet",
    ]


def test_a_manifest_from_elsewhere_has_every_footer_checked(tmp_path):
    folder = tmp_path / "exported"
    folder.mkdir()
    pq.write_table(manifest(hand_rows(3)), folder / "a.parquet")
    assert len(preflight.prove_path(str(folder / "*.parquet")).files) == 1
    # A second file of another table's schema: refused, named, whichever file it is.
    pq.write_table(schema.CHUNKS.empty_table(), folder / "b.parquet")
    with pytest.raises(preflight.PriorRefused, match=r"b\.parquet is the chunks table"):
        preflight.prove_path(str(folder / "*.parquet"))
    (folder / "b.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(preflight.PriorRefused, match=r"b\.parquet is not a readable Parquet"):
        preflight.prove_path(str(folder))
    pq.write_table(pa.table({"x": [1]}), folder / "b.parquet")
    with pytest.raises(preflight.PriorRefused, match=r"b\.parquet is not a chunkmill manifest"):
        preflight.prove_path(str(folder))


def test_a_second_file_of_another_schema_version_is_refused(tmp_path):
    folder = tmp_path / "exported"
    folder.mkdir()
    pq.write_table(manifest(hand_rows(3)), folder / "a.parquet")
    old = manifest(hand_rows(2)).replace_schema_metadata({b"chunkmill.schema_version": b"1"})
    pq.write_table(old, folder / "b.parquet")
    with pytest.raises(preflight.PriorRefused, match=r"b\.parquet has schema version 1"):
        preflight.prove_path(str(folder))


def test_an_unfinished_run_folder_is_refused_whichever_way_it_is_named(tmp_path):
    base = Path(write_finished_run(tmp_path / "out", "r1", [manifest(hand_rows(3))]))
    (base / "_SUCCESS").unlink()
    for path in (base, base / "manifest", base / "manifest" / "*.parquet"):
        with pytest.raises(preflight.PriorRefused, match="did not finish"):
            preflight.prove_path(str(path))


def test_through_the_cli_a_damaged_latest_run_is_one_line_and_exit_2(run, docs, capsys):
    (run / "manifest" / "part-00001-of-00002.parquet").unlink()
    out = run.parent.parent
    code = main(["run", "--input", str(docs / "*"), "--output", str(out), "--run-id", "r2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("chunkmill: error: prior run r1 is missing manifest/part-00001")
    assert not (out / "runs" / "r2").exists()
    code = main(["plan", "--input", str(docs / "*"), "--output", str(out)])
    assert code == 2 and "is missing" in capsys.readouterr().err


def test_publish_records_every_file_with_its_rows_and_bytes_and_leaves_no_staging(tmp_path):
    base = tmp_path / "runs" / "r1"
    written = []
    for name, table_schema in schema.TABLES.items():
        (base / name).mkdir(parents=True)
        rows = hand_rows(4) if name == "manifest" else []
        path = base / name / "part-00000-of-00001.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=table_schema), path)
        written.append(str(path))
    report = {"run_id": "r1", "started_at": "2026-11-20T01:00:00Z", "limits": {}}
    publish.publish(written, {"docs_listed": 1}, str(tmp_path), "r1", report)
    success = runstate.parse_success((base / "_SUCCESS").read_text())
    assert success["tables"]["manifest"] == [
        {
            "path": "manifest/part-00000-of-00001.parquet",
            "rows": 4,
            "bytes": (base / "manifest" / "part-00000-of-00001.parquet").stat().st_size,
        }
    ]
    assert [e["rows"] for e in success["tables"]["chunks"]] == [0]
    assert sorted(p.name for p in base.iterdir()) == sorted(["_SUCCESS", *schema.TABLES])
    assert preflight.prove_run(str(base), "r1").files == (written[1],)


def test_publish_writes_success_beside_and_renames_it_over(tmp_path, monkeypatch):
    """A reader never sees a half-written _SUCCESS: the text goes to a staging file, and the
    rename makes it appear whole."""
    from apache_beam.io.filesystems import FileSystems

    seen: list[tuple[str, str]] = []
    real = FileSystems.rename

    def rename(sources, destinations):
        seen.append((Path(sources[0]).name, Path(destinations[0]).name))
        return real(sources, destinations)

    monkeypatch.setattr(FileSystems, "rename", staticmethod(rename))
    report = {"run_id": "r1", "started_at": "2026-11-20T01:00:00Z", "limits": {}}
    publish.publish([], {}, str(tmp_path), "r1", report)
    assert ("_SUCCESS.tmp", "_SUCCESS") in seen


def test_publish_refuses_a_mass_removal_and_leaves_latest_alone(tmp_path):
    from chunkmill.refusal import RunRefused

    publish.publish([], {}, str(tmp_path), "r1", {"run_id": "r1", "started_at": "1"})
    report = {"run_id": "r2", "started_at": "2"}
    policy = publish.PublishPolicy(max_removed_ratio=0.5)
    counts = {"docs_prior": 10, "docs_removed": 6}
    with pytest.raises(RunRefused, match="removes 6 of 10 documents"):
        publish.publish([], counts, str(tmp_path), "r2", report, policy)
    assert not (tmp_path / "runs" / "r2" / "_SUCCESS").exists()
    assert (tmp_path / "LATEST").read_text().strip() == "r1"


def test_no_refusal_advises_a_bare_prior_manifest_none(run, tmp_path):
    """A run without a prior is held to LATEST's documents only while LATEST can be read:
    past a damaged LATEST the way forward is an older run, never none; past a damaged prior
    run, none is offered with what still guards it."""
    (run / "manifest" / "part-00001-of-00002.parquet").unlink()
    message = refused(run)
    assert "older finished run" in message
    assert "none to chunk everything again (still refused if it would drop more than " in message
    (tmp_path / "out" / "LATEST").write_text("not a run id!\n")
    with pytest.raises(preflight.UsageError) as info:
        preflight.resolve_prior("auto", str(tmp_path / "out"))
    assert "older finished run" in str(info.value) and "none" not in str(info.value)


def test_a_manifest_of_schema_4_is_proven_and_read_with_null_in_the_columns_added_since(
    tmp_path,
):
    from chunkmill.transforms import prior

    rows = hand_rows(3)
    v4 = manifest(rows).drop_columns(["extracted_by"])
    v4 = v4.replace_schema_metadata({b"chunkmill.schema_version": b"4"})
    base = Path(write_finished_run(tmp_path / "out", "r1", [v4]))
    preflight.prove_run(str(base), "r1")
    (part,) = prior.list_parts(str(base / "manifest" / "part-00000-of-00001.parquet"))
    read = prior.read_part(part, schema.MANIFEST_FIELDS)
    assert read["extracted_by"].to_pylist() == [None] * 3
    kept = prior.as_table(v4, schema.MANIFEST, is_new=pa.array([False] * 3))
    assert kept.schema.equals(schema.MANIFEST, check_metadata=False)
    # A required column is never filled in: a manifest without one is refused.
    broken = manifest(rows).drop_columns(["chunk_hash"])
    pq.write_table(broken, base / "manifest" / "part-00000-of-00001.parquet")
    with pytest.raises(preflight.PriorRefused, match="columns differ from the manifest's"):
        preflight.check_footer(str(base / "manifest" / "part-00000-of-00001.parquet"))
