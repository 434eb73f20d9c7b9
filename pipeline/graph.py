"""Composition root: wires the edges and the core composite into one Beam graph."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.options import DEFAULT_RUNNER, RunSettings
from transforms import io as tio
from transforms.core import ChunkCorpus
from transforms.storage import ObjectReader, local_roots


def pipeline_options(settings: RunSettings) -> PipelineOptions:
    options = PipelineOptions(list(settings.beam_args))
    if not any(a == "--runner" or a.startswith("--runner=") for a in settings.beam_args):
        options = PipelineOptions(["--runner", DEFAULT_RUNNER, *settings.beam_args])
    return options


def build(p: beam.Pipeline, settings: RunSettings) -> None:
    """Adds the whole run to ``p``: list, chunk, diff, write, publish."""
    files = p | "ListDocuments" >> tio.ListFiles(
        settings.inputs,
        exclude_prefix=settings.output,
        billing_project=settings.billing_project,
        include=settings.include,
        exclude=settings.exclude,
        follow_symlinks=settings.follow_symlinks,
    )
    prior = p | "ReadPriorManifest" >> tio.ReadManifest(settings.prior_manifest)
    # With --follow-symlinks a read may leave the input, as the listing allowed; otherwise a
    # symlink is followed at read time only into the input's folders.
    within = None if settings.follow_symlinks else local_roots(settings.inputs)
    reader = ObjectReader(billing_project=settings.billing_project, within=within)
    tables = {"files": files, "prior": prior} | "ChunkCorpus" >> ChunkCorpus(
        config=settings.config, read_bytes=reader
    )
    written = tables | "WriteTables" >> tio.WriteTables(settings.output, settings.run_id)
    _ = {"counts": tables["counts"], "written": written} | "Publish" >> tio.PublishRun(
        settings.output, settings.run_id, settings.report()
    )
