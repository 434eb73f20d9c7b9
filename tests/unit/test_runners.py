"""Runs go only to runners chunkmill works on, and a local run uses the same engine whether
or not Prism could be downloaded."""

from __future__ import annotations

import threading
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
from apache_beam.runners.portability import prism_runner

from chunkmill.pipeline import graph, launch, runners
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.run import run_settings
from chunkmill.pipeline.options import UsageError

SUPPORTED_LIST = "use DirectRunner, DataflowRunner, FlinkRunner, PortableRunner, PrismRunner"


class NightlyDataflowRunner(DataflowRunner):
    """A user's own runner class built on a supported one."""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nhello\n")
    return tmp_path / "docs"


@pytest.mark.parametrize(
    ("runner", "why"),
    [
        ("DaskRunner", "it drops tagged outputs"),
        ("dask", "it drops tagged outputs"),
        # By its path, without importing it (dask itself need not be installed).
        ("apache_beam.runners.dask.dask_runner.DaskRunner", "it drops tagged outputs"),
        ("SparkRunner", "not tested"),
        ("BundleBasedDirectRunner", "legacy"),
        ("apache_beam.runners.test.TestDirectRunner", "not tested"),
        ("apache_beam.runners.runner.PipelineRunner", "not tested"),
    ],
)
def test_a_runner_chunkmill_does_not_work_on_is_refused(runner, why, docs, tmp_path, capsys):
    out = tmp_path / "out"
    for sep in (["--runner", runner], [f"--runner={runner}"]):
        assert main(["run", "--input", f"{docs}/*", "--output", str(out), *sep]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("chunkmill: error: argument --runner: ")
        assert "is not supported" in err and why in err and SUPPORTED_LIST in err, err
    assert not out.exists()


def test_plan_refuses_it_too(docs, capsys):
    assert main(["plan", "--input", f"{docs}/*", "--runner", "DaskRunner"]) == 2
    assert "DaskRunner is not supported" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        ("Drect", "unknown runner 'Drect'; did you mean DirectRunner?"),
        ("Nonesuch", f"unknown runner 'Nonesuch'; {SUPPORTED_LIST}"),
        ("no.such.module.Runner", "cannot load no.such.module.Runner"),
        ("chunkmill.pipeline.options.RunSettings", "is not a Beam PipelineRunner"),
    ],
)
def test_a_runner_that_names_nothing_is_one_line(runner, message, docs):
    with pytest.raises(UsageError, match="argument --runner: ") as e:
        run_settings(["--input", f"{docs}/*", f"--runner={runner}"])
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("runner", "engine"),
    [
        ("DirectRunner", "DirectRunner"),
        ("direct", "DirectRunner"),
        ("apache_beam.runners.direct.direct_runner.DirectRunner", "DirectRunner"),
        ("FnApiRunner", "FnApiRunner"),
        ("PrismRunner", "PrismRunner"),
        ("PortableRunner", "PortableRunner"),
        ("FlinkRunner", "FlinkRunner"),
        ("DataflowRunner", "DataflowRunner"),
        ("dataflow", "DataflowRunner"),
        (f"{__name__}.NightlyDataflowRunner", "DataflowRunner"),
    ],
)
def test_supported_runners_pass(runner, engine):
    assert runners.engine(runner) == engine
    endpoint = ["--job_endpoint=localhost:8099"] if engine == "PortableRunner" else []
    runners.check([f"--runner={runner}", *endpoint])


@pytest.mark.parametrize(
    ("beam_args", "runner"),
    [
        ([], runners.IN_PROCESS_RUNNER),
        (["--runner=DirectRunner"], runners.IN_PROCESS_RUNNER),
        (["--runner", "FnApiRunner"], runners.IN_PROCESS_RUNNER),
        (
            ["--runner=apache_beam.runners.direct.direct_runner.DirectRunner"],
            runners.IN_PROCESS_RUNNER,
        ),
        (["--runner=PrismRunner"], "PrismRunner"),
        (["--runner=DataflowRunner", "--dry_run=True"], "DataflowRunner"),
    ],
)
def test_local_runs_use_the_in_process_engine_and_prism_only_by_name(beam_args, runner, docs):
    settings = run_settings(["--input", f"{docs}/*", *beam_args])
    options = graph.pipeline_options(settings)
    assert options.get_all_options()["runner"] == runner
    # The in-process engine builds the graph without Beam's construction-time type checks;
    # a job for any other runner is built as Beam builds it.
    local = runner == runners.IN_PROCESS_RUNNER
    assert options.get_all_options()["pipeline_type_check"] is not local
    if local:
        assert launch.runner_name(options) == "DirectRunner"
        assert launch.waits_for_job(options)


def test_the_default_engine_never_tries_prism(docs, monkeypatch):
    """Where Prism can be downloaded, Beam's DirectRunner runs the pipeline there instead of
    in-process. Stand in for an online machine: any attempt to start Prism is recorded (and
    fails, so that Beam would fall back and the run still finish)."""
    attempts = []

    def prism_is_reachable(self, pipeline, options):
        attempts.append(pipeline)
        raise RuntimeError("stand-in: Prism would have run this pipeline")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", prism_is_reachable)
    settings = run_settings(["--input", f"{docs}/*"])
    with beam.Pipeline(options=graph.pipeline_options(settings)) as p:
        _ = p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
    assert attempts == []


