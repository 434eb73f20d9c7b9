"""Which runs wait for their job and which submit and return; template argument mapping."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from chunkmill.pipeline import launch
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.pipeline.options import UsageError


@pytest.mark.parametrize(
    ("flags", "waits"),
    [
        ([], True),  # DirectRunner, chunkmill's default
        (["--runner=DirectRunner"], True),
        (["--runner=FnApiRunner"], True),
        (["--runner=apache_beam.runners.direct.direct_runner.DirectRunner"], True),
        (["--runner=PortableRunner", "--job_endpoint=embed"], True),
        (["--runner=FlinkRunner"], True),  # [auto]: a local Flink mini cluster
        (["--runner=FlinkRunner", "--flink_master=[local]"], True),
        (
            ["--runner=FlinkRunner", "--flink_master=flink:8081", "--environment_type=LOOPBACK"],
            True,
        ),
        (["--runner=SparkRunner"], True),
        (["--runner=DataflowRunner"], False),
        (["--runner=FlinkRunner", "--flink_master=flink-rest:8081"], False),
        (["--runner=PortableRunner", "--job_endpoint=jobserver:8099"], False),
        (["--runner=SparkRunner", "--spark_master_url=spark://master:7077"], False),
    ],
)
def test_waits_only_for_jobs_that_run_in_this_process(flags, waits):
    if not any(f.startswith("--runner") for f in flags):
        flags = ["--runner=DirectRunner", *flags]
    assert launch.waits_for_job(PipelineOptions(flags)) is waits


@pytest.mark.parametrize("flag", launch.SECRET_BEAM_FLAGS)
def test_credential_flags_are_named_never_echoed(flag):
    with pytest.raises(UsageError) as e:
        launch.refuse_secret_flags(["--project=p", f"{flag}=hunter2-secret"])
    assert flag in str(e.value) and "hunter2" not in str(e.value)


def test_template_parameters_map_to_chunkmill_flags(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("hello\n")
    argv = launch.template_args(
        [
            f"--input={docs}/*",
            f"--output={tmp_path / 'out'}",
            "--run_id=nightly-1",
            "--strategy=paragraph",
            "--max_tokens=300",
            "--overlap_tokens=20",
            "--runner=DirectRunner",
            "--max_num_workers=3",
        ]
    )
    assert "--max-tokens=300" in argv and "--max_num_workers=3" in argv
    settings = run_settings(argv)
    assert settings.run_id == "nightly-1"
    params = settings.config.description["params"]
    assert (params["max_tokens"], params["overlap_tokens"]) == (300, 20)
    assert "--max_num_workers=3" in settings.beam_args


def test_template_switches_take_true_or_false():
    assert launch.template_args(["--follow_symlinks=true", "--exclude=drafts/**"]) == [
        "--follow-symlinks",
        "--exclude=drafts/**",
    ]
    assert launch.template_args(["--follow_symlinks=false"]) == []


@pytest.mark.parametrize(("value", "flags"), [("true", ["--retry-failed"]), ("false", [])])
def test_a_switch_is_true_or_false_as_a_template_parameter(value, flags):
    assert launch.template_args([f"--retry_failed={value}", "--runner=X"]) == [*flags, "--runner=X"]
