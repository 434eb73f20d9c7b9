"""Fitting chunks to the embedder (``chunkmill.chunking.fitting``): over-long chunks of the
character-sized strategies are cut to ``max_embed_tokens``, chunks under
``min_chunk_tokens`` are merged into a neighbour where the result fits, and the chunker
contract holds for whatever comes out."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkmill import document, ids
from chunkmill.chunking import Span, chars4, make_chunker
from chunkmill.chunking.context import context_windows
from chunkmill.chunking.fitting import FittedChunker
from chunkmill.chunking.tokens import load_token_counter
from chunkmill.config import Chunking, ChunkingConfig
from chunkmill.extract import extract
from chunkmill.items import WorkItem

from .chunker_contract import SAMPLE_CORPUS, assert_deterministic, check_span_contract, texts

MINILM = load_token_counter("all-minilm-l6-v2")
COUNTERS: dict[str, Callable[[str], int]] = {"chars4": chars4, "all-minilm-l6-v2": MINILM}

# Each strategy with sizes small enough for hypothesis' short texts to make many chunks:
# (strategy, its parameters, the most characters consecutive chunks share).
SMALL_STRATEGIES = [
    ("paragraph", {"max_tokens": 12, "overlap_tokens": 3}, 12),
    ("section", {"max_tokens": 12}, 0),
    ("sentence", {"chunk_size": 40, "chunk_overlap": 12}, 12),
    ("recursive", {"chunk_size": 40, "chunk_overlap": 12}, 12),
    ("paragraph-window", {"max_chars": 40}, 0),
]
FRAGMENTS = st.sampled_from(
    ["# Title\n", "## Sub\n", "### Deeper\n", "word ", "longerword ", ". ", "\n", "\n\n", "x"]
)
TEXTS = texts(FRAGMENTS)


def fitted(strategy: str, params: dict, **limits: int) -> FittedChunker:
    """The chunker a run with this config uses (as the pipeline builds it)."""
    return Chunking(ChunkingConfig.create(strategy, **limits, **params)).chunker_for("markdown")


def within_limits(chunker: FittedChunker) -> Callable[[str], bool]:
    """The strategy's own size limit and the embedding limit, measured as the chunker does."""
    params = chunker.params()
    count = chunker.token_counter

    def fits(chunk: str) -> bool:
        if "max_tokens" in params and count(chunk) > params["max_tokens"]:
            return False
        for chars in ("chunk_size", "max_chars"):
            if chars in params and len(chunk) > params[chars]:
                return False
        return count(chunk) <= params["max_embed_tokens"]

    return fits


def may_join(a: Span, b: Span) -> bool:
    """The documented rule: same section, or ``a`` a whole section (not the preamble) and
    ``b`` the first chunk of one of its subsections."""
    if (a.section_path, a.section_anchor) == (b.section_path, b.section_anchor):
        return True
    return (
        a.section_anchor is not None
        and a.section_chunk_index == 0
        and b.section_chunk_index == 0
        and b.section_path[: len(a.section_path)] == a.section_path
        and len(b.section_path) > len(a.section_path)
    )


def largest_overlap(spans: list[Span]) -> int:
    return max([0, *(a.end - b.start for a, b in pairwise(spans))])


def same_section(a: Span, b: Span) -> bool:
    return (a.section_path, a.section_anchor) == (b.section_path, b.section_anchor)


def check_fitted(
    text: str,
    chunker: FittedChunker,
    spans: list[Span],
    max_overlap: int,
    unmerged: list[Span] | None = None,
) -> None:
    """The span contract within both limits, the merge rule (a chunk left under the minimum
    could join neither neighbour), and the positional metadata renumbered. A merged chunk
    carries the section of its last part, so whether a chunk could join the first part of
    the next one in another section is judged on the ``unmerged`` chunks, when given."""
    fits = within_limits(chunker)
    check_span_contract(text, spans, fits, max_overlap)
    count, minimum = chunker.token_counter, chunker.min_chunk_tokens
    first_parts = {s.start: s for s in unmerged or ()}
    for k, span in enumerate(spans):
        if count(text[span.start : span.end]) >= minimum:
            continue
        if k > 0 and same_section(spans[k - 1], span):
            assert not fits(text[spans[k - 1].start : span.end]), (span, "joins the previous")
        if k + 1 == len(spans):
            continue
        after = spans[k + 1]
        first_part = first_parts.get(after.start)
        if same_section(span, after) or (first_part is not None and may_join(span, first_part)):
            assert not fits(text[span.start : after.end]), (span, "joins the next")
    for k, span in enumerate(spans):
        if span.paragraph_index is not None:
            assert (span.paragraph_index, span.total_paragraphs) == (k, len(spans))
    for prev, cur in pairwise([None, *spans]):
        if cur.section_chunk_index is None:
            continue
        same = prev is not None and (prev.section_path, prev.section_anchor) == (
            cur.section_path,
            cur.section_anchor,
        )
        assert cur.section_chunk_index == (prev.section_chunk_index + 1 if same else 0)


