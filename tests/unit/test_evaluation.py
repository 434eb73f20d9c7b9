"""chunkmill.evaluation: the metric on hand-computed cases, BM25 against the bm25s package,
locating chunk texts, and reading questions from CSV and JSON Lines."""

from __future__ import annotations

import csv
import json
import random
import re

import pytest

from chunkmill.evaluation import (
    Bm25Retriever,
    EvalChunk,
    Question,
    QuestionError,
    chunks_from_spans,
    read_questions,
    score,
    spans_in,
)
from chunkmill.evaluation.bm25 import Bm25, words
from chunkmill.evaluation.metrics import precision_omega, retrieval_score
from chunkmill.evaluation.questions import check_contents

# ---------------------------------------------------------------------------------------------
# The metric


def test_partial_cover_gives_recall_precision_and_iou_by_hand():
    s = retrieval_score([(10, 20)], [(0, 15)], [15])
    # 5 of 10 evidence characters found, in 15 retrieved; IoU 5 / (15 + 5 missed)
    assert (s.recall, s.precision, s.iou) == (0.5, 5 / 15, 5 / 20)


def test_overlapping_retrieved_chunks_count_twice_in_the_denominators():
    # (0, 20) and (10, 30) share 10 characters: retrieved length 40, not their union's 30.
    s = retrieval_score([(10, 20)], [(0, 20), (10, 30)], [20, 20])
    assert (s.recall, s.precision, s.iou) == (1.0, 10 / 40, 10 / 40)


def test_a_chunk_of_another_document_counts_in_the_denominators_only():
    s = retrieval_score([(10, 20)], [(10, 20)], [10, 30])
    assert (s.recall, s.precision, s.iou) == (1.0, 10 / 40, 10 / 40)


def test_evidence_covered_twice_counts_once():
    s = retrieval_score([(10, 20)], [(0, 20), (5, 25)], [20, 20])
    assert s.recall == 1.0 and s.precision == 10 / 40


def test_missed_evidence_is_added_to_the_iou_denominator_per_reference():
    s = retrieval_score([(10, 20), (50, 60)], [(0, 15)], [15])
    assert (s.recall, s.iou) == (5 / 20, 5 / (15 + 5 + 10))


def test_touching_chunks_meet_the_evidence_in_precision_omega():
    # (0, 10) and (20, 30) only touch (10, 20): they count as meeting it, so their text is
    # in the denominator (Chroma's rule); without that PΩ would be 1.
    chunks = [(0, 10), (10, 20), (20, 30), (40, 50)]
    assert precision_omega([(10, 20)], chunks) == 10 / 30


def test_precision_omega_unions_overlapping_chunks_and_adds_uncovered_evidence():
    assert precision_omega([(10, 20)], [(0, 20), (10, 30)]) == 10 / 30
    # evidence (10, 20) and (50, 60); only (0, 15) meets it: 5 found over
    # (0, 15) + (15, 20) + (50, 60) = 30
    assert precision_omega([(10, 20), (50, 60)], [(0, 15), (100, 200)]) == 5 / 30
    assert precision_omega([(10, 20)], [(30, 40)]) == 0.0


def test_touching_retrieved_chunks_find_no_evidence():
    s = retrieval_score([(10, 20)], [(20, 30)], [10])
    assert (s.recall, s.precision, s.iou) == (0.0, 0.0, 0.0)


class FixedOrder:
    """Ranks the texts in a given order for every query: the plumbing of ``score`` alone."""

    name = "fixed"

    def __init__(self, order):
        self.order = order

    def rank(self, texts, queries, k):
        return [self.order[:k] for _ in queries]


def test_score_averages_over_questions_keys_by_document_and_takes_k():
    chunks = [
        EvalChunk("a", 0, 10, "x"),
        EvalChunk("a", 10, 20, "y"),
        EvalChunk("b", 0, 10, "z"),
    ]
    questions = [
        Question("q1", "a", ((0, 10),), (None,)),
        Question("q2", "b", ((0, 10),), (None,)),
    ]
    scores = score(chunks, questions, FixedOrder([0, 2, 1]), k=2)
    # q1: chunk 0 holds it (recall 1), 20 retrieved; q2: chunk 2 holds it, same.
    assert (scores.recall, scores.precision, scores.iou) == (1.0, 0.5, 0.5)
    # PΩ: q1's evidence (0, 10) is touched by (10, 20) too: 10 / 20; q2's is chunk 2 alone.
    assert scores.precision_omega == (0.5 + 1.0) / 2
    assert (scores.chunks, scores.mean_chars, scores.questions, scores.k) == (3, 10, 2, 2)
    one = score(chunks, questions, FixedOrder([0, 2, 1]), k=1)
    assert one.recall == 0.5  # q2's chunk is second: out of the top 1


# ---------------------------------------------------------------------------------------------
# BM25


def test_bm25_ranks_by_rare_words_and_breaks_ties_by_index():
    texts = ["the cat sat", "the dog sat", "the cat and the cat", "nothing here"]
    index = Bm25(texts)
    assert index.top("Cat!", 2) == [2, 0]
    assert index.top("unknown words", 4) == [0, 1, 2, 3]
    assert words("Hello, wörld_2 a") == ["hello", "wörld_2", "a"]


