"""Embedding throughput and memory: ``chunkmill embed`` per backend against a plain
sentence-transformers loop, Beam's own ``SentenceTransformerEmbeddings`` (MLTransform) and
LangChain's ``HuggingFaceEmbeddings``, on the same chunk texts, the same model
(all-MiniLM-L6-v2), batch size and threads; each row in a fresh process, side by side in one
run. Prints a Markdown table (benchmarks/README.md, "Embedding backends"), then the peak RSS
of ``chunkmill embed`` on runs of two sizes (``--scale-texts``). The table's first line is the
fp32 GEMM ceiling (``gemm_ceiling``): the tokens/s the model's linear layers alone allow on
this machine, each torch row a fraction of it.

    python -m benchmarks.embed_backends --setup       # LangChain's environment (once)
    python -m benchmarks.embed_backends               # ~2,000 chunks: 20-30 minutes on 2 cores
    python -m benchmarks.embed_backends --texts 200 --scale-texts   # a quick run
    python -m benchmarks.embed_backends --texts 300 --repeat 3 --only-backends   # ratios

LangChain's row runs in an environment of its own (``--setup`` builds ``.venv-embed``):
langchain-huggingface needs a huggingface_hub below 2, older than the one the test
environment has. That venv sees this interpreter's packages (torch, sentence-transformers,
transformers: a ``.pth`` after its own site-packages) and installs only what they lack or
do not satisfy (langchain-huggingface and its huggingface_hub) into itself, so the model,
torch and the threads are the same as the other rows', and this environment is left as it
is.

``--repeat R`` runs the ``chunkmill embed`` rows R times, interleaved (each round starts one
row further down), and keeps each row's best: on a shared machine, the ratios to torch are
then measured side by side. Each backend's vectors are compared with torch's from the same
run (cosine per chunk, mean and minimum).

The texts are real chunks: chunkmill runs over the development set's corpora (beside the
clone, ``--set``) and the bundled sample corpus, fitted to the model's 256-token window,
copied until there are ``--texts`` chunks (each copy's paragraphs end in a copy number, so
every chunk is new to the store). Tokens are the model's word pieces of each text, cut at its
window: one denominator for every row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEV_SET = REPO.parent / "shared" / "eval" / "chroma-dev"
SAMPLE = REPO / "pipeline" / "sample_corpus"
BATCH = 64
# torch's intra-op threads in every row: its own default (the cores), set explicitly in the
# library rows; chunkmill's backends use every core too (OpenVINO's LATENCY hint, ONNX
# Runtime's default).
THREADS = os.cpu_count() or 1
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-bf16", "openvino-int8")
# Rows that are a backend with a flag: torch compiled (or kept eager) whatever the embed's size.
FLAGGED = {
    "torch-compiled": ("torch", ("--compile", "on")),
    "torch-eager": ("torch", ("--compile", "off")),
}
ROW_NAMES = (*BACKENDS, *FLAGGED)
SIDE_VENV = REPO / ".venv-embed"
# What LangChain's row installs into its environment (the rest comes from this one's).
SIDE_PACKAGES = ("langchain-huggingface",)
# In which environment each library row runs: "side" is SIDE_VENV.
RUNS_IN = {"plain": "here", "beam": "here", "langchain": "side"}


# ---------------------------------------------------------------------------------------------
# The rows, each run as `python -m benchmarks.embed_backends --row NAME TEXTS.json` in its own
# process; each prints {"seconds": encode phase, "vectors": n} as its last line.


def _threads(job: dict) -> None:
    import torch

    torch.set_num_threads(job["threads"])


def row_plain(job: dict) -> dict:
    from sentence_transformers import SentenceTransformer

    _threads(job)
    model = SentenceTransformer(job["model"], device="cpu", local_files_only=True)
    started = time.perf_counter()
    vectors = model.encode(job["texts"], batch_size=job["batch"], convert_to_numpy=True)
    return {"seconds": time.perf_counter() - started, "vectors": len(vectors)}


def row_beam(job: dict) -> dict:
    import apache_beam as beam
    from apache_beam.ml.transforms.base import MLTransform
    from apache_beam.ml.transforms.embeddings.huggingface import SentenceTransformerEmbeddings

    _threads(job)
    artifacts = tempfile.mkdtemp(prefix="beam-mlt-")
    embed = SentenceTransformerEmbeddings(
        model_name=job["model"], columns=["text"], max_batch_size=job["batch"]
    )
    count = []
    started = time.perf_counter()
    with beam.Pipeline() as p:
        _ = (
            p
            | beam.Create([{"text": t} for t in job["texts"]])
            | MLTransform(write_artifact_location=artifacts).with_transform(embed)
            | beam.combiners.Count.Globally()
            | beam.Map(count.append)
        )
    shutil.rmtree(artifacts, ignore_errors=True)
    return {"seconds": time.perf_counter() - started, "vectors": count[0] if count else 0}


def row_langchain(job: dict) -> dict:
    from langchain_huggingface import HuggingFaceEmbeddings

    _threads(job)
    model = HuggingFaceEmbeddings(
        model_name=job["model"],
        model_kwargs={"device": "cpu", "local_files_only": True},
        encode_kwargs={"batch_size": job["batch"]},
    )
    started = time.perf_counter()
    vectors = model.embed_documents(job["texts"])
    return {"seconds": time.perf_counter() - started, "vectors": len(vectors)}


ROWS = {"plain": row_plain, "beam": row_beam, "langchain": row_langchain}
NEEDS = {"beam": "apache_beam.ml.transforms", "langchain": "langchain_huggingface"}


def setup(venv: Path) -> None:
    """LangChain's row's environment (module docstring): a venv that sees this interpreter's
    packages after its own, with ``SIDE_PACKAGES`` installed into it."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = Path(subprocess.check_output([python, "-c", purelib], text=True).strip())
    shared = [
        p
        for p in sys.path
        if p.endswith("site-packages") and Path(p).is_dir() and Path(p).resolve() != own.resolve()
    ]
    (own / "shared-packages.pth").write_text("".join(f"{p}\n" for p in shared))
    # pip leaves the shared packages alone ("outside environment"): what they do not satisfy
    # (huggingface_hub below 2) is installed into the venv, ahead of them on sys.path.
    pip = [python, "-m", "pip", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", *SIDE_PACKAGES], check=True)


# ---------------------------------------------------------------------------------------------
# The texts


def make_run(work: Path, want: int, dev_set: Path) -> tuple[Path, list[str]]:
    """A chunkmill run over copies of the corpora with at least ``want`` chunks (or all of
    one copy); its output and its chunk texts, as embed reads them."""
    import pyarrow.parquet as pq

    sources = sorted(dev_set.glob("corpora/*.md")) if dev_set.is_dir() else []
    sources += sorted(p for p in SAMPLE.rglob("*.md"))
    if not sources:
        raise SystemExit("no corpus found: pass --set with the development set's folder")
    output = work / "out"
    copies = 1
    while True:
        corpus = work / "corpus"
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.rmtree(output, ignore_errors=True)
        for copy in range(copies):
            for i, source in enumerate(sources):
                text = source.read_text(encoding="utf-8")
                if copy:
                    text = re.sub(r"\n\n", f" ({copy})\n\n", text)
                target = corpus / f"copy{copy}" / f"{i}-{source.name}"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        subprocess.run(
            [sys.executable, "-m", "chunkmill", "run", "--input", f"{corpus}/**",
             "--output", str(output), "--tokenizer", "all-minilm-l6-v2",
             "--max-embed-tokens", "256"],
            check=True, stdout=subprocess.DEVNULL, env=_env(),
        )  # fmt: skip
        texts: dict[str, str] = {}
        for f in sorted(output.glob("runs/*/chunks/*.parquet")):
            for r in pq.read_table(
                f, columns=["chunk_hash", "text", "text_with_context"]
            ).to_pylist():
                texts.setdefault(r["chunk_hash"], r["text_with_context"] or r["text"])
        if len(texts) >= want or copies >= 64:
            return output, list(texts.values())
        copies = max(copies + 1, -(-want * copies // max(len(texts), 1)))


def model_tokens(texts: list[str]) -> int:
    from transformers import AutoTokenizer

    from chunkmill import embedding

    tokenizer = AutoTokenizer.from_pretrained(str(embedding.model_path()), local_files_only=True)
    ids = tokenizer([t.strip() for t in texts], truncation=True, max_length=256)["input_ids"]
    return sum(len(i) for i in ids)


# ---------------------------------------------------------------------------------------------
# Measuring


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def measure(argv: list[str]) -> dict:
    """Runs ``argv`` to its end; its wall and CPU seconds, peak RSS (MB) and output."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=_env())
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode:
        tail = stderr.strip().splitlines()[-1:] or ["?"]
        return {"error": f"exit {child.returncode}: {tail[0][:120]}"}
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "stdout": stdout,
        "stderr": stderr,
    }


def embed_row(output: Path, row: str, check_vectors: bool = True) -> dict:
    """``chunkmill embed`` of the row ``row`` (a backend, or one of ``FLAGGED``); the
    seconds it reports, and those of its compile when it compiled (stderr)."""
    backend, flags = FLAGGED.get(row, (row, ()))
    shutil.rmtree(output / "embeddings", ignore_errors=True)
    argv = [sys.executable, "-m", "chunkmill", "embed", "--output", str(output),
            "--backend", backend, "--batch-size", str(BATCH), "--device", "cpu",
            *flags]  # fmt: skip
    got = measure(argv)
    if "error" not in got:
        found = re.search(r"embedded (\d+) chunks in ([\d.]+) s", got["stdout"])
        got["seconds"] = float(found[2]) if found else got["wall"]
        got["vectors"] = int(found[1]) if found else 0
        compiled = re.search(r"compiled the model in ([\d.]+) s", got["stderr"])
        got["compile"] = float(compiled[1]) if compiled else 0.0
        if check_vectors:
            got["stored"] = stored_vectors(output, backend)
    return got


def stored_vectors(output: Path, backend: str) -> dict:
    """``backend``'s vectors in the store, by chunk hash."""
    import numpy as np
    import pyarrow as pa

    from chunkmill import embedding
    from chunkmill.transforms import embedstore

    key = embedding.describe(backend=backend).key
    table = pa.concat_tables(embedstore.read_vectors(str(output), key))
    vectors = np.asarray(table["vector"].to_pylist(), np.float32)
    return dict(zip(table["chunk_hash"].to_pylist(), vectors, strict=True))


def agreement(got: dict, reference: dict) -> str:
    """Cosine of each vector to the reference's of the same chunk: mean / min."""
    import numpy as np

    cosines = [
        float(v @ reference[h] / np.linalg.norm(v) / np.linalg.norm(reference[h]))
        for h, v in got.items()
        if h in reference
    ]
    return f"{np.mean(cosines):.4f} / {min(cosines):.4f}" if cosines else ""


def best(runs: list[dict]) -> dict:
    """The best of a row's runs: least embedding, wall and CPU time; the first's vectors."""
    done = [r for r in runs if "error" not in r]
    if not done:
        return runs[0]
    merged = dict(done[0])
    for field in ("seconds", "wall", "cpu", "rss_mb"):
        merged[field] = min(r[field] for r in done)
    merged["after_compile"] = min(r["seconds"] - r.get("compile", 0.0) for r in done)
    merged["runs"] = len(done)
    return merged


def library_row(name: str, job_file: Path, side_venv: Path) -> dict:
    python = Path(sys.executable)
    if RUNS_IN[name] == "side":
        python = side_venv / "bin" / "python"
        if not python.exists():
            return {"error": "no environment: python -m benchmarks.embed_backends --setup"}
    module = NEEDS.get(name)
    if module is not None:
        found = subprocess.run(
            [str(python), "-c", f"import {module}"], capture_output=True, env=_env()
        )
        if found.returncode:
            return {"error": f"not installed ({module})"}
    argv = [str(python), "-m", "benchmarks.embed_backends", "--row", name, str(job_file)]
    got = measure(argv)
    if "error" not in got:
        got.update(json.loads(got["stdout"].strip().splitlines()[-1]))
    return got


def gemm_ceiling(tokens_per_call: int, repeat: int = 5) -> dict:
    """The fp32 ceiling of the model's linear layers on this machine: each linear layer's
    matrix product timed at its own shape (``tokens_per_call`` rows, the model's widths from
    its config.json, ``THREADS`` threads, best of ``repeat``), and the tokens per second
    that the layers alone allow, attention, softmax, layer norm and GELU costing nothing."""
    import torch

    from chunkmill import embedding

    config = json.loads((embedding.model_path() / "config.json").read_text())
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    layers = config["num_hidden_layers"]
    torch.set_num_threads(THREADS)
    # (inputs, outputs) of each linear layer of a transformer layer: query, key, value and
    # attention output, then the feed-forward's two.
    shapes = [(hidden, hidden)] * 4 + [(hidden, inner), (inner, hidden)]
    seconds = 0.0
    flops = 0
    with torch.inference_mode():
        for width_in, width_out in shapes:
            x = torch.randn(tokens_per_call, width_in)
            w = torch.randn(width_out, width_in)
            torch.nn.functional.linear(x, w)
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                torch.nn.functional.linear(x, w)
                times.append(time.perf_counter() - started)
            seconds += min(times)
            flops += 2 * tokens_per_call * width_in * width_out
    return {
        "gflops": flops / seconds / 1e9,
        "tokens_per_second": tokens_per_call / (seconds * layers),
        "tokens_per_call": tokens_per_call,
    }


def warm_exports(rows: list[str]) -> None:
    """Exports the graph of each backend of ``rows`` into the cache first: no row pays for
    an export."""
    from chunkmill import embedding

    for backend in [b for b in BACKENDS[1:] if b in rows]:
        model = embedding.describe(backend=backend)
        embedding.load_encoder(model, "cpu")


def table(
    rows: list[tuple[str, dict]],
    tokens: int,
    texts: int,
    repeat: int = 1,
    ceiling: dict | None = None,
) -> str:
    """The Markdown table: each row's rates, its ratio to ``chunkmill embed --backend
    torch``, and, for rows on torch's fp32 forward pass, the fraction of the fp32 GEMM
    ``ceiling`` their rate after any compile reaches."""
    torch = dict(rows).get("chunkmill embed --backend torch", {})
    reference = torch.get("stored", {})
    lines = [
        f"{texts:,} chunks, {tokens:,} model tokens; batch {BATCH}, {THREADS} threads, "
        f"{os.cpu_count()} cores"
        + (f"; chunkmill rows best of {repeat} interleaved runs" if repeat > 1 else ""),
        "",
        "| row | tokens/s (embedding) | vs torch | tokens/s after compile | of fp32 ceiling "
        "| tokens/s (whole process) | CPU s | peak RSS MB | cosine to torch mean / min |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    if ceiling:
        lines.append(
            f"| fp32 GEMM ceiling: linear layers alone at {ceiling['gflops']:.0f} GFLOP/s "
            f"({ceiling['tokens_per_call']:,} tokens per product) | "
            f"{ceiling['tokens_per_second']:,.0f} | | | 1.00 | | | | |"
        )
    for name, got in rows:
        if "error" in got:
            lines.append(f"| {name} | {got['error']} | | | | | | | |")
            continue
        ratio = f"{torch['seconds'] / got['seconds']:.2f}x" if "seconds" in torch else ""
        cosine = agreement(got["stored"], reference) if "stored" in got and reference else ""
        steady = tokens / got.get("after_compile", got["seconds"])
        compiled = f"{steady:,.0f}" if got.get("compile") else ""
        fp32 = "torch" in name or "SentenceTransformer" in name or "LangChain" in name
        share = f"{steady / ceiling['tokens_per_second']:.2f}" if ceiling and fp32 else ""
        lines.append(
            f"| {name} | {tokens / got['seconds']:,.0f} | {ratio} | {compiled} | {share} "
            f"| {tokens / got['wall']:,.0f} | {got['cpu']:.0f} | {got['rss_mb']:,.0f} "
            f"| {cosine} |"
        )
    return "\n".join(lines)


def scale_table(backend: str, sizes: list[tuple[int, int, dict]]) -> str:
    """Peak RSS of ``chunkmill embed --backend backend`` on runs of several sizes."""
    lines = [
        f"| chunkmill embed --backend {backend} | chunks | model tokens | tokens/s (embedding) "
        "| peak RSS MB |",
        "|---|---:|---:|---:|---:|",
    ]
    for texts, tokens, got in sizes:
        if "error" in got:
            lines.append(f"| | {texts:,} | {tokens:,} | {got['error']} | |")
            continue
        lines.append(
            f"| | {texts:,} | {tokens:,} | {tokens / got['seconds']:,.0f} | {got['rss_mb']:,.0f} |"
        )
    return "\n".join(lines)


LABELS = {
    "plain": "SentenceTransformer.encode loop (torch)",
    "beam": "Beam MLTransform SentenceTransformerEmbeddings",
    "langchain": "LangChain HuggingFaceEmbeddings",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.embed_backends")
    parser.add_argument("--texts", type=int, default=2000, help="chunks to embed (about)")
    parser.add_argument("--set", type=Path, default=DEV_SET, help="the development set's folder")
    parser.add_argument(
        "--backends", nargs="*", default=list(BACKENDS), choices=ROW_NAMES, metavar="ROW"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="interleaved runs of each chunkmill row (best kept)"
    )
    parser.add_argument("--only-backends", action="store_true", help="leave out the library rows")
    parser.add_argument(
        "--library",
        nargs="*",
        default=list(LABELS),
        choices=list(LABELS),
        metavar="ROW",
        help="the library rows to run (default: all)",
    )
    parser.add_argument(
        "--scale-texts",
        type=int,
        nargs="*",
        default=[1000, 4000],
        help="run sizes (about, in chunks) whose peak RSS is measured (none: skipped)",
    )
    parser.add_argument(
        "--scale-backend", default="openvino-int8", help="the backend of the RSS runs"
    )
    parser.add_argument("--setup", action="store_true", help="build LangChain's venv, exit")
    parser.add_argument("--venv", type=Path, default=SIDE_VENV, help="LangChain's venv")
    parser.add_argument("--row", nargs=2, metavar=("NAME", "JOB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.row:
        name, job_file = args.row
        print(json.dumps(ROWS[name](json.loads(Path(job_file).read_text()))))
        return 0
    if args.setup:
        setup(args.venv)
        return 0
    with tempfile.TemporaryDirectory(prefix="embed-bench-") as tmp:
        work = Path(tmp)
        library = () if args.only_backends else tuple(args.library)
        if args.backends or library:
            print(f"chunking the corpus ({args.texts} chunks)...", file=sys.stderr)
            output, texts = make_run(work / "main", args.texts, args.set)
            print(embed_table(output, texts, args, library, work), flush=True)
        if args.scale_texts:
            sizes = []
            for want in args.scale_texts:
                print(f"RSS: a run of {want} chunks...", file=sys.stderr)
                output, texts = make_run(work / f"scale-{want}", want, args.set)
                got = embed_row(output, args.scale_backend, check_vectors=False)
                sizes.append((len(texts), model_tokens(texts), got))
                shutil.rmtree(work / f"scale-{want}", ignore_errors=True)
            print()
            print(scale_table(args.scale_backend, sizes))
    return 0


def embed_table(output: Path, texts: list[str], args, library: tuple[str, ...], work: Path) -> str:
    from chunkmill import embedding

    job_file = work / "job.json"
    job = {"texts": texts, "model": str(embedding.model_path()), "threads": THREADS}
    job_file.write_text(json.dumps({**job, "batch": BATCH}))
    tokens = model_tokens(texts)
    print("the fp32 GEMM ceiling...", file=sys.stderr)
    ceiling = gemm_ceiling(BATCH * round(tokens / len(texts)))
    print("exporting the backends (once, into the cache)...", file=sys.stderr)
    warm_exports(args.backends)
    rows: list[tuple[str, dict]] = []
    for name in library:
        print(f"row {name}...", file=sys.stderr)
        rows.append((LABELS[name], library_row(name, job_file, args.venv)))
    runs: dict[str, list[dict]] = {b: [] for b in args.backends}
    for round_ in range(args.repeat):
        # The ceiling is timed again each round and its best kept, as the rows keep theirs.
        again = gemm_ceiling(ceiling["tokens_per_call"])
        if again["tokens_per_second"] > ceiling["tokens_per_second"]:
            ceiling = again
        start = round_ % max(len(args.backends), 1)
        for backend in args.backends[start:] + args.backends[:start]:
            print(f"row chunkmill embed --backend {backend}...", file=sys.stderr)
            runs[backend].append(embed_row(output, backend))
    for backend in args.backends:
        rows.append((row_label(backend), best(runs[backend])))
    return table(rows, tokens, len(texts), args.repeat, ceiling)


def row_label(row: str) -> str:
    backend, flags = FLAGGED.get(row, (row, ()))
    return " ".join(["chunkmill embed --backend", backend, *flags])


if __name__ == "__main__":
    sys.exit(main())
