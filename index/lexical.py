"""BM25 over chunks, with a tokenizer that keeps identifiers whole.

"ERR_CONN_RESET" and "computeChecksum" are indexed as themselves and as
their parts, so both an exact error code and a word of it find the chunk.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

_WORD = re.compile(r"[0-9a-zA-Z_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


# Words that match almost every note and would turn any question into noise.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def tokenize(text: str) -> list[str]:
    tokens = []
    for word in _WORD.findall(text):
        lower = word.lower()
        if lower in STOPWORDS:
            continue
        tokens.append(lower)
        parts = [p.lower() for piece in word.split("_") for p in _CAMEL.findall(piece)]
        if len(parts) > 1:
            tokens += parts
    return tokens


class BM25:
    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, dict[int, int]] = defaultdict(dict)
        self._lengths: dict[int, int] = {}
        self._terms: dict[int, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, doc_id: int, text: str) -> None:
        if doc_id in self._lengths:
            self.remove(doc_id)
        counts = Counter(tokenize(text))
        for term, tf in counts.items():
            self._postings[term][doc_id] = tf
        length = sum(counts.values())
        self._lengths[doc_id] = length
        self._terms[doc_id] = tuple(counts)
        self._total += length

    def remove(self, doc_id: int) -> None:
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total -= length
        for term in self._terms.pop(doc_id):
            postings = self._postings[term]
            postings.pop(doc_id, None)
            if not postings:
                del self._postings[term]

    def search(self, query: str, k: int = 10, allowed=None) -> list[tuple[int, float]]:
        """The best ``k`` documents for ``query`` (score > 0 only)."""
        n = len(self._lengths)
        if not n:
            return []
        average = self._total / n
        scores: dict[int, float] = defaultdict(float)
        for term in set(tokenize(query)):
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for doc_id, tf in postings.items():
                if allowed is not None and doc_id not in allowed:
                    continue
                norm = tf + self.k1 * (1 - self.b + self.b * self._lengths[doc_id] / average)
                scores[doc_id] += idf * tf * (self.k1 + 1) / norm
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