# --- merging --------------------------------------------------------------------------------


@pytest.mark.parametrize(("strategy", "params", "max_overlap"), SMALL_STRATEGIES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, minimum=st.sampled_from([2, 4, 8]))
def test_merged_chunks_keep_the_contract(strategy, params, max_overlap, text, minimum):
    chunker = fitted(strategy, params, min_chunk_tokens=minimum)
    spans = chunker.split(text)
    check_fitted(text, chunker, spans, max_overlap, chunker.chunker.split(text))
    assert_deterministic(chunker, fitted(strategy, params, min_chunk_tokens=minimum), text, spans)


@pytest.mark.parametrize(("strategy", "params", "max_overlap"), SMALL_STRATEGIES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS)
def test_merging_only_joins_neighbours_of_the_unmerged_chunks(strategy, params, max_overlap, text):
    """Each merged chunk spans a run of the strategy's own chunks, from the first one's start
    to the last one's end; a section chunk joins only its own section, or follows a whole
    section of which it is a subsection."""
    # The chunks before merging, as the fitted chunker makes them: the strategy's own, split
    # on the text with its structure kept whole (a list or fence masked) and cut to fit.
    plain = fitted(strategy, params, min_chunk_tokens=0).split(text)
    spans = fitted(strategy, params, min_chunk_tokens=8).split(text)
    starts = {s.start: k for k, s in enumerate(plain)}
    ends = {s.end: k for k, s in enumerate(plain)}
    covered = []
    for span in spans:
        first, last = starts[span.start], ends[span.end]
        covered.extend(range(first, last + 1))
        run = plain[first : last + 1]
        if span.section_path is None:
            continue
        # The chunk keeps the section of the run's last chunk; any chunk of another section
        # before it is a whole section whose path the last one extends.
        assert (span.section_path, span.section_anchor) == (
            run[-1].section_path,
            run[-1].section_anchor,
        )
        for a, b in pairwise(run):
            assert may_join(a, b), (a, b)
    assert covered == list(range(len(plain))), "every chunk lies in exactly one merged chunk"


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("strategy", ["auto", "paragraph", "section", "sentence", "recursive"])
def test_sample_corpus_with_default_minimum(strategy, counter):
    chunking = Chunking(ChunkingConfig.create(strategy, tokenizer=counter))
    unmerged = Chunking(ChunkingConfig.create(strategy, tokenizer=counter, min_chunk_tokens=0))
    before = after = 0
    for path in sorted(SAMPLE_CORPUS.rglob("*")):
        if not path.is_file() or path.name == "broken.pdf":
            continue
        doc = extract(str(path), path.read_bytes())
        chunker = chunking.chunker_for(doc.format, str(path))
        assert chunker.min_chunk_tokens == 16
        spans = chunker.split(doc.text)
        plain = unmerged.chunker_for(doc.format, str(path)).split(doc.text)
        # Merging never makes consecutive chunks share more than the strategy's own did.
        check_fitted(doc.text, chunker, spans, largest_overlap(plain), plain)
        before += len(plain)
        after += len(spans)
    if strategy in ("auto", "section", "recursive"):
        assert after < before, "the corpus has heading-only sections and code tails to merge"


def test_heading_only_sections_join_their_first_subsection():
    text = "# Guide\n\n## Install\n\nRun the installer and wait for it to finish its work.\n"
    spans = fitted("section", {"max_tokens": 512}).split(text)
    assert spans == [
        Span(0, len(text) - 1, ("Guide", "Install"), "install", 0),
    ]


@pytest.mark.parametrize(
    "text",
    [
        # A sibling: its path would not name "# Alpha".
        "# Alpha\n\n# Beta\n\nBeta has a body long enough to stand alone in its chunk here.",
        # The preamble belongs to no heading.
        "intro\n\n# Beta\n\nBeta has a body long enough to stand alone in its chunk here.",
    ],
)
def test_a_small_section_never_joins_a_section_that_is_not_its_subsection(text):
    spans = fitted("section", {"max_tokens": 512}).split(text)
    assert [text[s.start : s.end] for s in spans] == [
        text[: text.index("\n")],
        text[text.index("# Beta") :],
    ]


