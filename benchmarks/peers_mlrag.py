"""The contender of ``benchmarks.peers``: Beam's own RAG chunking, as a user of Beam would write it.

Files are listed and read with ``fileio``, each becomes a ``Chunk`` split by
``apache_beam.ml.rag.chunking.langchain.LangChainChunker`` (LangChain's recursive character
splitter, 2,800 characters with 320 of overlap: 700 and 80 tokens at four characters a token,
chunkmill's paragraph defaults), and the chunks are written to Parquet. It runs on Beam's
FnApiRunner in this process with one worker, like chunkmill's local engine in the benchmark.

Runs in an environment of its own (``python -m benchmarks.peers --setup``): Beam 2.77's
LangChainChunker imports ``langchain.text_splitter``, which LangChain removed in 1.0.

    python benchmarks/peers_mlrag.py --input 'DIR/**' --output OUT
"""

from __future__ import annotations

import argparse
import sys


def build(p, pattern: str, output: str) -> None:
    import apache_beam as beam
    import pyarrow as pa
    from apache_beam.io import fileio
    from apache_beam.ml.rag.chunking.langchain import LangChainChunker
    from apache_beam.ml.rag.types import Chunk
    from langchain.text_splitter import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=2800, chunk_overlap=320)
    chunker = LangChainChunker(
        text_splitter=splitter, document_field="text", metadata_fields=["source"]
    )

    def as_row(chunk: Chunk) -> dict:
        return {
            "id": chunk.id,
            "index": chunk.index,
            "source": chunk.metadata.get("source"),
            "text": chunk.content.text,
        }

    schema = pa.schema(
        [("id", pa.string()), ("index", pa.int64()), ("source", pa.string()), ("text", pa.string())]
    )
    _ = (
        p
        | "Match" >> fileio.MatchFiles(pattern)
        | "Read" >> fileio.ReadMatches()
        | "Docs"
        >> beam.Map(
            lambda f: {"text": f.read_utf8(), "source": f.metadata.path},
        )
        # The chunker's own transform, without MLTransform's artifact handling around it: the
        # leanest way to run it, so the contender is not slowed by what chunking does not need.
        | "Chunk" >> chunker.get_ptransform_for_processing()
        | "Rows" >> beam.Map(as_row)
        | "Write"
        >> beam.io.WriteToParquet(output + "/chunks/part", schema, file_name_suffix=".parquet")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    # Any other flag is Beam's (benchmarks.peers --contender-flag).
    args, beam_flags = parser.parse_known_args(argv)
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    options = PipelineOptions(
        ["--direct_num_workers=1", "--direct_running_mode=in_memory", *beam_flags]
    )
    with beam.Pipeline(runner=fn_runner.FnApiRunner(), options=options) as p:
        build(p, args.input, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