class _SeesSamplerThreads(beam.DoFn):
    """Counts its elements, and the threads sampling Beam's step times it sees beside it."""

    def process(self, element):
        from apache_beam.runners.worker import statesampler_fast

        def samples(thread: threading.Thread) -> bool:
            target = getattr(thread, "_target", None)
            return isinstance(getattr(target, "__self__", None), statesampler_fast.StateSampler)

        beam.metrics.Metrics.counter("test", "elements").inc()
        beam.metrics.Metrics.counter("test", "samplers").inc(
            sum(samples(t) for t in threading.enumerate())
        )
        yield element


def _run_locally(elements: int) -> dict[str, int]:
    """The counters of a local run over ``elements`` elements."""
    options = PipelineOptions(["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    pipeline = beam.Pipeline(runner=runners.InProcessRunner(), options=options)
    _ = pipeline | beam.Create(range(elements)) | beam.ParDo(_SeesSamplerThreads())
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("test"))["counters"]
    return {c.key.metric.name: c.committed for c in counters}


def test_a_local_run_keeps_no_thread_sampling_its_bundles_and_its_metrics_still_count():
    from apache_beam.runners.worker import statesampler

    beam_sampler = statesampler.StateSampler
    counters = _run_locally(5)
    assert counters["elements"] == 5
    assert counters.get("samplers", 0) == 0  # Beam's own sampler runs a thread per bundle
    assert statesampler.StateSampler is beam_sampler  # put back when the run ends


def test_beams_sampler_is_put_back_only_when_the_last_local_run_ends():
    from apache_beam.runners.worker import statesampler

    beam_sampler = statesampler.StateSampler
    swap = runners.UnsampledBundles()
    with swap:
        with swap:
            assert statesampler.StateSampler is not beam_sampler
        assert statesampler.StateSampler is not beam_sampler
        assert issubclass(statesampler.StateSampler, beam_sampler)
    assert statesampler.StateSampler is beam_sampler


def _local_stages(pipeline: beam.Pipeline) -> list[str]:
    """The names of the fused stages the local engine runs ``pipeline`` in."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    runner = runners._fn_api_runner()(
        provision_info=fn_runner.ExtendedProvisionInfo(None)  # type: ignore[arg-type]
    )
    _, stages = runner.create_stages(pipeline.to_runner_api())
    return [stage.name for stage in stages]


def _flatten_then_group(pipeline: beam.Pipeline, *, also_counted: bool = False):
    """Three PCollections of keyed elements (two coders among them), flattened and grouped;
    with ``also_counted``, the Flatten feeds a count beside the grouping."""
    words = pipeline | "Words" >> beam.Create([("a", "x"), ("b", "y")])
    numbers = pipeline | "Numbers" >> beam.Create([("a", 1), ("c", 2), ("a", 3)])
    more = pipeline | "More" >> beam.Create(range(4)) | beam.Map(lambda i: ("b", i * 10))
    flat = (words, numbers, more) | "Together" >> beam.Flatten()
    grouped = (
        flat
        | "Group" >> beam.GroupByKey()
        | "Sorted" >> beam.MapTuple(lambda key, values: (key, sorted(map(str, values))))
    )
    counted = flat | "Count" >> beam.combiners.Count.Globally() if also_counted else None
    return grouped, counted


@pytest.mark.parametrize(
    "mode, workers", [("in_memory", 1), ("multi_threading", 2), ("multi_processing", 2)]
)
def test_a_flatten_into_a_grouping_is_written_straight_into_it_and_groups_everything(mode, workers):
    from apache_beam.testing.util import assert_that, equal_to

    options = PipelineOptions([f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"])
    with beam.Pipeline(runner=runners.InProcessRunner(), options=options) as pipeline:
        grouped, _ = _flatten_then_group(pipeline)
        assert_that(
            grouped,
            equal_to([("a", ["1", "3", "x"]), ("b", ["0", "10", "20", "30", "y"]), ("c", ["2"])]),
        )
        stages = _local_stages(pipeline)
    assert not [name for name in stages if "Together/Read" in name]  # no relaying stage
    assert [name for name in stages if "Group/Read" in name]


def test_a_flatten_that_feeds_more_than_a_grouping_keeps_its_stage():
    from apache_beam.testing.util import assert_that, equal_to

    options = PipelineOptions(["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    with beam.Pipeline(runner=runners.InProcessRunner(), options=options) as pipeline:
        grouped, counted = _flatten_then_group(pipeline, also_counted=True)
        assert_that(grouped | beam.Keys(), equal_to(["a", "b", "c"]), label="Keys")
        assert_that(counted, equal_to([9]), label="Counted")
        stages = _local_stages(pipeline)
    assert [name for name in stages if "Together/Read" in name]
