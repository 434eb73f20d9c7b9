"""``chunkmill eval`` on a small corpus: documents found by corpus_id, configurations side by
side, the HTML page, a finished run's chunks, and every mistake as one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkmill.pipeline.cli import main

PARIS = "# Capitals\n\nParis is the capital of France.\n\nIt lies on the Seine.\n"
BERLIN = "# Germany\n\nBerlin is the capital of Germany.\n\nIt lies on the Spree.\n"


def evidence(text: str, part: str) -> dict:
    start = text.index(part)
    return {"content": part, "start_index": start, "end_index": start + len(part)}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "paris.md").write_text(PARIS)
    (tmp_path / "docs" / "sub" / "berlin.md").write_text(BERLIN)
    write_questions(
        tmp_path / "q.jsonl",
        [
            ("Which river flows through the capital of France?", "paris", PARIS, "Seine"),
            ("What is the capital of Germany?", "sub/berlin.md", BERLIN, "Berlin is the"),
        ],
    )
    return tmp_path


def write_questions(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    lines = [
        json.dumps({"question": q, "corpus_id": cid, "references": [evidence(text, part)]})
        for q, cid, text, part in rows
    ]
    path.write_text("\n".join(lines) + "\n")


def eval_args(root: Path, *extra: str) -> list[str]:
    return ["eval", "--input", str(root / "docs" / "**"), "--questions", str(root / "q.jsonl"),
            *extra]  # fmt: skip


def test_configurations_side_by_side_with_bm25(corpus, capsys):
    spec = "paragraph max-tokens=8 overlap-tokens=0"
    code = main(eval_args(corpus, "--compare", spec, "section", "-k", "1"))
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].split() == [
        "configuration", "chunks", "mean", "chars", "PΩ", "bm25", "recall", "precision", "IoU"
    ]  # fmt: skip
    assert out[1].startswith(spec + " ") and out[2].startswith("section ")
    # One section a document: each question's top chunk holds its evidence. Paragraphs of at
    # most 8 tokens: the Seine question's words are those of the chunk before its answer.
    assert [line.split()[-3] for line in out[1:3]] == [".500", "1.000"]
    assert out[3] == "2 questions, top 1 chunks each, all documents in one index"


def test_the_html_page_has_the_table_and_the_plot(corpus, capsys):
    page = corpus / "eval.html"
    assert main(eval_args(corpus, "--compare", "paragraph", "section", "--html", str(page))) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"page       {page}"
    text = page.read_text()
    assert "<svg" in text and "recall against IoU" in text
    # a point a configuration (bm25: circles), the legend's mark of each and of bm25
    assert text.count("<circle") == 2 + 2 + 1
    assert "<td>paragraph</td>" in text and "<td>section</td>" in text
    assert "<script" not in text


def test_flags_outside_compare_apply_to_every_configuration(corpus, capsys):
    specs = ["paragraph overlap-tokens=0", "section"]
    assert main(eval_args(corpus, "--max-tokens", "8", "--compare", *specs)) == 0
    narrow = capsys.readouterr().out.splitlines()
    assert main(eval_args(corpus, "--compare", *specs)) == 0
    wide = capsys.readouterr().out.splitlines()

    def chunks(line: str, spec: str) -> int:
        assert line.startswith(spec + " ")
        return int(line[len(spec) :].split()[0])

    for i, spec in enumerate(specs, 1):
        assert chunks(narrow[i], spec) > chunks(wide[i], spec)


def test_one_configuration_from_the_flags_is_labelled_in_the_words_of_a_spec(corpus, capsys):
    flags = ["--strategy", "paragraph", "--max-tokens", "100", "--overlap-tokens", "0"]
    assert main(eval_args(corpus, *flags)) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[1]
        .startswith("paragraph max-tokens=100 overlap-tokens=0 ")
    )


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("chunkmill: error: "), err
    return err[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--compare", "paragraf"], "--compare 'paragraf': argument --strategy: invalid choice"),
        (
            ["--compare", "paragraph max-tokens=lots"],
            "--compare 'paragraph max-tokens=lots': argument --max-tokens: must be an integer",
        ),
        (["--compare", "paragraph max-tokens"], "'max-tokens' is not FLAG=VALUE"),
        (["--compare", "paragraph heading-context=maybe"], "takes true or false, not 'maybe'"),
        (["--compare", "paragraph colour=red"], "unrecognized argument"),
        (["--compare", "paragraph chunk-size=400"], "--chunk-size does not apply to strategy"),
        (
            ["--compare", "paragraph overlap-tokens=8 overlap-sentences=2"],
            "--overlap-sentences and --overlap-tokens are two kinds of overlap",
        ),
        (["--chunk-size", "400", "--strategy", "section"], "--chunk-size does not apply"),
        (["--compare", "section tokenizer='x"], '--compare "section tokenizer=\'x": No closing'),
        (["--model", "x"], "--model x: not a sentence-transformers folder"),
        (["--run", "r1"], "give --input and --compare, or --run"),
        (["--html", "/nonexistent/folder/x.html"], "--html /nonexistent/folder/x.html: its folder"),
        (["--retriever", "tfidf"], "argument --retriever: invalid choice"),
    ],
)
def test_bad_flags_are_one_line(corpus, capsys, extra, message):
    assert main(eval_args(corpus, *extra)) == 2
    assert message in one_line_error(capsys)


def test_help_and_a_bad_flag_answer_without_beam():
    from tests.unit.test_cli_startup import probe

    code, imported, out, _ = probe("eval", "--help")
    assert code == 0 and "usage: chunkmill eval" in out and "--compare SPEC" in out
    assert imported == []
    code, imported, _, err = probe(
        "eval", "--input", "d/*", "--questions", "q.csv", "--compare", "paragraf"
    )
    assert code == 2 and len(err) == 1 and "invalid choice: 'paragraf'" in err[0]
    assert imported == []


def test_chunking_flags_with_a_run_are_one_line(corpus, capsys):
    args = ["eval", "--run", "r1", "--questions", str(corpus / "q.jsonl"), "--max-tokens", "9"]
    assert main(args) == 2
    assert "--run scores that run's chunks as they are: drop --max-tokens" in one_line_error(capsys)


def test_without_input_or_run_is_one_line(corpus, capsys):
    assert main(["eval", "--questions", str(corpus / "q.jsonl")]) == 2
    assert "--input: which documents? (or --run RUN_ID" in one_line_error(capsys)


def test_a_corpus_id_that_names_no_document_is_one_line(corpus, capsys):
    write_questions(corpus / "q.jsonl", [("Q?", "rome", PARIS, "Seine")])
    assert main(eval_args(corpus)) == 2
    assert (
        "--questions line 1: corpus_id 'rome' names no document of the 2 read (it must be the "
        "end of a document's path, with or without its extension)"
    ) in one_line_error(capsys)


def test_a_corpus_id_naming_two_documents_is_one_line_and_more_path_resolves_it(corpus, capsys):
    (corpus / "docs" / "other").mkdir()
    (corpus / "docs" / "other" / "berlin.md").write_text(BERLIN)
    write_questions(corpus / "q.jsonl", [("Q?", "berlin", BERLIN, "Spree")])
    assert main(eval_args(corpus)) == 2
    assert "corpus_id 'berlin' names 2 documents" in one_line_error(capsys)
    write_questions(corpus / "q.jsonl", [("Q?", "other/berlin", BERLIN, "Spree")])
    assert main(eval_args(corpus)) == 0


def test_evidence_that_is_not_the_extracted_text_is_one_line(corpus, capsys):
    row = {"question": "Q?", "corpus_id": "paris",
           "references": [{"content": "Rome", "start_index": 0, "end_index": 4}]}  # fmt: skip
    (corpus / "q.jsonl").write_text(json.dumps(row))
    assert main(eval_args(corpus)) == 2
    assert (
        "reference 0's content differs from characters 0..4 of 'paris': the ranges must be of "
        "the text chunkmill extracts"
    ) in one_line_error(capsys)


def test_a_bad_questions_file_is_one_line(corpus, capsys):
    (corpus / "q.jsonl").write_text('{"question": "Q?"}\n')
    assert main(eval_args(corpus)) == 2
    assert f"--questions {corpus / 'q.jsonl'} line 1: no corpus_id" in one_line_error(capsys)


def test_an_input_with_no_document_or_no_folder_is_one_line(corpus, capsys):
    questions = ["--questions", str(corpus / "q.jsonl")]
    assert main(["eval", "--input", str(corpus / "docs" / "*.pdf"), *questions]) == 2
    assert "*.pdf: no document to evaluate on" in one_line_error(capsys)
    assert main(["eval", "--input", str(corpus / "none" / "*.md"), *questions]) == 2
    assert f"cannot list {corpus / 'none'}" in one_line_error(capsys)


@pytest.mark.slow
def test_a_finished_runs_chunks_score_as_the_same_configuration_on_its_input(corpus, capsys):
    out = corpus / "out"
    docs = str(corpus / "docs" / "**")
    assert main(["run", "--input", docs, "--output", str(out), "--run-id", "r1"]) == 0
    capsys.readouterr()
    assert main(["eval", "--run", "r1", "--output", str(out), "--questions",
                 str(corpus / "q.jsonl")]) == 0  # fmt: skip
    from_run = capsys.readouterr().out.splitlines()
    assert main(eval_args(corpus)) == 0
    from_input = capsys.readouterr().out.splitlines()
    assert from_run[1].startswith("run r1 ") and from_input[1].startswith("auto ")
    assert from_run[1].split()[2:] == from_input[1].split()[1:]
    assert main(["eval", "--run", "r2", "--output", str(out), "--questions",
                 str(corpus / "q.jsonl")]) == 2  # fmt: skip
    assert "--run r2: no finished run of that id" in one_line_error(capsys)


@pytest.mark.slow
def test_the_model_retriever_beside_bm25(corpus, capsys, monkeypatch):
    from chunkmill.evaluation import retrievers

    monkeypatch.setattr(retrievers, "QUERY_BLOCK", 1)  # one query a block: blocks joined in order
    monkeypatch.setattr(retrievers, "PROGRESS_FROM", 1)
    monkeypatch.setattr(retrievers, "BATCH", 1)
    code = main(eval_args(corpus, "--retriever", "bm25", "--retriever", "model", "-k", "1"))
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert code == 0
    # 2 questions and 2 chunks (one section a document): a line at every tenth, 4 in all
    progress = [line for line in captured.err.splitlines() if line.startswith("embedded")]
    assert progress == [f"embedded {n} of 4 texts" for n in (1, 2, 3, 4)]
    assert out[0].split()[5:] == ["bm25", "recall", "precision", "IoU",
                                  "model", "recall", "precision", "IoU"]  # fmt: skip
    assert out[1].split()[-3] == "1.000"  # the model finds both answers in its top chunk


def test_a_switch_in_a_spec_is_true_or_false():
    from chunkmill.pipeline.commands.eval import spec_config

    assert spec_config("paragraph heading-context=true").heading_context is True
    assert spec_config("paragraph heading_context=no").heading_context is False


def test_configurations_after_the_first_are_compared_with_it_question_by_question(corpus, capsys):
    spec = "paragraph max-tokens=8 overlap-tokens=0"
    assert main(eval_args(corpus, "--compare", spec, "section", "-k", "1")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[4].startswith(f"against {spec}, per question:")
    # section finds the Seine question's evidence, which the small paragraphs miss: +.5 on
    # the mean of two questions, one question better, none worse.
    assert out[5].split()[:4] == ["section", "bm25", "recall", "+.500"]
    assert "1/0 p 1.000" in out[5]
