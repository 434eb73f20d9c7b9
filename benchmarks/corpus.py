"""A deterministic, synthetic Markdown corpus for benchmarks: no downloads, no third-party text.

Documents look like a documentation site or a wiki: a title, nested headings (levels 1-4),
paragraphs of varied length whose sentences end in ``.``, ``?`` or ``!``, bullet and numbered
lists (some nested), fenced code blocks (with ``#`` comment lines inside, which a naive
Markdown splitter mistakes for headings), pipe tables, block quotes, ``$$`` equations, inline
code, emphasis and links. The words come from a generated vocabulary with a Zipf-like
frequency distribution; a few carry non-ASCII letters, so bytes and characters differ a little.

Sizes are log-normal (median ~5 KB, mean ~8 KB) and clamped to 500 B - 60 KB of UTF-8.

Determinism: document ``i`` depends only on ``(seed, i)`` (string seeds are hashed with
SHA-512 by :class:`random.Random`, independently of ``PYTHONHASHSEED``), so the same seed gives
the same bytes on every machine and Python 3 release, and ``generate(50, s)`` is a prefix of
``generate(5000, s)``. :func:`iter_documents` streams documents for corpora that do not fit in
memory; ``python -m benchmarks.corpus DIR --docs N`` writes them as files (for end-to-end runs
of the pipeline on the same corpus).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import sys
from collections.abc import Iterator

DEFAULT_SEED = 42

MIN_DOC_BYTES = 500
MAX_DOC_BYTES = 60_000
# log-normal sizes: median e^mu = 5 KB; sigma 1.0 puts the mean near 8 KB and ~2% of the
# documents at the 60 KB cap, roughly the spread of a real documentation tree.
_SIZE_MU = math.log(5_000)
_SIZE_SIGMA = 1.0

_VOCABULARY_SIZE = 6_000
# Zipf exponent ~1 is what natural-language word frequencies follow.
_ZIPF_S = 1.05

# Word lists as space-separated strings: a list literal would take one line per syllable.
_ONSETS = (  # noqa: SIM905
    "b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr bl cl fl gl pl sl "
    "ch sh th st sp sk sm sn sw qu"
).split()
_NUCLEI = "a e i o u a e i o ea ou ai io y".split()  # noqa: SIM905
_CODAS = ("", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "rt", "ck", "ng", "x")
# Short function words dominate real text; put them at the head of the frequency ranking.
_FUNCTION_WORDS = (  # noqa: SIM905
    "the of and to a in is that for it as with on be by this are or from at an not "
    "which can when all if its has one more will but each into than then also only"
).split()
_ACCENTED = ("café", "naïve", "façade", "über", "jalapeño", "smörgåsbord", "résumé", "Zürich")

_DIRECTORIES = ("guides", "reference", "api", "tutorials", "blog/2023", "blog/2024", "ops")
_CODE_LANGUAGES = ("python", "bash", "yaml", "sql", "json", "javascript")
_BLOCK_KINDS = ("paragraph", "bullets", "numbered", "code", "table", "quote", "equation")
_BLOCK_WEIGHTS = (58, 11, 6, 11, 6, 4, 2)
_SENTENCE_ENDS = (".", "?", "!")
_SENTENCE_END_WEIGHTS = (86, 9, 5)
_MATH = (r"\sum_{i=1}^{n}", r"\frac{a}{b}", r"\alpha", r"\beta^2", r"\int_0^1", r"\log x", "x_i")


class _Vocabulary:
    """Generated words with Zipf-like weights; one per corpus seed."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"chunkmill-bench-vocabulary:{seed}")
        seen = set(_FUNCTION_WORDS)
        words = list(_FUNCTION_WORDS)
        while len(words) < _VOCABULARY_SIZE:
            syllables = rng.choices((1, 2, 3, 4), weights=(55, 30, 12, 3))[0]
            word = "".join(
                rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS)
                for _ in range(syllables)
            )
            if word not in seen:
                seen.add(word)
                words.append(word)
        # Sprinkle the non-ASCII words over the mid-frequency ranks.
        for k, word in enumerate(_ACCENTED):
            words[200 + 97 * k] = word
        self.words = words
        self.cum_weights = list(
            itertools.accumulate(1.0 / (rank + 2.7) ** _ZIPF_S for rank in range(len(words)))
        )

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum_weights, k=k)


