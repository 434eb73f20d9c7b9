"""Submitting a run to an engine that outlives this process (Dataflow, a Flink cluster).

A local run executes inside ``chunkmill run``, so the CLI waits and prints the summary. A
remote run must not wait: a Dataflow Flex Template launcher is expected to submit and exit,
and a scheduler should not hold a process (or a Kubernetes pod) open for hours. Publishing
needs no launcher either: ``_SUCCESS`` and ``LATEST`` are written by the job's own ``Publish``
step. So for a remote runner ``chunkmill run`` submits, prints the job's id and state and
where ``_SUCCESS`` will appear, and returns.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PipelineOptions,
    PortableOptions,
    SparkRunnerOptions,
    StandardOptions,
    TestOptions,
)
from apache_beam.runners.runner import PipelineResult

from chunkmill import stores
from chunkmill.pipeline import graph, runners
from chunkmill.pipeline.options import DEFAULT_RUNNER, RunSettings, UsageError
from chunkmill.transforms import runstate

# Runners that execute the pipeline inside this process.
LOCAL_RUNNERS = frozenset(
    {
        "DirectRunner",
        "SwitchingDirectRunner",
        "BundleBasedDirectRunner",
        "FnApiRunner",
        "PrismRunner",
        "InteractiveRunner",
    }
)
# The SDK harness runs in this process (LOOPBACK), so exiting would kill the job's workers.
_IN_PROCESS_ENVIRONMENTS = frozenset({"LOOPBACK"})
# Beam flags whose value is a credential. Beam copies every option into the job it submits
# (Dataflow shows them in its UI and logs), so a remote run refuses them: workers should
# get credentials from their own identity (service account, instance role, environment).
SECRET_BEAM_FLAGS = ("--s3_secret_access_key", "--s3_session_token")


def runner_name(options: PipelineOptions) -> str:
    """The runner's class name, as given (``DirectRunner`` for the in-process engine)."""
    runner = options.view_as(StandardOptions).runner or DEFAULT_RUNNER
    if runner == runners.IN_PROCESS_RUNNER:
        return DEFAULT_RUNNER
    name = runner if isinstance(runner, str) else type(runner).__name__
    return name.rsplit(".", 1)[-1]


def waits_for_job(options: PipelineOptions) -> bool:
    """True when the job runs inside this process (so ``chunkmill run`` must wait for it):
    the local runners, the embedded portable job service, a LOOPBACK SDK harness, and Flink
    or Spark runners told to start a local cluster."""
    name = runner_name(options)
    if name in LOCAL_RUNNERS:
        return True
    portable = options.view_as(PortableOptions)
    if portable.job_endpoint == "embed" or portable.environment_type in _IN_PROCESS_ENVIRONMENTS:
        return True
    if name == "FlinkRunner":
        # "[auto]" (the default) and "[local]" make Beam's job server run a Flink mini
        # cluster in its own JVM, which stops when this process exits.
        return options.view_as(FlinkRunnerOptions).flink_master in ("[auto]", "[local]")
    if name == "SparkRunner":
        return options.view_as(SparkRunnerOptions).spark_master_url.startswith("local")
    return False


def refuse_secret_flags(beam_args: Sequence[str]) -> None:
    """Raises ``UsageError`` naming (never echoing) a credential-carrying Beam flag."""
    for arg in beam_args:
        flag = arg.split("=", 1)[0]
        if flag in SECRET_BEAM_FLAGS:
            raise UsageError(
                f"{flag} would be copied into the submitted job's options (visible in the "
                "runner's UI and logs); give the workers credentials through their own "
                "identity or environment instead"
            )


