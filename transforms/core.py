"""The core composite: listed files and the prior manifest in, every output table out.

I/O stays at the edges (``sources``, ``sinks``); ``ChunkCorpus`` takes PCollections and
returns PCollections, so a test feeds it with ``beam.Create``. Its ``expand`` wires labelled
stages, each a composite of its own module, tested alone:

    SplitListing, PlanDocs     doc_plan        the listing joined with the prior by doc-id bucket
    SummarisePrior,            prior           the prior manifest, read where it lies
      ApplyVerdicts
    ProcessDocuments           process_docs    read, extract, chunk; occurrences staged
    MarkNew, FinishStaged      hash_join       the join by hash bucket: the run's delta
    BatchTables                parquet_batches the tables as few large Arrow tables
    SumCounts                  counts          the run report's counts

Both joins against the prior manifest group by key (it can hold hundreds of millions of
rows); there is no side input of it. Its rows never travel one by one: documents are joined as
summaries and their rows kept or removed in bulk where they lie (``prior``). The join by
doc_id is by doc-id bucket, in Arrow: a document unchanged by its listing is decided there and
is no element after it, so a nightly run costs Beam elements in proportion to what changed.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam

from chunkmill.config import ChunkingConfig
from chunkmill.transforms import prior, staging

# The progress figures' names, imported from here by the progress line (pipeline/progress.py).
from chunkmill.transforms.counts import SumCounts
from chunkmill.transforms.doc_plan import PlanDocs, SplitListing
from chunkmill.transforms.hash_join import FinishStaged, MarkNew
from chunkmill.transforms.parquet_batches import BatchTables
from chunkmill.transforms.process_docs import ProcessDocuments, ReadBytes, read_file


class ChunkCorpus(beam.PTransform):
    """``{'files': PCollection[ListedDocs | Skipped | ListingError]}`` (``ListFiles``'s; a
    ``SourceFile`` per document in place of ``ListedDocs`` is taken too) and optionally
    ``'prior': PCollection[PriorPart]`` (the prior manifest's parts; without it, a first run:
    nothing is diffed, and the graph has no step for the prior) and ``'prior_errors':
    PCollection[(doc_id, PriorError)]`` (the prior run's errors/ rows) →
    ``{'table_files': PCollection[(table, path)], 'errors', 'retired': PCollection[pa.Table],
    'chunks', 'manifest', 'removed', 'added': empty PCollection[pa.Table], 'counts':
    PCollection[dict] (one element)}``: the rows of manifest/, chunks/ and added/ (and with a
    prior, its kept manifest rows and its removed rows) are in files written under
    ``staged_folder`` where they are decided (``WriteTables`` names them with the rest), so
    no table of text crosses a stage boundary. With ``text_store``, each chunks/ file is also
    the text store's file of its rows (table ``textstore.TEXT``: the same file under a second
    name, not its text written again), for the run's publishing step to name
    (``textstore.write_run_text``).

    The output contract (docs/design.md): chunks holds one row per hash the prior manifest lacks;
    manifest one row per chunk occurrence now (no text); removed every prior occurrence that
    no longer exists; added every occurrence the prior manifest lacked; retired every hash of
    the prior manifest that no occurrence has now; errors one row per failed document. Every
    listed document is exactly one of processed, carried over or failed, and ``counts`` says
    how many of each. A document that failed in the prior run at the version listed now,
    under the same attempt key (``carryover.is_known_failure``), is not read: it fails again
    with the same errors row, ``attempted`` false (``docs_failed_not_retried``). Tables come
    out as files and Arrow tables of ``chunkmill.schema``'s schemas, ready for ``WriteTables``.

    The listing's skipped objects are counted (``docs_skipped``, ``skipped_by_reason``), not
    listed documents; its errors are errors/ rows of stage ``list`` (``listing_errors``), and
    a prior document under a folder that could not be listed keeps its rows
    (``docs_kept_unlisted``) instead of being removed.

    ``read_prior(part, columns)`` reads one part of the prior manifest (default: the Parquet
    row group through FileSystems). The prior manifest is joined twice, both times with
    grouping, never a side input (it can hold hundreds of millions of rows): by doc-id bucket
    as Arrow batches of one summary per document and part, and by hash bucket as per-hash
    row counts; its rows are kept or removed a part at a time (``prior``). A worker holds one
    bucket of each join at a time.

    The chunk occurrences wait in staged files under ``staged_folder`` (``staging``; on a
    cluster a folder every worker reaches, such as the run's own temporary folder; default: a
    local temporary folder) while only their hashes and ids cross the hash join; the tables'
    files are written there too, and the prior's hash counts by bucket, of which only the
    place crosses the join.
    """

    def __init__(
        self,
        *,
        config: ChunkingConfig,
        read_bytes: ReadBytes = read_file,
        read_prior: prior.ReadPart = prior.read_part,
        staged_folder: str | None = None,
        text_store: bool = False,
    ) -> None:
        super().__init__()
        self._config = config
        self._read_bytes = read_bytes
        self._read_prior = read_prior
        self._staged_folder = staged_folder
        self._text_store = text_store

    def expand(self, inputs: dict[str, beam.PCollection[Any]]) -> dict[str, beam.PCollection[Any]]:
        parts = inputs.get("prior")  # None: a first run, with nothing to diff against
        listing = inputs["files"] | "SplitListing" >> SplitListing()
        to_plan = {"listed": listing["listed"], "list_errors": listing["list_errors"]}
        staged_folder = self._staged_folder or staging.local_folder()
        if parts is not None:
            summarised = parts | "SummarisePrior" >> prior.SummarisePrior(
                self._read_prior, staged_folder
            )
            to_plan["summaries"] = summarised["summaries"]
        if "prior_errors" in inputs:
            to_plan["prior_errors"] = inputs["prior_errors"]
        planned = to_plan | "PlanDocs" >> PlanDocs(self._config.fingerprint)
        docs = planned["work"] | "ProcessDocuments" >> ProcessDocuments(
            config=self._config, read_bytes=self._read_bytes, staged_folder=staged_folder
        )
        to_mark = {"occurrences": docs["occurrences"]}
        to_batch = {"errors": docs["errors"], "listing_errors": listing["error_rows"]}
        counted = [listing["counts"], planned["counts"], docs["counts"]]
        files: list[beam.PCollection[Any]] = []
        if parts is not None:
            applied = (planned["verdicts"], docs["verdicts"]) | "ApplyVerdicts" >> (
                prior.ApplyPriorVerdicts(staged_folder, self._read_prior)
            )
            to_mark |= {
                "prior_hashes": summarised["hashes"],
                "gone": applied["gone"],
                "persisting": applied["persisting"],
            }
            files.append(applied["files"])
            counted.append(applied["counts"])
        marked = to_mark | "MarkNew" >> MarkNew()
        finished = marked["decided"] | "FinishStaged" >> FinishStaged(
            staged_folder, model_window=self._config.model_window, text=self._text_store
        )
        files.append(finished["files"])
        counted += [marked["counts"], finished["counts"]]
        to_batch |= {"retired": marked["retired"]}
        tables = to_batch | "BatchTables" >> BatchTables()
        table_files = tuple(files) | "TableFiles" >> beam.Flatten()
        counts = tuple(counted) | "SumCounts" >> SumCounts()
        return {**tables, "table_files": table_files, "counts": counts}
