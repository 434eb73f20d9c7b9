"""Which Beam runners chunkmill runs on, and the engine of a local run.

chunkmill's output is only as right as the runner under it: Beam's DaskRunner, for one,
drops tagged outputs and what ``finish_bundle`` emits, so a run on it "succeeds" and writes
nothing. A run is therefore allowed only on the runners chunkmill is tested or deployed on
(``SUPPORTED``); any other is a usage error before a graph is built.

The local engine is Beam's FnApiRunner in this process, whatever the machine can download:
Beam's own ``DirectRunner`` switches to the Prism runner wherever it can fetch Prism's binary,
so the same command would run on different engines online and offline. Here ``DirectRunner``
(the default) and ``FnApiRunner`` both mean ``InProcessRunner``; Prism runs only when asked
for by name.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner

from chunkmill import extras
from chunkmill.pipeline.options import UsageError
from chunkmill.pipeline.usage import beam_parser, nearest

# The runners chunkmill runs on, by the name of Beam's class, and where each is exercised.
SUPPORTED = {
    "DirectRunner": "the default: Beam's FnApiRunner in this process (every e2e test)",
    "DataflowRunner": "deploy/dataflow (tests/e2e/test_dataflow.py builds its job)",
    "FlinkRunner": "deploy/flink, through Beam's portable job server",
    "PortableRunner": "any portable job server (tests/e2e/test_portable.py)",
    "PrismRunner": "Beam's Prism, a portable runner, only when asked for by name",
    "FnApiRunner": "the same engine as DirectRunner, by its own name",
}
# Why a runner Beam offers is refused, where it is known.
REFUSED = {
    "DaskRunner": "it drops tagged outputs",
    "BundleBasedDirectRunner": "it is Beam's legacy local runner; use DirectRunner",
    "InteractiveRunner": "it is for notebooks; use DirectRunner",
    "SparkRunner": "it is not tested with chunkmill; PortableRunner with a Spark job "
    "server's --job_endpoint runs the same portable path",
}
# Names Beam gives its classes that chunkmill knows by another name (DirectRunner is an
# alias of SwitchingDirectRunner).
_ALIASES = {"SwitchingDirectRunner": "DirectRunner"}
# The names that mean the local engine.
LOCAL_ENGINE_NAMES = frozenset({"DirectRunner", "FnApiRunner"})


class InProcessRunner(PipelineRunner):
    """The local engine: Beam's FnApiRunner in this process, set up as Beam's DirectRunner
    sets it up for a batch pipeline (the pipeline options are handed to the SDK workers of
    ``--direct_running_mode=multi_processing``, so they see ``--s3_*`` and the like)."""

    def run_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        )
        runner = _fn_api_runner()(provision_info=provision)
        with UNSAMPLED_BUNDLES:
            return runner.run_pipeline(pipeline, options)


class UnsampledBundles:
    """While a local run runs, the bundles it runs in this process keep no sampling thread.

    Beam's bundle processor starts a thread per bundle that wakes every few milliseconds to
    add the time spent to each step's ``-msecs`` counters, sleeping longer each time (up to
    200 ms), and joins it when the bundle ends: a bundle's end waits out the thread's sleep,
    about a tenth of the bundle's own time. Nothing reads those counters on the local
    engine, and the wait cost a night 45 to 60 ms and a first run 0.15 to 0.25 s of wall
    time. The bundle processor finds its sampler class on Beam's module when it is made, so
    the class is swapped there while local runs run, and Beam's is put back when the last
    of them ends. What the sampler does besides sampling stays: it is the bundle's current
    tracker, through which Beam's metrics find the step's container."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs = 0
        self._beam: Any = None  # Beam's own class while it is swapped

    def __enter__(self) -> None:
        from apache_beam.runners.worker import statesampler

        with self._lock:
            if self._runs == 0:
                self._beam = statesampler.StateSampler
                statesampler.StateSampler = _unsampled(self._beam)  # type: ignore[misc]
            self._runs += 1

    def __exit__(self, *exc: object) -> None:
        from apache_beam.runners.worker import statesampler

        with self._lock:
            self._runs -= 1
            if self._runs == 0:
                statesampler.StateSampler = self._beam  # type: ignore[misc]


UNSAMPLED_BUNDLES = UnsampledBundles()


def _unsampled(beam_sampler: Any) -> Any:
    """Beam's StateSampler class without its sampling thread (``UnsampledBundles``)."""
    from apache_beam.runners.worker import statesampler

    class UnsampledStateSampler(beam_sampler):  # type: ignore[misc,valid-type]
        """Tracks the bundle's current step as Beam's does; never samples its time."""

        def start(self) -> None:
            self.tracked_thread = threading.current_thread()
            statesampler.set_current_tracker(self)
            self.started = True

        def stop(self) -> None:
            statesampler.set_current_tracker(None)
            self.finished = True

    return UnsampledStateSampler


