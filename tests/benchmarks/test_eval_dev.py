"""chunkmill.evaluation reproduces the published figures of the development set (kept beside
the repository, not in it) for LangChain's recursive splitter, within a point, and
``chunkmill eval`` scores the set through the command line."""

from __future__ import annotations

import pytest

from benchmarks import eval_dev
from chunkmill.evaluation import Bm25Retriever, ModelRetriever, score
from chunkmill.pipeline.cli import main

# The set's published figures: (size, overlap) -> PΩ, BM25 (recall, IoU), MiniLM (recall, IoU).
REFERENCE = {
    (400, 200): (0.147, (0.961, 0.036), (0.899, 0.035)),
    (250, 125): (0.225, None, (0.874, 0.052)),
    (200, 0): (0.313, (0.892, 0.067), (0.835, 0.069)),
}
POINT = 0.01


@pytest.fixture(scope="module")
def dev():
    assert (eval_dev.DEV_SET / "questions.csv").is_file(), (
        f"the development set belongs at {eval_dev.DEV_SET}"
    )
    return eval_dev.load()


@pytest.mark.parametrize("size", list(REFERENCE), ids=lambda s: f"{s[0]}-{s[1]}")
def test_langchain_reference_figures_with_bm25_and_precision_omega(dev, size):
    omega, bm25, _ = REFERENCE[size]
    chunks = eval_dev.langchain_chunks(dev.texts, *size)
    got = score(chunks, dev.questions, Bm25Retriever())
    assert (got.questions, got.k) == (200, 5)
    assert got.precision_omega == pytest.approx(omega, abs=POINT)
    if bm25 is not None:
        assert (got.recall, got.iou) == (
            pytest.approx(bm25[0], abs=POINT),
            pytest.approx(bm25[1], abs=POINT),
        )


@pytest.mark.slow
def test_langchain_reference_figure_with_minilm(dev):
    from chunkmill import embedding

    _, _, minilm = REFERENCE[(200, 0)]
    chunks = eval_dev.langchain_chunks(dev.texts, 200, 0)
    got = score(chunks, dev.questions, ModelRetriever(embedding.model_path(), progress=False))
    assert (got.recall, got.iou) == (
        pytest.approx(minilm[0], abs=POINT),
        pytest.approx(minilm[1], abs=POINT),
    )


def test_the_command_scores_the_set_as_the_api_does(dev, capsys):
    folder = eval_dev.DEV_SET
    code = main(
        [
            "eval",
            "--input", str(folder / "corpora" / "*.md"),
            "--questions", str(folder / "questions.csv"),
            "--compare", "paragraph max-tokens=256", "recursive chunk-size=600",
        ]
    )  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    specs = ["paragraph max-tokens=256", "recursive chunk-size=600"]
    for spec, line in zip(specs, lines[1:3], strict=True):
        expected = score(eval_dev.chunkmill_chunks(dev.texts, spec), dev.questions, Bm25Retriever())
        cells = line[len(spec) :].split()
        assert cells == [
            str(expected.chunks),
            f"{expected.mean_chars:.0f}",
            f"{expected.precision_omega:.3f}".lstrip("0"),
            f"{expected.recall:.3f}".lstrip("0"),
            f"{expected.precision:.3f}".lstrip("0"),
            f"{expected.iou:.3f}".lstrip("0"),
        ]
    assert lines[3] == "200 questions, top 5 chunks each, all documents in one index"


def test_the_benchmark_compares_each_row_with_langchain_400_200(dev, capsys):
    spec = "paragraph max-tokens=256"
    assert eval_dev.main(["--bm25", "--only-specs", "--spec", spec]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:4]] == [
        f"| chunkmill {spec}",
        "| LangChain 400/200",
    ]
    assert lines[5].startswith("against LangChain 400/200, per question:")
    ours = score(eval_dev.chunkmill_chunks(dev.texts, spec), dev.questions, Bm25Retriever())
    theirs = score(eval_dev.langchain_chunks(dev.texts, 400, 200), dev.questions, Bm25Retriever())
    difference = ours.recall - theirs.recall
    cells = lines[6].split()
    assert cells[:5] == ["chunkmill", *spec.split(), "BM25", "recall"]
    assert cells[5].rstrip("*") == (
        "-" if difference < 0 else "+"
    ) + f"{abs(difference):.3f}".lstrip("0")


def test_the_command_scores_langchain_beside_the_default_as_the_docs_show(dev, capsys):
    # docs/evaluation.md's one command (BM25 only here; the model's rows are the slow test's).
    folder = eval_dev.DEV_SET
    specs = [
        f"langchain chunk-size={s} chunk-overlap={o} tokenizer=cl100k separators=chroma"
        for s, o in REFERENCE
    ]
    argv = ["eval", "--input", str(folder / "corpora" / "*.md"),
            "--questions", str(folder / "questions.csv"), "--model", "all-MiniLM-L6-v2",
            "--compare", "auto", *specs]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    for (omega, bm25, _), spec, line in zip(REFERENCE.values(), specs, lines[2:5], strict=True):
        assert line.startswith(spec + " ")
        cells = [float(c) for c in line[len(spec) :].split()[2:]]  # PΩ, recall, precision, IoU
        assert cells[0] == pytest.approx(omega, abs=POINT)
        if bm25 is not None:
            assert (cells[1], cells[3]) == (
                pytest.approx(bm25[0], abs=POINT),
                pytest.approx(bm25[1], abs=POINT),
            )
