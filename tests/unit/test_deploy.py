"""deploy/ stays in step with the code: template parameters are exactly ``chunkmill run``'s
options, every image and jar pins the Beam version of pyproject.toml, Flink versions agree
and are ones this Beam publishes, and schedules pass only stable arguments."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import apache_beam
import pytest
import yaml
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions

from chunkmill.pipeline import graph
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.pipeline.launch import run_parser, waits_for_job

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
FLINK_YAML = [
    DEPLOY / "flink" / "session.yaml",
    DEPLOY / "flink" / "submit-job.yaml",
    DEPLOY / "schedules" / "flink-cronjob.yaml",
]
SCHEDULES = sorted((DEPLOY / "schedules").iterdir())


def beam_pin() -> str:
    """The one Beam release pyproject.toml pins, in its dependencies and its extras."""
    pins = re.findall(
        r'"apache-beam(?:\[[a-z,]+\])?==([0-9.]+)"', (ROOT / "pyproject.toml").read_text()
    )
    assert len(pins) == 3 and len(set(pins)) == 1, pins  # the dependency, gcp, aws
    return pins[0]


def run_options() -> set[str]:
    # --config is how a command line brings these options from a file; a template's
    # parameters are its own such file.
    not_parameters = {"help", "config"}
    return {a.dest for a in run_parser()._actions if a.option_strings} - not_parameters


def test_template_parameters_are_exactly_the_run_options():
    meta = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    names = [p["name"] for p in meta["parameters"]]
    assert len(names) == len(set(names))
    assert set(names) == run_options()
    for p in meta["parameters"]:
        assert p["label"] and p["helpText"], p["name"]
        for regex in p.get("regexes", []):
            re.compile(regex)


def test_dockerfiles_pin_the_beam_version_of_pyproject():
    pin = beam_pin()
    assert apache_beam.__version__ == pin  # the SDK that builds jobs in these tests
    for dockerfile in (DEPLOY / "dataflow" / "Dockerfile", DEPLOY / "flink" / "Dockerfile"):
        text = dockerfile.read_text()
        assert re.findall(r"^ARG BEAM_VERSION=(\S+)$", text, re.M) == [pin], dockerfile
    dataflow = (DEPLOY / "dataflow" / "Dockerfile").read_text()
    assert "apache/beam_python${PYTHON_VERSION}_sdk:${BEAM_VERSION}" in dataflow
    assert dataflow.rstrip().splitlines()[-1].startswith("ENTRYPOINT")
    # The workers read and write gs:// and s3://: chunkmill with both cloud extras.
    assert 'pip install --no-cache-dir ".[gcp,aws]"' in dataflow
    # pip check is the last thing the image build runs.
    runs = [line for line in dataflow.splitlines() if "pip " in line]
    assert "pip check" in runs[-1]


def flink_documents() -> list[dict]:
    return [doc for path in FLINK_YAML for doc in yaml.safe_load_all(path.read_text())]


def container_args(doc: dict) -> list[str]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    return container["args"]


def test_flink_manifests_parse_and_pin_one_flink_and_one_beam_version():
    docs = flink_documents()
    assert {d["kind"] for d in docs} == {"FlinkDeployment", "Job", "CronJob"}
    (session,) = [d for d in docs if d["kind"] == "FlinkDeployment"]
    flink = session["spec"]["flinkVersion"].removeprefix("v").replace("_", ".")
    assert flink in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    assert session["spec"]["image"].startswith(f"flink:{flink}")
    pool = [
        c
        for c in session["spec"]["taskManager"]["podTemplate"]["spec"]["containers"]
        if c["name"] == "beam-worker-pool"
    ]
    assert pool and pool[0]["args"] == ["--worker_pool"]
    flink_dockerfile = (DEPLOY / "flink" / "Dockerfile").read_text()
    assert f"ARG FLINK_VERSION={flink}" in flink_dockerfile

    pin = beam_pin()
    images = {pool[0]["image"]}
    for doc in docs:
        if doc["kind"] == "FlinkDeployment":
            continue
        args = container_args(doc)
        assert f"--flink_version={flink}" in args
        assert "--environment_type=EXTERNAL" in args
        (jar,) = [a for a in args if a.startswith("--flink_job_server_jar=")]
        assert jar.endswith(f"beam-runners-flink-{flink}-job-server-{pin}.jar")
        spec = doc["spec"]["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else doc["spec"]
        images.add(spec["template"]["spec"]["containers"][0]["image"])
    assert all(image.endswith(f"beam{pin}") for image in images), images


@pytest.mark.parametrize("path", SCHEDULES, ids=lambda p: p.name)
def test_schedules_pass_only_stable_arguments(path):
    text = path.read_text()
    for forbidden in ("--run-id", "--prior-manifest", "run_id", "prior_manifest"):
        assert forbidden not in text, (path.name, forbidden)
    if path.suffix == ".py":
        ast.parse(text, filename=str(path))
    if path.suffix == ".yaml":
        (doc,) = yaml.safe_load_all(text)
        args = container_args(doc)
        assert args[0] == "run" and not {a.split("=")[0] for a in args} & {"--run-id"}


def test_schedules_cover_dataflow_airflow_and_flink():
    assert {p.suffix for p in SCHEDULES} == {".tf", ".py", ".yaml"}


@pytest.mark.parametrize("path", [p for p in FLINK_YAML if "session" not in p.name], ids=str)
def test_flink_submitters_are_accepted_by_the_cli_and_submit_and_return(path, tmp_path):
    (doc,) = yaml.safe_load_all(path.read_text())
    args = container_args(doc)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("hello\n")
    local = {"--input": f"{tmp_path}/docs/**", "--output": str(tmp_path / "out")}
    argv = [
        f"{a.split('=')[0]}={local[a.split('=')[0]]}" if a.split("=")[0] in local else a
        for a in args
    ]
    settings = run_settings(argv[1:])  # every flag is chunkmill's or Beam's
    assert not waits_for_job(graph.pipeline_options(settings))


def beam_option_names() -> set[str]:
    captured: list = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=captured.append)
    return {a.dest for a in captured[0]._actions}


def test_dataflow_schedules_pass_only_template_parameters_or_beam_options():
    meta = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    allowed = {p["name"] for p in meta["parameters"]} | beam_option_names()
    dag = ast.parse((DEPLOY / "schedules" / "chunkmill_dag.py").read_text())
    (params,) = [
        node.values[node.keys.index(key)]
        for node in ast.walk(dag)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant) and key.value == "parameters"
    ]
    dag_keys = {k.value for k in params.keys}
    tf = (DEPLOY / "schedules" / "cloud_scheduler.tf").read_text()
    block = re.search(r"parameters = \{(.*?)\}", tf, re.S)
    assert block
    tf_keys = set(re.findall(r"^\s*(\w+)\s*=", block.group(1), re.M))
    for keys in (dag_keys, tf_keys):
        assert {"input", "output", "sdk_container_image"} <= keys <= allowed, keys