class FixedChunker:
    """A strategy that returns the spans it is given, with a limit of ``max_tokens``."""

    name = "fixed"

    def __init__(self, spans: list[Span], max_tokens: int) -> None:
        self.spans = spans
        self.max_tokens = max_tokens

    def params(self) -> dict[str, int]:
        return {"max_tokens": self.max_tokens}

    def split(self, text: str) -> list[Span]:
        return self.spans


A, B, SUB, D = (("A",), "a"), (("B",), "b"), (("B", "C"), "c"), (("D",), "d")
# A 40-character chunk, a 3-character one (1 token), 20 characters, 30 characters.
TEXT = "x" * 40 + " yyy " + "z" * 20 + " " + "w" * 30


def sections(*parts: tuple[int, int, tuple[tuple[str, ...], str], int]) -> list[Span]:
    return [Span(start, end, path, anchor, index) for start, end, (path, anchor), index in parts]


@pytest.mark.parametrize(
    ("max_tokens", "spans", "expected"),
    [
        pytest.param(
            11,
            sections((0, 40, A, 0), (41, 44, A, 1), (45, 65, A, 2)),
            sections((0, 44, A, 0), (45, 65, A, 1)),
            id="tail-joins-the-previous-chunk-first",
        ),
        pytest.param(
            10,
            sections((0, 40, A, 0), (41, 44, A, 1), (45, 65, A, 2)),
            sections((0, 40, A, 0), (41, 65, A, 1)),
            id="else-the-next-when-the-previous-is-full",
        ),
        pytest.param(
            11,
            sections((0, 40, A, 0), (41, 44, B, 0), (45, 65, B, 1)),
            sections((0, 40, A, 0), (41, 65, B, 0)),
            id="never-into-the-previous-section",
        ),
        pytest.param(
            11,
            sections((0, 40, A, 0), (41, 44, B, 0), (45, 65, SUB, 0)),
            sections((0, 40, A, 0), (41, 65, SUB, 0)),
            id="a-whole-section-into-its-subsection",
        ),
        pytest.param(
            10,
            sections((0, 40, B, 0), (41, 44, B, 1), (45, 65, SUB, 0)),
            sections((0, 40, B, 0), (41, 44, B, 1), (45, 65, SUB, 0)),
            id="a-section-tail-is-no-whole-section",
        ),
        pytest.param(
            11,
            sections((0, 40, A, 0), (41, 44, B, 0), (45, 65, D, 0)),
            sections((0, 40, A, 0), (41, 44, B, 0), (45, 65, D, 0)),
            id="a-sibling-is-no-subsection",
        ),
        pytest.param(
            5,
            sections((0, 40, A, 0), (41, 44, A, 1), (45, 65, A, 2)),
            sections((0, 40, A, 0), (41, 44, A, 1), (45, 65, A, 2)),
            id="stays-where-nothing-fits",
        ),
        pytest.param(
            11,
            sections((0, 40, A, 0), (41, 44, A, 1), (45, 65, A, 2), (66, 96, A, 3)),
            sections((0, 44, A, 0), (45, 65, A, 1), (66, 96, A, 2)),
            id="renumbered",
        ),
    ],
)
def test_merge_rule(max_tokens, spans, expected):
    chunker = FittedChunker(
        FixedChunker(spans, max_tokens), max_embed_tokens=max_tokens, min_chunk_tokens=2
    )
    assert chunker.split(TEXT) == expected


def test_tiny_chunks_in_a_row_join_one_after_another():
    text = "aaa bbb ccc " + "d" * 30
    spans = [Span(0, 3), Span(4, 7), Span(8, 11), Span(12, 42)]
    chunker = FittedChunker(FixedChunker(spans, 11), max_embed_tokens=11, min_chunk_tokens=2)
    assert chunker.split(text) == [Span(0, 11), Span(12, 42)]


def test_a_tiny_chunk_that_fits_nowhere_stays():
    text = "a" * 40 + "\n\nb\n\n" + "c" * 40
    spans = fitted("paragraph-window", {"max_chars": 40}, min_chunk_tokens=4).split(text)
    assert [(s.start, s.end) for s in spans] == [(0, 40), (42, 43), (45, 85)]


