"""Listing time against the GCS and S3 emulators: how long one page of 1,000 objects takes,
single-lister versus sharded by prefix (``chunkmill.transforms.storage``), with the version of every
object and no read. On local disk (``--stores local``): the CPU time of the walk and of
holding its documents as Arrow rows by doc-id bucket (``sources.ListingHold``), what
``ListFiles``'s ``ListShard`` does, over a Markdown corpus of ``--objects`` documents.

    python -m benchmarks.listing --objects 5000 --prefixes 50
    python -m benchmarks.listing --stores local --objects 7000

Needs the test extra (gcp-storage-emulator, moto[server]). An emulator answers on loopback
with no network, TLS, authentication or real index behind it, so its per-page time is a lower
bound for a real bucket, not an estimate of one.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chunkmill.items import SourceFiles
from chunkmill.transforms import sources, storage
from tests.e2e.stores import gcs_emulator, gcs_env, s3_emulator, s3_env, store_env


def _names(objects: int, prefixes: int) -> list[str]:
    return [f"docs/p{i % prefixes:04d}/doc{i:07d}.md" for i in range(objects)]


def _time_listing(pattern: str, page_time: Callable[[], float]) -> dict[str, float]:
    started = time.perf_counter()
    shards = list(storage.plan(pattern))
    planned = time.perf_counter() - started
    started = time.perf_counter()
    n = sum(1 for s in shards for _ in storage.list_shard(s))
    sequential = time.perf_counter() - started
    # Eight listers at once stand in for eight workers (the emulator serves one at a time, so
    # this shows the overhead of sharding, not its speed-up).
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(lambda s: sum(1 for _ in storage.list_shard(s)), shards))
    parallel = time.perf_counter() - started
    assert sum(counts) == n
    return {
        "objects": n,
        "shards": len(shards),
        "plan_s": planned,
        "sharded_sequential_s": sequential,
        "sharded_8_threads_s": parallel,
        "page_of_1000_median_s": page_time(),
    }


def bench_gcs(objects: int, prefixes: int) -> dict[str, float]:
    with gcs_emulator() as url, store_env(gcs_env(url)):
        from google.cloud import storage as gcs_lib

        client = gcs_lib.Client()
        bucket = client.create_bucket("bench")
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda n: bucket.blob(n).upload_from_string(b"x"), _names(objects, prefixes)
                )
            )

        def page_time() -> float:
            times = []
            pages = client.list_blobs("bench", prefix="docs/", page_size=1000).pages
            while True:
                started = time.perf_counter()
                page = next(pages, None)
                if page is None:
                    break
                sum(1 for _ in page)
                times.append(time.perf_counter() - started)
            return statistics.median(times)

        return _time_listing("gs://bench/docs/**", page_time)


def bench_s3(objects: int, prefixes: int) -> dict[str, float]:
    with s3_emulator() as url, store_env(s3_env(url)):
        import boto3

        client = boto3.client("s3")
        client.create_bucket(Bucket="bench")
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda n: client.put_object(Bucket="bench", Key=n, Body=b"x"),
                    _names(objects, prefixes),
                )
            )

        def page_time() -> float:
            times, token = [], None
            while True:
                kwargs = {"Bucket": "bench", "Prefix": "docs/", "MaxKeys": 1000}
                if token:
                    kwargs["ContinuationToken"] = token
                started = time.perf_counter()
                page = client.list_objects_v2(**kwargs)
                times.append(time.perf_counter() - started)
                token = page.get("NextContinuationToken")
                if not token:
                    return statistics.median(times)

        return _time_listing("s3://bench/docs/**", page_time)


def bench_local(objects: int, rounds: int = 5) -> dict[str, float]:
    """The local listing of a fresh corpus, CPU seconds, best of ``rounds``: the walk as
    ``ListShard`` takes it (``storage.list_shard_batched``: a folder's files as columns) and
    the hold that turns its documents into ``ListedDocs``."""
    from benchmarks.peers import write_corpus

    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder) / "corpus"
        write_corpus(corpus, objects)
        pattern = f"{corpus}/**"
        walks, holds = [], []
        for _ in range(rounds):
            started = time.process_time()
            listed = [
                x
                for shard in storage.plan(pattern)
                for x in storage.list_shard_batched(shard)
                if isinstance(x, SourceFiles)  # a corpus of documents only: nothing else
            ]
            walks.append(time.process_time() - started)
            started = time.process_time()
            held = sources.ListingHold()
            docs = [d for files in listed for d in held.extend(files)] + held.release()
            holds.append(time.process_time() - started)
    return {
        "objects": sum(len(files.uris) for files in listed),
        "messages": len(docs),
        "walk_cpu_s": min(walks),
        "hold_cpu_s": min(holds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--prefixes", type=int, default=50)
    parser.add_argument("--stores", default="gcs,s3", help="comma-separated: gcs, s3, local")
    args = parser.parse_args()
    if "local" in args.stores.split(","):
        local = bench_local(args.objects)
        print(
            f"local: {local['objects']} documents; walk {local['walk_cpu_s'] * 1000:.0f} ms CPU, "
            f"held as {local['messages']} messages by doc-id bucket "
            f"{local['hold_cpu_s'] * 1000:.0f} ms CPU (best of 5)"
        )
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request
    os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "bench")
    for name, bench in (("gcs", bench_gcs), ("s3", bench_s3)):
        if name not in args.stores.split(","):
            continue
        result = bench(args.objects, args.prefixes)
        per_page = result["page_of_1000_median_s"]
        print(
            f"{name}: {result['objects']} objects in {result['shards']} shards; "
            f"plan {result['plan_s']:.2f} s, "
            f"sharded listing {result['sharded_sequential_s']:.2f} s "
            f"(8 threads {result['sharded_8_threads_s']:.2f} s); "
            f"median page of 1,000 {per_page * 1000:.0f} ms -> 1M objects, one lister, "
            f">= {per_page * 1000:.0f} s"
        )


if __name__ == "__main__":
    main()