class _DocumentWriter:
    """Builds one document block by block; ``style`` choices are made once per document."""

    def __init__(self, rng: random.Random, vocab: _Vocabulary) -> None:
        self.rng = rng
        self.vocab = vocab
        self.bullet = rng.choice("-*")
        self.wrap = 80 if rng.random() < 0.3 else 0  # some authors hard-wrap prose
        self.blocks: list[str] = []
        self.size = 0

    # -- inline text -------------------------------------------------------------------------

    def words(self, k: int) -> list[str]:
        return self.vocab.sample(self.rng, k)

    def phrase(self, lo: int, hi: int) -> str:
        return " ".join(self.words(self.rng.randint(lo, hi)))

    def identifier(self) -> str:
        return "_".join(w for w in self.words(self.rng.randint(1, 3)) if w.isascii()) or "value"

    def sentence(self) -> str:
        rng = self.rng
        words = self.words(max(3, int(rng.lognormvariate(2.5, 0.5))))  # median ~12 words
        n = len(words)
        # A few decorations per sentence, at random positions.
        if rng.random() < 0.35:
            words[rng.randrange(n)] += ","
        if rng.random() < 0.12:
            words[rng.randrange(n)] = f"`{self.identifier()}`"
        if rng.random() < 0.06:
            i = rng.randrange(n)
            words[i] = f"**{words[i]}**" if rng.random() < 0.5 else f"*{words[i]}*"
        if rng.random() < 0.06:
            path = "/".join(self.words(rng.randint(1, 3)))
            words[rng.randrange(n)] = f"[{self.phrase(1, 4)}](https://example.com/{path})"
        if rng.random() < 0.07:
            words[rng.randrange(n)] = str(rng.choice((rng.randint(2, 99), rng.randint(100, 9999))))
        if rng.random() < 0.03:
            words.insert(rng.randrange(n), rng.choice(("e.g.", "i.e.", "etc.", "vs.", "Fig. 3")))
        words[0] = words[0][:1].upper() + words[0][1:]
        end = rng.choices(_SENTENCE_ENDS, weights=_SENTENCE_END_WEIGHTS)[0]
        return " ".join(words) + end

    def flow(self, text: str, indent: str = "") -> str:
        """Hard-wrap ``text`` at ``self.wrap`` columns when this document's author does."""
        if not self.wrap or len(text) <= self.wrap:
            return indent + text
        lines, line = [], indent
        for word in text.split(" "):
            if len(line) + len(word) + 1 > self.wrap and line.strip():
                lines.append(line)
                line = indent + word
            else:
                line = f"{line} {word}" if line.strip() else line + word
        lines.append(line)
        return "\n".join(lines)

    # -- blocks ------------------------------------------------------------------------------

    def add(self, block: str) -> None:
        self.blocks.append(block)
        self.size += len(block.encode("utf-8")) + 2

    def heading(self, level: int) -> None:
        title = self.phrase(1, 6)
        self.add("#" * level + " " + title[:1].upper() + title[1:])

    def paragraph(self) -> None:
        rng = self.rng
        # Mostly 1-6 sentences; 1% are walls of text longer than any chunk budget here.
        n = rng.randint(25, 45) if rng.random() < 0.01 else rng.choice((1, 2, 2, 3, 3, 4, 5, 6))
        self.add(self.flow(" ".join(self.sentence() for _ in range(n))))

    def bullets(self, numbered: bool = False) -> None:
        rng = self.rng
        lines = []
        for i in range(rng.randint(2, 8)):
            marker = f"{i + 1}." if numbered else self.bullet
            text = self.sentence() if rng.random() < 0.7 else self.phrase(2, 7)
            lines.append(f"{marker} {text}")
            if rng.random() < 0.15:  # a nested item
                lines.extend(
                    f"   {self.bullet} {self.phrase(2, 9)}" for _ in range(rng.randint(1, 3))
                )
        if rng.random() < 0.3:
            self.add(self.sentence()[:-1] + ":")  # the usual lead-in line
        self.add("\n".join(lines))

    def code(self) -> None:
        rng = self.rng
        language = rng.choice(_CODE_LANGUAGES)
        lines = [f"```{language}"]
        comment = "--" if language == "sql" else "//" if language == "javascript" else "#"
        for _ in range(max(1, int(rng.lognormvariate(2.0, 0.8)))):  # median ~7 statements
            roll = rng.random()
            if roll < 0.25 and language != "json":
                lines.append(f"{comment} {self.sentence()}")
            elif roll < 0.32:
                lines.append("")  # a blank line inside the fence
            elif language == "python":
                name, arg = self.identifier(), self.identifier()
                lines.append(
                    rng.choice(
                        (
                            f"def {name}({arg}, limit={rng.randint(1, 512)}):",
                            f"    {name} = {arg}.get('{self.identifier()}', None)",
                            f"    return [x for x in {arg} if x]",
                            f"{name} = {self.identifier()}({arg})",
                        )
                    )
                )
            elif language == "bash":
                lines.append(f"{self.identifier()} --{self.identifier()} {self.identifier()}.md")
            elif language == "yaml":
                lines.append(f"{'  ' * rng.randint(0, 2)}{self.identifier()}: {self.phrase(1, 3)}")
            elif language == "sql":
                lines.append(f"SELECT {self.identifier()} FROM {self.identifier()} WHERE id = 7;")
            elif language == "json":
                lines.append(f'  "{self.identifier()}": "{self.phrase(1, 3)}",')
            else:
                lines.append(f"const {self.identifier()} = await {self.identifier()}(42);")
        lines.append("```")
        self.add("\n".join(lines))

    def table(self) -> None:
        rng = self.rng
        columns = rng.randint(2, 6)
        header = [self.phrase(1, 2) for _ in range(columns)]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * columns]
        for _ in range(rng.randint(2, 15)):
            cells = [
                str(rng.randint(0, 10_000)) if rng.random() < 0.3 else self.phrase(1, 4)
                for _ in range(columns)
            ]
            lines.append("| " + " | ".join(cells) + " |")
        self.add("\n".join(lines))

    def quote(self) -> None:
        text = " ".join(self.sentence() for _ in range(self.rng.randint(1, 3)))
        self.add("> " + text)

    def equation(self) -> None:
        terms = " + ".join(self.rng.choices(_MATH, k=self.rng.randint(2, 5)))
        self.add(f"$$\n{terms} = {self.rng.randint(0, 99)}\n$$")

    def block(self) -> None:
        kind = self.rng.choices(_BLOCK_KINDS, weights=_BLOCK_WEIGHTS)[0]
        if kind == "bullets":
            self.bullets()
        elif kind == "numbered":
            self.bullets(numbered=True)
        else:
            getattr(self, kind)()

    # -- the document ------------------------------------------------------------------------

    def document(self, target: int) -> str:
        rng = self.rng
        has_headings = rng.random() >= 0.05  # a few plain notes without any heading
        if has_headings:
            self.heading(1)
        self.paragraph()
        depth = 1
        while self.size < target:
            if has_headings and rng.random() < 0.18:
                # Go one level deeper (up to 4), stay, or climb back; rarely a second title.
                level = rng.choices(
                    (min(depth + 1, 4), depth, max(depth - 1, 2), 2, 1), weights=(40, 25, 15, 18, 2)
                )[0]
                depth = max(level, 1)
                self.heading(level)
                self.paragraph()
            else:
                self.block()
        return self._clamped()

    def _clamped(self) -> str:
        # Drop trailing blocks past the cap (keeping at least one), then hard-cut a single
        # oversized block at the cap on a character boundary.
        while self.size > MAX_DOC_BYTES and len(self.blocks) > 1:
            self.size -= len(self.blocks.pop().encode("utf-8")) + 2
        text = "\n\n".join(self.blocks) + "\n"
        data = text.encode("utf-8")
        if len(data) > MAX_DOC_BYTES:
            text = data[: MAX_DOC_BYTES - 1].decode("utf-8", "ignore") + "\n"
        return text


