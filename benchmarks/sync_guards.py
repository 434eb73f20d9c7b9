"""What the index guards and the ANN index cost a sync: the same state applied to a fresh
table with ``--ann none`` and ``--ann hnsw``, then applied again (nothing to change: the
lock, the inspection, the forward and removal checks, and the ANN index found and kept).

Vectors are deterministic stand-ins of the default model's width (384), written to the
embedding store directly, so the table measures the sync, not the embedder. PostgreSQL with
pgvector is started here with ``pgserver``; each step is the CLI in a process of its own.

    python -m benchmarks.sync_guards [--docs 2000]
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path

from benchmarks.index import chunkmill

DIM = 384
KEY = "b" * 32


def stand_in_vectors(output: Path) -> int:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chunkmill.transforms import embedstore

    run = output / "runs" / (output / "LATEST").read_text().strip()
    manifest = pq.read_table(run / "manifest", columns=["chunk_hash"])
    hashes = sorted(set(manifest["chunk_hash"].to_pylist()))
    seeds = [int(hashlib.sha256(h.encode()).hexdigest()[:8], 16) for h in hashes]
    vectors = [np.random.default_rng(s).standard_normal(DIM).astype("float32") for s in seeds]
    embedstore.write_model_info(str(output), KEY, {"dimension": DIM, "model": "stand-in"})
    table = pa.table(
        [pa.array(hashes), pa.array([v.tolist() for v in vectors], pa.list_(pa.float32(), DIM))],
        schema=embedstore.vector_schema(DIM),
    )
    embedstore.write_vectors(str(output), KEY, table)
    return len(hashes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000)
    args = parser.parse_args()

    import pgserver
    import psycopg

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs, output = root / "docs", root / "out"
        docs.mkdir()
        for i in range(args.docs):
            words = " ".join(f"w{i}x{j}" for j in range(60))
            (docs / f"d{i:05}.md").write_text(f"# Doc {i}\n\n{words}\n\n{words[::-1]}\n")
        chunkmill("run", "--input", str(docs / "*.md"), "--output", str(output))
        hashes = stand_in_vectors(output)
        server = pgserver.get_server(str(root / "pg"), cleanup_mode="stop")
        try:
            base = server.get_uri()
            rows = []
            for ann in ("none", "hnsw"):
                with psycopg.connect(base, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE t_{ann}")
                url = base.replace("/postgres?", f"/t_{ann}?", 1)
                sync = ["sync", "--output", str(output), "--to", url, "--ann", ann]
                rows.append((f"first sync, --ann {ann}", chunkmill(*sync)))
                rows.append((f"sync again (nothing to change), --ann {ann}", chunkmill(*sync)))
        finally:
            server.cleanup()
    print(f"{args.docs} documents, {hashes} distinct chunks, vectors of {DIM} dimensions\n")
    print(f"| {'step':<44} | seconds |")
    print(f"|{'-' * 46}|---------|")
    for step, seconds in rows:
        print(f"| {step:<44} | {seconds:7.2f} |")


if __name__ == "__main__":
    main()
