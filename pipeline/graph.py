"""Composition root: wires the edges and the core composite into one Beam graph."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline import runners
from pipeline.options import RunSettings
from transforms import io as tio
from transforms.core import ChunkCorpus
from transforms.storage import ObjectReader


def pipeline_options(settings: RunSettings) -> PipelineOptions:
    """Beam's options for the run: its Beam flags, with a local run (no ``--runner``,
    ``DirectRunner`` or ``FnApiRunner``) on the in-process engine (pipeline/runners.py)."""
    return PipelineOptions(runners.local_engine(settings.beam_args))


def build(p: beam.Pipeline, settings: RunSettings) -> None:
    """Adds the whole run to ``p``: list, chunk, diff, write, publish."""
    files = p | "ListDocuments" >> tio.ListFiles(
        settings.inputs, exclude_prefix=settings.output, billing_project=settings.billing_project
    )
    prior = p | "ReadPriorManifest" >> tio.ReadManifest(settings.prior_files)
    reader = ObjectReader(billing_project=settings.billing_project)
    tables = {"files": files, "prior": prior} | "ChunkCorpus" >> ChunkCorpus(
        config=settings.config, read_bytes=reader
    )
    written = tables | "WriteTables" >> tio.WriteTables(settings.output, settings.run_id)
    _ = {"counts": tables["counts"], "written": written} | "Publish" >> tio.PublishRun(
        settings.output, settings.run_id, settings.report()
    )