def _document_size(rng: random.Random) -> int:
    size = int(rng.lognormvariate(_SIZE_MU, _SIZE_SIGMA))
    return min(max(size, MIN_DOC_BYTES), MAX_DOC_BYTES)


def iter_documents(
    n_docs: int | None = None, seed: int = DEFAULT_SEED
) -> Iterator[tuple[str, str]]:
    """Yield ``(name, text)`` for documents ``0 .. n_docs-1`` (forever if ``n_docs`` is None).

    ``name`` is a relative path ending in ``.md``, unique within the corpus.
    """
    vocab = _Vocabulary(seed)
    indices = itertools.count() if n_docs is None else range(n_docs)
    for i in indices:
        rng = random.Random(f"chunkmill-bench-document:{seed}:{i}")
        directory = rng.choice(_DIRECTORIES)
        slug = "-".join(w for w in vocab.sample(rng, 2) if w.isascii()) or "page"
        text = _DocumentWriter(rng, vocab).document(_document_size(rng))
        yield f"{directory}/{slug}-{i:06d}.md", text


def generate(n_docs: int, seed: int = DEFAULT_SEED) -> list[tuple[str, str]]:
    """The first ``n_docs`` documents of the corpus for ``seed``, as ``(name, text)``."""
    return list(iter_documents(n_docs, seed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.corpus", description="Write the benchmark corpus as files."
    )
    parser.add_argument("out_dir", help="directory to write the .md files into")
    parser.add_argument("--docs", type=int, default=3_000, help="number of documents")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    total = 0
    for name, text in iter_documents(args.docs, args.seed):
        path = os.path.join(args.out_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            total += f.write(text)
    print(f"wrote {args.docs} documents ({total:,} characters) under {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