def claim(settings: RunSettings) -> RunSettings:
    """Claims the run's folder before anything is built or written
    (``chunkmill.transforms.runstate.claim_run``); returns the settings with the id claimed. A taken
    ``--run-id`` is a ``UsageError``; a default id that another launch took in the same second
    becomes ``ID-2``, ``ID-3``, ... The claim records the prior this run diffs against, so
    ``runs gc`` keeps it while the run is in flight, and the host and pid of this process,
    which launched it (on a local runner, runs it; on a remote one, builds and submits its
    job): ``runs gc`` never deletes the run while that process is alive."""
    wanted = runstate.Claim(
        run_id=settings.run_id,
        started_at=settings.started_at,
        prior_run_id=settings.prior_run_id,
        prior_manifest=settings.prior_manifest,
        after=settings.prior_after,
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    try:
        made = runstate.claim_run(settings.output, wanted, exact=settings.run_id_given)
    except runstate.RunTaken as e:
        raise UsageError(f"argument --run-id: {e}; choose another") from None
    except Exception as e:  # no permission, no network: one line, before anything runs
        path = runstate.claim_path(settings.output, settings.run_id)
        raise UsageError(
            f"argument --output: cannot claim {path}: {type(e).__name__}: "
            f"{stores.first_line(str(e))}"
        ) from None
    return dataclasses.replace(settings, run_id=made.run_id)


def start(settings: RunSettings, options: PipelineOptions) -> PipelineResult:
    """Builds the run's graph and hands it to the runner, without waiting for it."""
    p = beam.Pipeline(options=options)
    graph.build(p, settings)
    return p.run()


def job_id(result: PipelineResult) -> str | None:
    getter = getattr(result, "job_id", None)
    if callable(getter):
        return getter()
    return getattr(result, "_job_id", None)


def submit(settings: RunSettings) -> int:
    """``chunkmill run`` on a remote runner: submit, print what was submitted, return."""
    refuse_secret_flags(settings.beam_args)
    options = graph.pipeline_options(settings)
    name = runner_name(options)
    dry_run = options.view_as(TestOptions).dry_run
    if not dry_run:  # a dry run builds the job and writes nothing, not even a claim
        settings = claim(settings)
    success = FileSystems.join(runstate.run_dir(settings.output, settings.run_id), runstate.SUCCESS)
    try:
        result = start(settings, options)
    except Exception:
        logging.exception("submission failed")
        print(
            f"chunkmill: run {settings.run_id} was not submitted to {name}; "
            f"LATEST names {runstate.describe_latest(settings.output)}",
            file=sys.stderr,
        )
        return 1
    if dry_run:
        print(f"run {settings.run_id}  dry run: the {name} job was built, not submitted")
        return 0
    print(f"run {settings.run_id}  submitted to {name}: job {job_id(result)} ({result.state})")
    print(f"on success the job writes {success}")
    print(f"then names the run in {FileSystems.join(settings.output, runstate.LATEST)}")
    print(f"follow it with: chunkmill runs list --output {settings.output}")
    return 0


def template_args(argv: Sequence[str]) -> list[str]:
    """Flex Template parameters → ``chunkmill run`` arguments.

    A template passes each parameter as ``--name=value``; metadata.json names chunkmill's
    options by their argparse ``dest`` (``max_tokens``: identifiers are valid parameter names
    everywhere Google validates them), so this maps ``--max_tokens=V`` back to
    ``--max-tokens=V``; a switch takes ``true`` or ``false``, a template parameter always
    having a value (``--follow_symlinks=true`` is ``--follow-symlinks``). Everything else
    (Beam's own options) passes through unchanged.
    """
    actions = {a.dest: a for a in run_parser()._actions if a.option_strings}
    out = []
    for arg in argv:
        name, sep, value = arg.partition("=")
        action = actions.get(name[2:]) if name.startswith("--") else None
        if action is not None and action.dest != "help":
            flag = action.option_strings[-1]
            if action.nargs == 0:  # a switch
                if value.lower() == "true":
                    out.append(flag)
            else:
                out.append(f"{flag}{sep}{value}")
        else:
            out.append(arg)
    return out


def run_parser() -> argparse.ArgumentParser:
    """The ``chunkmill run`` parser (its actions are the pipeline's own options)."""
    from chunkmill.pipeline.commands import run

    return run.build_parser()
