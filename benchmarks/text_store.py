"""What the text store keeps on disk over nights: the same nights (each edits, deletes and
adds a share of the documents) run into two outputs, one never collected, one with
``runs gc --keep 0`` after every night; per night, the bytes under ``runs/`` and ``text/``
of each, and the bytes of the live text alone (the store's live rows).

    python -m benchmarks.text_store [--docs 300] [--nights 8] [--churn 0.1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import tempfile
from pathlib import Path

from benchmarks.corpus import generate


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def chunkmill(*argv: str) -> None:
    from chunkmill.pipeline.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    if code != 0:
        raise SystemExit(f"chunkmill {' '.join(argv)} exited {code}")


def live_bytes(output: Path, run_id: str) -> int:
    """The bytes the live text would take alone: the store's rows less its dead ones, in
    proportion."""
    from chunkmill.transforms import textstore

    index = textstore.read_index(str(output), run_id)
    assert index is not None
    total = sum(int(f["bytes"]) for f in index.files)
    return round(total * index.live / index.rows) if index.rows else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--nights", type=int, default=8)
    parser.add_argument("--churn", type=float, default=0.1, help="share of documents edited")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    pool = generate(args.docs * 3, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        corpus.mkdir()
        docs = {f"d{i:05d}.md": text for i, (_, text) in enumerate(pool[: args.docs])}
        spare = [text for _, text in pool[args.docs :]]
        print(
            "| night | no gc: runs/ + text/ | gc --keep 0: runs/ + text/ | its text/ | live text |"
        )
        print("|---|---|---|---|---|")
        for night in range(1, args.nights + 1):
            if night > 1:
                names = sorted(docs)
                for name in rng.sample(names, int(len(names) * args.churn)):
                    paragraphs = docs[name].split("\n\n")  # one paragraph rewritten
                    paragraphs[rng.randrange(len(paragraphs))] = rng.choice(
                        rng.choice(spare).split("\n\n")
                    )
                    docs[name] = "\n\n".join(paragraphs)
                for name in rng.sample(names, max(1, len(names) // 50)):
                    del docs[name]
                for _ in range(max(1, args.docs // 50)):
                    if spare:
                        docs[f"n{night}-{len(docs)}.md"] = spare.pop()
            for p in corpus.iterdir():
                p.unlink()
            for name, text in docs.items():
                (corpus / name).write_text(text)
            run_id = f"night{night:02d}"
            for out in ("plain", "collected"):
                chunkmill(
                    "run",
                    "--input",
                    str(corpus / "**"),
                    "--output",
                    str(root / out),
                    "--run-id",
                    run_id,
                    "--runner=FnApiRunner",
                    "--max-removed-ratio",
                    "1",
                )
            chunkmill("runs", "gc", "--output", str(root / "collected"), "--keep", "0")
            plain = size(root / "plain" / "runs") + size(root / "plain" / "text")
            collected = size(root / "collected" / "runs") + size(root / "collected" / "text")
            live = live_bytes(root / "collected", run_id)
            text = size(root / "collected" / "text")
            print(
                f"| {night} | {plain / 1024:.0f} KB | {collected / 1024:.0f} KB "
                f"| {text / 1024:.0f} KB | {live / 1024:.0f} KB |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
