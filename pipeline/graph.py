"""Composition root: wires the edges and the core composite into one Beam graph."""

from __future__ import annotations

import dataclasses
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from chunkmill import schema
from chunkmill.pipeline import runners
from chunkmill.pipeline.options import RunSettings
from chunkmill.redact import redact_uri
from chunkmill.transforms import publish, sinks, sources
from chunkmill.transforms.core import ChunkCorpus
from chunkmill.transforms.storage import ObjectReader, local_roots
from chunkmill.versions import chunkmill_version


class RunOptions(PipelineOptions):
    """Beam's options of a run, each of their views made once.

    Beam asks the options for a view (``view_as``) twice for every transform it applies, and
    each view is a new argparse parser of that view's flags, parsed again: about 260 parsers
    for a run's graph, half of its construction. A view holds no value of its own (they all
    live in the options' one dictionary), so the first view of each class serves every
    later ask."""

    def view_as(self, cls: type[Any]) -> Any:
        views: dict[type[Any], PipelineOptions] = self.__dict__.setdefault("_views", {})
        view = views.get(cls)
        # A view shares the options' values; one made before they were replaced is made again.
        if view is None or view._all_options is not self._all_options:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("_views", None)  # views are made again where the options are read
        return state


def pipeline_options(settings: RunSettings) -> PipelineOptions:
    """Beam's options for the run: its Beam flags, with a local run (no ``--runner``,
    ``DirectRunner`` or ``FnApiRunner``) on the in-process engine (pipeline/runners.py)."""
    return RunOptions(runners.local_engine(settings.beam_args))


def build(p: beam.Pipeline, settings: RunSettings) -> None:
    """Adds the whole run to ``p``: list, chunk, diff, write, publish."""
    files = p | "ListDocuments" >> sources.ListFiles(
        settings.inputs,
        exclude_prefix=settings.output,
        billing_project=settings.billing_project,
        include=settings.include,
        exclude=settings.exclude,
        follow_symlinks=settings.follow_symlinks,
    )
    inputs = {"files": files}
    # A first run has no prior: its graph has no step for one (fewer stages to start).
    if settings.prior_files:
        inputs["prior"] = p | "ReadPriorManifest" >> sources.ReadManifest(settings.prior_files)
    if settings.prior_errors:
        inputs["prior_errors"] = p | "ReadPriorErrors" >> sources.ReadPriorErrors(
            settings.prior_errors
        )
    # With --follow-symlinks a read may leave the input, as the listing allowed; otherwise a
    # symlink is followed at read time only into the input's folders.
    within = None if settings.follow_symlinks else local_roots(settings.inputs)
    reader = ObjectReader(billing_project=settings.billing_project, within=within)
    # The occurrences are staged in the run's temporary folder, removed when the tables are
    # named; the text of chunks/ is written there too, for publishing to name in the store.
    temp = sinks.temp_folder(settings.output, settings.run_id)
    corpus = inputs | "ChunkCorpus" >> ChunkCorpus(
        config=settings.config, read_bytes=reader, staged_folder=temp, text_store=True
    )
    written = corpus | "WriteTables" >> sinks.WriteTables(
        settings.output, settings.run_id, temp=temp
    )
    policy = publish.PublishPolicy(settings.max_error_ratio, settings.max_removed_ratio)
    _ = {"counts": corpus["counts"], "written": written} | "Publish" >> publish.PublishRun(
        settings.output, settings.run_id, report_header(settings), policy
    )


def report_header(settings: RunSettings) -> dict[str, Any]:
    """The run report's header: chunkmill's own config, never the raw pipeline options
    (they can carry credentials)."""
    return {
        "run_id": settings.run_id,
        "started_at": settings.started_at,
        "chunkmill_version": chunkmill_version(),
        "schema_version": schema.SCHEMA_VERSION,
        # Patterns and prefix as chunkmill knows them: without credentials.
        "inputs": [redact_uri(p) for p in settings.inputs],
        "output": redact_uri(settings.output),
        "listing": {
            "include": list(settings.include),
            "exclude": list(settings.exclude),
            "follow_symlinks": settings.follow_symlinks,
        },
        "prior": {
            "mode": settings.prior_mode,
            "run_id": settings.prior_run_id,
            "manifest": settings.prior_manifest,
            "errors": list(settings.prior_errors),
            # The run LATEST named at launch, whatever the prior: the run this one comes
            # after (transforms.lineage), also when it diffs against nothing.
            "after": settings.prior_after,
        },
        # The run's place in its chain: LATEST follows it, not the clocks (runstate.run_order).
        "chain": settings.chain,
        "chunking": {
            **settings.config.description,
            "fingerprint": settings.config.fingerprint,
            # The model's input window (tokens), where the tokenizer tells it; the counts'
            # chunks_over_model_window are the chunks to embed longer than it.
            "model_window": settings.config.model_window,
        },
        # For the record; publishing is refused by graph.build's publish.PublishPolicy.
        "limits": {
            **dataclasses.asdict(settings.config.limits),
            "max_error_ratio": settings.max_error_ratio,
            "max_removed_ratio": settings.max_removed_ratio,
        },
    }