def test_minimum_zero_leaves_the_strategy_alone():
    text = "# A\n\n## B\n\nshort\n\n" + "x " * 300
    for strategy, params, _ in SMALL_STRATEGIES:
        chunker = fitted(strategy, params, min_chunk_tokens=0, max_embed_tokens=10_000)
        assert chunker.split(text) == make_chunker(strategy, **params).split(text)


# --- cutting --------------------------------------------------------------------------------

CHAR_SIZED = [s for s in SMALL_STRATEGIES if s[0] in ("sentence", "recursive", "paragraph-window")]


@pytest.mark.parametrize(("strategy", "params", "max_overlap"), CHAR_SIZED)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, limit=st.integers(1, 12), minimum=st.sampled_from([0, 3]))
def test_chunks_over_the_embedding_limit_are_cut(
    strategy, params, max_overlap, text, limit, minimum
):
    chunker = fitted(
        strategy, params, max_embed_tokens=limit, min_chunk_tokens=min(minimum, limit - 1)
    )
    spans = chunker.split(text)
    check_fitted(text, chunker, spans, max_overlap)


@pytest.mark.parametrize("strategy", ["sentence", "recursive", "paragraph-window"])
@pytest.mark.parametrize("limit", [24, 60])
def test_cut_under_a_real_tokenizer_on_the_sample_corpus(strategy, limit):
    """Character-sized chunks under all-MiniLM-L6-v2, counted exactly: every chunk fits."""
    chunking = Chunking(
        ChunkingConfig.create(strategy, tokenizer="all-minilm-l6-v2", max_embed_tokens=limit)
    )
    cut = 0
    for path in sorted(SAMPLE_CORPUS.glob("code/*")) + sorted(SAMPLE_CORPUS.glob("notes/*")):
        doc = extract(str(path), path.read_bytes())
        chunker = chunking.chunker_for(doc.format, str(path))
        spans = chunker.split(doc.text)
        plain = chunker.chunker.split(doc.text)
        check_fitted(doc.text, chunker, spans, largest_overlap(plain))
        cut += len(spans) > len(plain)
        assert all(MINILM(doc.text[s.start : s.end]) <= limit for s in spans)
    assert cut, "the limit is below some chunks, so they were cut"


def test_a_token_sized_strategy_is_never_cut():
    chunker = fitted("paragraph", {"max_tokens": 50, "overlap_tokens": 0}, min_chunk_tokens=0)
    text = "word " * 400
    assert chunker.split(text) == make_chunker("paragraph", max_tokens=50, overlap_tokens=0).split(
        text
    )


# --- what is embedded -----------------------------------------------------------------------


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize(
    ("strategy", "extra"),
    [
        ("paragraph-window", {}),
        ("section", {"context_prev_chars": 600, "context_next_chars": 400}),
        ("recursive", {"context_prev_chars": 2000, "context_next_chars": 0}),
        ("section", {}),  # no context: the counts the fitting made are the rows' own
        ("recursive", {}),
    ],
)
def test_no_embedded_text_exceeds_the_limit(strategy, extra, counter):
    """Rows as the pipeline writes them: the embedded text (with its context) within the
    chunker's max_embed_tokens, counted exactly, and hashed as embedded."""
    count = COUNTERS[counter]
    chunking = Chunking(ChunkingConfig.create(strategy, tokenizer=counter, **extra))
    trimmed = 0
    for path in sorted(SAMPLE_CORPUS.rglob("*.md"))[:8] + sorted(SAMPLE_CORPUS.rglob("*.txt")):
        data = path.read_bytes()
        item = WorkItem(ids.doc_id(str(path)), str(path), len(data))
        outcome = document.process_document(item, data, chunking)
        limit = chunking.chunker_for(
            outcome.occurrences[0]["doc_format"], str(path)
        ).max_embed_tokens
        for row in outcome.occurrences:
            embedded = (
                row["text_with_context"] if extra or strategy == "paragraph-window" else row["text"]
            )
            assert row["text"] in embedded
            assert row["token_count"] == count(embedded) <= limit
            assert row["chunk_hash"] == ids.chunk_hash(embedded)
        windows = context_windows(
            [r["text"] for r in outcome.occurrences], *chunking.config.context()
        )
        trimmed += sum(
            w.text != r["text_with_context"]
            for w, r in zip(windows, outcome.occurrences, strict=True)
        )
    if extra or (strategy == "paragraph-window" and counter != "chars4"):
        assert trimmed, "some windows were over the limit and were narrowed"
