"""``chunkmill sync`` and ``verify`` at scale: an index of ``--rows`` rows (1,000,000 by
default), then a night that changes 1% of them, applied incrementally and by full
reconciliation, then verified.

The two runs are synthesized directly as the pipeline would publish them (manifest, chunks,
added, removed, retired, errors, ``_SUCCESS`` and ``LATEST``, with pyarrow), and their
vectors written with the embedding store's own functions: chunking and embedding a million
chunks is not what is measured here. Documents have 20 chunks each; the night edits the
first chunk of 1% of the documents and lengthens it, so the document's other 19 chunks move
(same ids, new offsets): 0.05% of the rows are new, 0.95% moved. Vectors have ``--dim``
(default 8) dimensions: what the comparison costs per row does not depend on it beyond
hashing the bytes, and writing a million 384-dimension vectors would time the COPY.

Each command runs in a process of its own against PostgreSQL with pgvector (pgserver);
its wall time and peak RSS (``wait4``) go into one Markdown table.

    python -m benchmarks.sync_scale [--rows 1000000] [--dim 8]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CHUNKS_PER_DOC = 20
FILE_ROWS = 250_000
KEY = "b" * 32


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _state(docs: int, edited: set[int]) -> tuple[pa.Table, list[str]]:
    """The manifest of ``docs`` documents (``edited`` ones with their first chunk rewritten
    and longer) and the text of each row."""
    from chunkmill import schema

    columns: dict[str, list] = {name: [] for name in schema.MANIFEST.names}
    texts: list[str] = []
    for d in range(docs):
        uri = f"/corpus/d{d // 1000}/doc{d}.md"
        doc_id = _sha(uri)[:32]
        offset = 0
        version = "v2" if d in edited else "v1"
        for c in range(CHUNKS_PER_DOC):
            text = f"Document {d}, chunk {c}: words about topic {d % 97} and item {c}."
            if c == 0 and d in edited:
                text = f"Document {d}, chunk 0 rewritten tonight, with a longer sentence."
            chunk_hash = _sha(text)
            row = {
                "chunk_id": _sha(f"{doc_id}:{chunk_hash}:0")[:32],
                "chunk_hash": chunk_hash,
                "doc_id": doc_id,
                "source_uri": uri,
                "chunk_index": c,
                "char_start": offset,
                "char_end": offset + len(text),
                "token_count": len(text) // 4,
                "page_start": None,
                "page_end": None,
                "strategy": "paragraph",
                "config_fingerprint": "f" * 16,
                "content_sha256": _sha(f"{uri}:{version}"),
                "doc_format": "markdown",
                "section_path": [f"Document {d}", f"Part {c // 5}"],
                "section_anchor": None,
                "section_chunk_index": c % 5,
                "paragraph_index": c,
                "total_paragraphs": CHUNKS_PER_DOC,
                "has_prev_context": None,
                "has_next_context": None,
                "source_version": version,
                "decode_lossy": False,
                "extracted_by": None,
                "is_new": True,
            }
            for name, value in row.items():
                columns[name].append(value)
            texts.append(text)
            offset += len(text) + 2
    return pa.table(columns, schema=schema.MANIFEST), texts


def _write(folder: Path, name: str, table: pa.Table) -> list[str]:
    (folder / name).mkdir(parents=True, exist_ok=True)
    paths = []
    for i, start in enumerate(range(0, max(table.num_rows, 1), FILE_ROWS)):
        path = folder / name / f"part-{i:05d}.parquet"
        pq.write_table(table.slice(start, FILE_ROWS), path, write_page_checksum=True)
        paths.append(str(path))
    return paths


def _publish(output: Path, run_id: str, prior: str | None, parts: dict[str, pa.Table]) -> None:
    from chunkmill import schema
    from chunkmill.transforms import publish, runstate

    base = output / "runs" / run_id
    started = f"2026-01-0{1 if prior is None else 2}T00:00:00Z"
    written = []
    for name, table_schema in schema.TABLES.items():
        table = parts.get(name, table_schema.empty_table())
        written += _write(base, name, table.cast(table_schema))
    report = {
        "run_id": run_id,
        "started_at": started,
        "counts": {"chunks_total": parts["manifest"].num_rows},
        "tables": publish.table_files(str(base), written),
        "prior": {"run_id": prior} if prior else None,
        "chain": {"latest_start": runstate.start_order(started), "length": int(prior is not None)},
    }
    (base / "_SUCCESS").write_text(json.dumps(report))
    (output / "LATEST").write_text(run_id + "\n")


def _store(output: Path, hashes: list[str], dim: int, seed: int) -> None:
    from chunkmill.transforms import embedstore

    embedstore.write_model_info(str(output), KEY, {"dimension": dim, "model": "synthetic"})
    rng = np.random.default_rng(seed)
    for start in range(0, len(hashes), FILE_ROWS):
        group = hashes[start : start + FILE_ROWS]
        vectors = rng.standard_normal((len(group), dim), dtype=np.float32)
        table = pa.table(
            [pa.array(group), pa.FixedSizeListArray.from_arrays(vectors.ravel(), dim)],
            schema=embedstore.vector_schema(dim),
        )
        embedstore.write_vectors(str(output), KEY, table)


def _chunks(manifest: pa.Table, texts: list[str], among: set[str] | None = None) -> pa.Table:
    """chunks/: the first occurrence of each hash (of ``among`` when given), with its text."""
    from chunkmill import schema

    seen: set[str] = set()
    keep = []
    for i, h in enumerate(manifest["chunk_hash"].to_pylist()):
        if h not in seen and (among is None or h in among):
            seen.add(h)
            keep.append(i)
    rows = manifest.take(keep).drop_columns(["is_new"])
    rows = rows.append_column("text", pa.array([texts[i] for i in keep], pa.large_string()))
    rows = rows.append_column("text_with_context", pa.nulls(len(keep), pa.large_string()))
    return rows.cast(schema.CHUNKS)


# Runs a command and prints its peak RSS (KB) last on stderr. A child's peak RSS counts the
# memory of the process it was forked from, so the command is forked from this small launcher
# rather than from the benchmark, which holds the synthesized tables.
_LAUNCHER = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(code)"
)


def measured(*args: str) -> tuple[float, float, str]:
    """Runs ``chunkmill ARGS`` and returns its wall time, its peak RSS (MB) and its stdout."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, sys.executable, "-m", "chunkmill", *args],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"chunkmill {' '.join(args)} failed: {proc.stderr.strip()}")
    return wall, int(proc.stderr.split()[-1]) / 1024, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=8)
    args = parser.parse_args()
    import pgserver
    import psycopg

    docs = max(1, args.rows // CHUNKS_PER_DOC)
    edited = set(range(0, docs, 100))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        output = root / "out"
        t0 = time.perf_counter()
        print(f"synthesizing {docs * CHUNKS_PER_DOC} rows ...", file=sys.stderr)
        before, texts = _state(docs, set())
        _publish(output, "b1", None, {"manifest": before, "chunks": _chunks(before, texts)})
        hashes = sorted(set(before["chunk_hash"].to_pylist()))
        _store(output, hashes, args.dim, 1)
        server = pgserver.get_server(root / "pg", cleanup_mode="stop")
        url = server.get_uri()
        common = ["--output", str(output), "--to", url]
        print(f"synthesized in {time.perf_counter() - t0:.0f} s; loading", file=sys.stderr)
        rows = [("first load of run b1 into an empty table", *measured("sync", *common))]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE copy_b (LIKE chunkmill_chunks INCLUDING ALL)")
            conn.execute("INSERT INTO copy_b SELECT * FROM chunkmill_chunks")
            conn.execute(
                "INSERT INTO chunkmill_sync SELECT 'copy_b', output, run_id, model_key, "
                "applied_at FROM chunkmill_sync WHERE index_table = 'chunkmill_chunks'"
            )
        after, new_texts = _state(docs, edited)
        old = set(hashes)
        added = after.filter(pa.array([h not in old for h in after["chunk_hash"].to_pylist()]))
        now_ids = set(after["chunk_id"].to_pylist())
        removed = before.filter(
            pa.array([i not in now_ids for i in before["chunk_id"].to_pylist()])
        )
        removed = removed.drop_columns(["is_new"]).append_column(
            "removed_reason", pa.array(["document_changed"] * removed.num_rows)
        )
        new_hashes = set(added["chunk_hash"].to_pylist())
        _publish(
            output,
            "b2",
            "b1",
            {
                "manifest": after,
                "chunks": _chunks(after, new_texts, new_hashes),
                "added": added,
                "removed": removed,
                "retired": pa.table({"chunk_hash": sorted(set(removed["chunk_hash"].to_pylist()))}),
            },
        )
        _store(output, sorted(new_hashes), args.dim, 2)
        moved = len(edited) * (CHUNKS_PER_DOC - 1)
        counts = (added.num_rows, removed.num_rows, moved)
        del before, after, texts, new_texts, added, removed, hashes, old, now_ids
        changed = sum(counts)
        print(f"night b2: {changed} rows change; syncing", file=sys.stderr)
        rows.append(("sync of night b2", *measured("sync", *common)))
        rows.append(
            ("sync --full of night b2", *measured("sync", *common, "--table", "copy_b", "--full"))
        )
        rows.append(("verify after the incremental sync", *measured("verify", *common)))
        rows.append(
            ("verify after the full sync", *measured("verify", *common, "--table", "copy_b"))
        )
        server.cleanup()

    total = docs * CHUNKS_PER_DOC
    print(
        f"{total:,} rows ({docs:,} documents), vectors of {args.dim} dimensions; night b2 "
        f"changes {changed:,} rows ({changed / total:.1%}: {counts[0]:,} new, "
        f"{counts[1]:,} removed, {counts[2]:,} moved)\n"
    )
    print("| command | path | wall s | peak RSS MB |")
    print("|---|---|---:|---:|")
    for label, wall, rss, out in rows:
        path = next(
            (
                line[len("sync path: ") :]
                for line in out.splitlines()
                if line.startswith("sync path: ")
            ),
            "",
        )
        last = out.strip().splitlines()[-1] if out.strip() else ""
        if label.startswith("verify"):
            path = last
        print(f"| {label} | {path} | {wall:.1f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
