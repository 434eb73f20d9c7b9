"""BatchTables under TestPipeline, on its own: the pieces of a run's tables become the six
tables as few large Arrow tables of their schemas (the rows of manifest/, chunks/, added/
and removed/ are written where they are decided: tests/transform/test_hash_join.py,
tests/transform/test_prior_stages.py)."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from chunkmill import schema
from chunkmill.transforms.parquet_batches import BatchTables


def _value(field: pa.Field):
    """A plain value of ``field``'s type (no null: some columns are not nullable)."""
    kind = field.type
    if pa.types.is_string(kind):
        return "x"
    if pa.types.is_integer(kind):
        return 0
    if pa.types.is_boolean(kind):
        return False
    if pa.types.is_list(kind):
        return []
    return None


def _row(table_schema: pa.Schema, **values) -> dict:
    return {f.name: _value(f) for f in table_schema} | values


def _table(name: str, hashes: list[str]) -> pa.Table:
    """A table of ``schema.TABLES[name]`` whose rows differ only by their chunk_hash."""
    table_schema = schema.TABLES[name]
    return pa.Table.from_pylist([_row(table_schema, chunk_hash=h) for h in hashes], table_schema)


def _error_row(uri: str, stage: str) -> dict:
    return _row(schema.ERRORS, source_uri=uri, stage=stage)


def test_the_pieces_become_the_six_tables():
    h = [c * 64 for c in "abcdef"]
    with TestPipeline(runner="FnApiRunner") as p:

        def tables(label: str, name: str, *hashes: list[str]):
            return p | label >> beam.Create([_table(name, list(x)) for x in hashes])

        pieces = {
            # Two small tables from one stage.
            "retired": tables("Retired", "retired", [h[4]], [h[5]]),
            "errors": p | "Errors" >> beam.Create([_error_row("/c/bad.pdf", "extract")]),
            "listing_errors": p | "ListErrors" >> beam.Create([_error_row("/c/locked", "list")]),
        }
        out = pieces | BatchTables()
        assert set(out) == {"chunks", "manifest", "removed", "errors", "added", "retired"}

        def rows(name: str, column: str):
            return out[name] | f"{name}Rows" >> beam.FlatMap(lambda t: t[column].to_pylist())

        def schemas(name: str):
            return out[name] | f"{name}Schema" >> beam.Map(
                lambda t: t.schema.equals(schema.TABLES[name])
            )

        for name in ("manifest", "chunks", "added", "removed"):
            assert_that(rows(name, "chunk_hash"), equal_to([]), label=f"{name}Rows")
        assert_that(rows("retired", "chunk_hash"), equal_to(h[4:]), label="RetiredRows")
        assert_that(out["retired"] | beam.combiners.Count.Globally(), equal_to([1]))
        assert_that(rows("errors", "stage"), equal_to(["extract", "list"]), label="ErrorRows")
        for name in ("errors", "retired"):
            assert_that(
                schemas(name),
                equal_to([True]),
                label=f"{name}Schema",
            )