# Beam's command for the SDK workers of --direct_running_mode=multi_processing (run by
# /bin/sh), and chunkmill's: the same worker, started with SIGINT ignored. Ctrl-C in a
# terminal reaches the whole process group; chunkmill answers it in one line and stops its
# workers (pipeline/interrupts.py), where each worker would print a KeyboardInterrupt
# traceback, or a fatal error when it was still starting. An ignored signal stays ignored
# across exec, and Python then leaves it so.
BEAM_SDK_WORKER = f"{sys.executable} -m apache_beam.runners.worker.sdk_worker_main"
SDK_WORKER = f"trap '' INT; exec {BEAM_SDK_WORKER}"


def _fn_api_runner() -> Any:
    """The class, made when a local run starts (Beam's runner module is imported then)."""
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    class FnApiRunner(fn_runner.FnApiRunner):  # type: ignore[misc]
        """Beam's FnApiRunner whose multi-process SDK workers ignore SIGINT."""

        def run_via_runner_api(self, pipeline_proto: Any, options: PipelineOptions) -> Any:
            for environment in pipeline_proto.components.environments.values():
                if (
                    environment.urn == python_urns.SUBPROCESS_SDK
                    and environment.payload == BEAM_SDK_WORKER.encode()
                ):
                    environment.payload = SDK_WORKER.encode()
            return super().run_via_runner_api(pipeline_proto, options)

        def create_stages(self, pipeline_proto: Any) -> tuple[Any, list[Any]]:
            context, stages = super().create_stages(pipeline_proto)
            return context, without_relays(stages, context.data_channel_coders)

    return FnApiRunner


def without_relays(stages: list[Any], channel_coders: dict[str, str]) -> list[Any]:
    """The local engine's stages (topologically sorted, fused) without the stages that only
    relay a buffer into a grouping: what was written to such a buffer is written straight
    into the grouping's buffer instead.

    Beam's FnApiRunner materialises every Flatten of several inputs as a buffer that all of
    them write and a stage that reads it back. When a GroupByKey is all that follows, that
    stage decodes every element only to encode it again into the grouping's buffer, and
    costs a bundle of its own. A grouping's buffer takes writes from any number of stages
    (the runner holds back the stage reading it until every stage writing it has run, as
    it does for a Flatten's buffer), so the Flatten's inputs write there and the relay is
    dropped: a night's graph has three such Flattens (the join's, the hash marks', the
    verdicts'). A relay is dropped only where its writers encode with the coder the
    grouping decodes with and nothing else reads its buffer; anything else is left as Beam
    made it. Dataflow and Flink fuse Flattens away on their own."""
    from apache_beam.runners.portability.fn_api_runner.translations import (
        only_element,
        split_buffer_id,
    )
    from apache_beam.runners.worker.bundle_processor import DATA_INPUT_URN, DATA_OUTPUT_URN

    writers: dict[bytes, list[Any]] = {}  # buffer -> the transforms writing it
    readers: dict[bytes, int] = {}  # buffer -> how many transforms read it
    for stage in stages:
        for transform in stage.transforms:
            if transform.spec.urn == DATA_OUTPUT_URN:
                writers.setdefault(transform.spec.payload, []).append(transform)
            elif transform.spec.urn == DATA_INPUT_URN:
                readers[transform.spec.payload] = readers.get(transform.spec.payload, 0) + 1
    relays: dict[Any, frozenset[Any]] = {}  # a dropped stage -> the stages it must follow
    for stage in stages:
        if len(stage.transforms) != 2:
            continue
        read, write = stage.transforms
        if (
            read.spec.urn != DATA_INPUT_URN
            or write.spec.urn != DATA_OUTPUT_URN
            or list(read.outputs.values()) != list(write.inputs.values())
        ):
            continue
        relayed, grouping = read.spec.payload, write.spec.payload
        if (
            split_buffer_id(relayed)[0] != "materialize"
            or split_buffer_id(grouping)[0] != "group"
            or readers.get(relayed) != 1
            or relayed not in writers
        ):
            continue
        coder = channel_coders.get(only_element(write.inputs.values()))
        if any(
            channel_coders.get(only_element(t.inputs.values())) != coder for t in writers[relayed]
        ):
            continue
        for transform in writers[relayed]:
            transform.spec.payload = grouping
        relays[stage] = stage.must_follow
    for stage in stages:
        if stage not in relays and relays.keys() & stage.must_follow:
            stage.must_follow = frozenset(
                after for before in stage.must_follow for after in relays.get(before, {before})
            )
    return [stage for stage in stages if stage not in relays]