def test_bm25_scores_equal_the_bm25s_package_defaults():
    import bm25s  # a test dependency: the reference implementation

    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(3, 60))) for _ in range(50)]
    reference = bm25s.BM25()  # k1 1.5, b 0.75, Lucene idf
    reference.index([words(t) for t in texts], show_progress=False)
    ours = Bm25(texts)
    for _ in range(20):
        query = rng.choices(vocabulary, k=rng.randint(1, 6))
        expected = reference.get_scores(query)
        assert ours.scores(" ".join(query)) == pytest.approx(list(expected), rel=1e-5)


def test_bm25_retriever_retrieves_the_chunk_with_the_answer():
    chunks = chunks_from_spans(
        {"d": "Paris is the capital of France. Berlin is the capital of Germany."},
        {"d": [(0, 31), (32, 66)]},
    )
    questions = [Question("What is the capital of Germany?", "d", ((32, 66),), (None,))]
    assert score(chunks, questions, Bm25Retriever(), k=1).recall == 1.0


# ---------------------------------------------------------------------------------------------
# Chunk texts to spans


def test_spans_in_finds_overlapping_and_repeated_chunks_in_order():
    text = "abc abc abc"
    assert spans_in(text, ["abc", "abc", "abc"]) == [(0, 3), (4, 7), (8, 11)]
    assert spans_in(text, ["abc abc", "abc abc"]) == [(0, 7), (4, 11)]
    with pytest.raises(ValueError, match="chunk 1 is not in the text from offset 1"):
        spans_in(text, ["abc", "xyz"])


# ---------------------------------------------------------------------------------------------
# Questions


ROWS = [
    {
        "question": "Who?",
        "references": [{"content": "He", "start_index": 0, "end_index": 2}],
        "corpus_id": "notes",
    },
    {
        "question": "Where,\nexactly?",
        "references": [
            {"content": "there", "start_index": 10, "end_index": 15},
            {"start_index": 20, "end_index": 22},
        ],
        "corpus_id": "dir/other",
    },
]


def write_csv(path, rows, fields=("question", "references", "corpus_id")):
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if k == "references" else v for k, v in row.items()})


def test_csv_and_jsonl_read_to_the_same_questions(tmp_path):
    write_csv(tmp_path / "q.csv", ROWS)
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    from_csv = read_questions(tmp_path / "q.csv")
    from_jsonl = read_questions(tmp_path / "q.jsonl")
    assert [(q.question, q.corpus_id, q.evidence, q.contents) for q in from_csv] == [
        ("Who?", "notes", ((0, 2),), ("He",)),
        ("Where,\nexactly?", "dir/other", ((10, 15), (20, 22)), ("there", None)),
    ]
    assert [q.evidence for q in from_jsonl] == [q.evidence for q in from_csv]
    assert [q.line for q in from_csv] == [2, 3]  # the line each row starts on
    assert [q.line for q in from_jsonl] == [1, 2]
    assert from_csv[0].doc == "notes"


def test_a_jsonl_row_may_give_its_references_as_json_text(tmp_path):
    row = {**ROWS[0], "references": json.dumps(ROWS[0]["references"])}
    (tmp_path / "q.jsonl").write_text(json.dumps(row))
    assert read_questions(tmp_path / "q.jsonl")[0].evidence == ((0, 2),)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**ROWS[0], "question": " "}, "line 2: no question"),
        ({**ROWS[0], "corpus_id": ""}, "line 2: no corpus_id"),
        ({**ROWS[0], "references": []}, "line 2: references must be a non-empty list"),
        (
            {**ROWS[0], "references": [{"start_index": "0", "end_index": 2}]},
            "line 2: reference 0 needs integer start_index and end_index",
        ),
        (
            {**ROWS[0], "references": [{"start_index": 5, "end_index": 5}]},
            "line 2: reference 0 range 5..5 is empty or negative",
        ),
        ({**ROWS[0], "references": ["x"]}, "line 2: reference 0 is not an object"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_and_line(tmp_path, row, message):
    write_csv(tmp_path / "q.csv", [row])
    with pytest.raises(QuestionError) as e:
        read_questions(tmp_path / "q.csv")
    assert str(e.value) == f"{tmp_path / 'q.csv'} {message}"


def test_bad_files_are_one_line(tmp_path):
    write_csv(tmp_path / "nocol.csv", [], fields=("question", "corpus_id"))
    (tmp_path / "bad.csv").write_text('question,references,corpus_id\nq,"[{oops",c\n')
    (tmp_path / "bad.jsonl").write_text('{"question": "q"\n')
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "q.txt").write_text("")
    cases = {
        "nocol.csv": "no column 'references' (it needs question, references, corpus_id)",
        "bad.csv": "line 2: references is not JSON",
        "bad.jsonl": "line 1: not JSON",
        "empty.jsonl": "no questions in it",
        "q.txt": "questions must be a .csv or .jsonl file",
        "missing.csv": "cannot read",
    }
    for name, message in cases.items():
        with pytest.raises(QuestionError, match=re.escape(message)) as e:
            read_questions(tmp_path / name)
        assert "\n" not in str(e.value)


def test_contents_are_checked_against_the_documents_text():
    questions = [Question("q", "d", ((0, 2), (3, 5)), ("ab", "de"), line=7)]
    assert check_contents(questions, {"d": "ab de"}) is None
    assert "line 7: reference 1's content differs from characters 3..5 of 'd'" in (
        check_contents(questions, {"d": "ab xy"}) or ""
    )
    assert "reference 1 ends at 5, past the end of 'd' (4 characters)" in (
        check_contents(questions, {"d": "ab d"}) or ""
    )
