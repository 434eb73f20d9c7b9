"""BM25 over lowercase words, with the defaults of the bm25s package: k1 = 1.5, b = 0.75,
Lucene's idf ``log(1 + (N - df + 0.5) / (df + 0.5))`` and its term weight
``tf / (tf + k1 * (1 - b + b * length / mean length))``. A word repeated in a query counts
once per repetition; a word no chunk has counts nothing."""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Sequence

WORD = re.compile(r"\w+")
K1 = 1.5
B = 0.75


def words(text: str) -> list[str]:
    """The lowercase ``\\w+`` words of ``text``."""
    return WORD.findall(text.lower())


class Bm25:
    """An index of texts; ``top`` ranks them for a query."""

    def __init__(self, texts: Sequence[str], k1: float = K1, b: float = B) -> None:
        counts = [Counter(words(t)) for t in texts]
        lengths = [sum(c.values()) for c in counts]
        mean_length = (sum(lengths) / len(lengths)) if lengths else 0.0
        df = Counter(w for c in counts for w in c)
        n = len(texts)
        # word -> [(text index, score)], the score of the word in each text that has it
        self._postings: dict[str, list[tuple[int, float]]] = {}
        for i, (c, size) in enumerate(zip(counts, lengths, strict=True)):
            norm = k1 * (1 - b + b * size / mean_length) if mean_length else k1
            for word, tf in c.items():
                idf = math.log(1 + (n - df[word] + 0.5) / (df[word] + 0.5))
                self._postings.setdefault(word, []).append((i, idf * tf / (tf + norm)))
        self.size = n

    def scores(self, query: str) -> list[float]:
        total = [0.0] * self.size
        for word in words(query):
            for i, score in self._postings.get(word, ()):
                total[i] += score
        return total

    def top(self, query: str, k: int) -> list[int]:
        """The indices of the ``k`` best texts for ``query``, best first (ties: first
        indexed first)."""
        scores = self.scores(query)
        return heapq.nsmallest(k, range(self.size), key=lambda i: (-scores[i], i))