IN_PROCESS_RUNNER = f"{InProcessRunner.__module__}.{InProcessRunner.__qualname__}"


def requested(beam_args: Sequence[str]) -> str | None:
    """The value of ``--runner`` among Beam's flags (the last one, as Beam reads it)."""
    runner = beam_parser().parse_known_args(list(beam_args))[0].runner
    return runner if isinstance(runner, str) else None


def _beam_paths() -> dict[str, str]:
    # How Beam itself resolves a short name (apache_beam.runners.runner.create_runner):
    # case-insensitive, "Runner" optional.
    return {p.rsplit(".", 1)[-1].lower(): p for p in StandardOptions.ALL_KNOWN_RUNNERS}


def engine(runner: str) -> str:
    """The Beam runner class ``runner`` names, by the name chunkmill knows it by: a short
    name as Beam resolves it, or a dotted path to a class, which counts as the first of Beam's
    own classes it derives from. Raises ``UsageError`` when it names no runner."""
    if runner == IN_PROCESS_RUNNER:
        return "DirectRunner"
    paths = _beam_paths()
    path = runner
    if "." not in runner:
        path = paths.get(runner.lower()) or paths.get(runner.lower() + "runner") or ""
    module, _, name = (path or runner).rpartition(".")
    refused = {n.lower(): n for n in REFUSED}
    refused_name = refused.get(name.lower()) or refused.get(name.lower() + "runner")
    if refused_name and (not module or module.startswith("apache_beam.")):
        return refused_name  # named, never imported (Dask may not even be installed)
    if not path:
        short = {n.lower().removesuffix("runner"): n for n in SUPPORTED}
        hint = nearest(runner.lower().removesuffix("runner"), short)
        raise UsageError(
            f"argument --runner: unknown runner {runner!r}"
            + (f"; did you mean {short[hint]}?" if hint else f"; use {', '.join(SUPPORTED)}")
        )
    try:
        cls = getattr(importlib.import_module(module), name)
    except Exception as e:  # a user's module may fail in any way: still one line
        first = str(e).splitlines()[0] if str(e) else ""
        raise UsageError(
            f"argument --runner: cannot load {runner}: {type(e).__name__}: {first}"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, PipelineRunner)):
        raise UsageError(f"argument --runner: {runner} is not a Beam PipelineRunner")
    beam_class = next(c for c in cls.__mro__ if c.__module__.startswith("apache_beam."))
    return _ALIASES.get(beam_class.__name__, beam_class.__name__)


def check(beam_args: Sequence[str]) -> None:
    """Raises ``UsageError`` (one line, naming the supported runners) unless the run's
    ``--runner`` is one chunkmill runs on."""
    runner = requested(beam_args)
    if runner is None:
        return
    name = engine(runner)
    if name == "DataflowRunner":  # stages the job through gs://
        missing = extras.missing_extra("gs://")
        if missing is not None:
            raise UsageError(f"argument --runner: DataflowRunner {missing.split(' ', 1)[1]}")
    if name == "PortableRunner" and not _job_endpoint(beam_args):
        raise UsageError(
            "argument --runner: PortableRunner needs --job_endpoint, a job service's "
            "host:port; --job_endpoint=embed --environment_type=LOOPBACK runs one in this "
            "process"
        )
    if name in SUPPORTED:
        return
    why = REFUSED.get(name, "chunkmill is not tested on it")
    raise UsageError(
        f"argument --runner: {name} is not supported ({why}); use {', '.join(SUPPORTED)}"
    )


def _job_endpoint(beam_args: Sequence[str]) -> str | None:
    """The value of ``--job_endpoint`` among Beam's flags, if any."""
    endpoint = beam_parser().parse_known_args(list(beam_args))[0].job_endpoint
    return endpoint if isinstance(endpoint, str) and endpoint else None


def local_engine(beam_args: Sequence[str]) -> list[str]:
    """Beam's flags with ``--runner`` pointing at ``InProcessRunner`` when the run is local
    (no ``--runner``, ``DirectRunner`` or ``FnApiRunner``); otherwise unchanged."""
    runner = requested(beam_args)
    # A class of one's own stays itself, even one derived from Beam's local runners.
    own_class = runner is not None and "." in runner and not runner.startswith("apache_beam.")
    if runner is not None and (own_class or engine(runner) not in LOCAL_ENGINE_NAMES):
        return list(beam_args)
    # A later --runner wins in Beam's parser, so appending is enough. Beam's checks of
    # element types at construction cost every local run a third of its graph's construction
    # and find nothing in a graph the tests run whole (docs/design.md, "Why the shapes are
    # what they are").
    return [*beam_args, f"--runner={IN_PROCESS_RUNNER}", "--no_pipeline_type_check"]
