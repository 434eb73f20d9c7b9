"""Composition root: wires the edges and the core composite into one Beam graph."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.options import DEFAULT_RUNNER, RunSettings
from transforms import io as tio
from transforms.core import ChunkCorpus
from transforms.storage import ObjectReader


def pipeline_options(settings: RunSettings) -> PipelineOptions:
    options = PipelineOptions(list(settings.beam_args))
    if not any(a == "--runner" or a.startswith("--runner=") for a in settings.beam_args):
        options = PipelineOptions(["--runner", DEFAULT_RUNNER, *settings.beam_args])
    return options


def build(p: beam.Pipeline, settings: RunSettings) -> None:
    """Adds the whole run to ``p``: list, chunk, diff, write, publish."""
    files = p | "ListDocuments" >> tio.ListFiles(
        settings.inputs, exclude_prefix=settings.output, billing_project=settings.billing_project
    )
    prior = p | "ReadPriorManifest" >> tio.ReadManifest(settings.prior_manifest)
    prior_errors = p | "ReadPriorErrors" >> tio.ReadPriorErrors(settings.prior_errors)
    reader = ObjectReader(billing_project=settings.billing_project)
    inputs = {"files": files, "prior": prior, "prior_errors": prior_errors}
    tables = inputs | "ChunkCorpus" >> ChunkCorpus(config=settings.config, read_bytes=reader)
    written = tables | "WriteTables" >> tio.WriteTables(settings.output, settings.run_id)
    _ = {"counts": tables["counts"], "written": written} | "Publish" >> tio.PublishRun(
        settings.output, settings.run_id, settings.report()
    )
