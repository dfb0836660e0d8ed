"""BM25 over chunks, with a tokenizer that keeps identifiers whole.

"ERR_CONN_RESET" and "computeChecksum" are indexed as themselves and as
their parts, so both an exact error code and a word of it find the chunk.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter

import numpy as np

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
    """Okapi BM25 with postings kept as packed arrays (array.array: 12 bytes a
    posting, appended in place, removed by swapping with the last), so the
    index of a large vault stays small and every query scores with numpy over
    zero-copy views, with no per-term cache to rebuild after a write."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, tuple[array, array]] = {}  # term -> (doc ids, tfs)
        self._lengths: dict[int, int] = {}
        self._length_array = np.zeros(1024, np.float32)
        self._terms: dict[int, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, doc_id: int, text: str) -> None:
        if doc_id in self._lengths:
            self.remove(doc_id)
        counts = Counter(tokenize(text))
        for term, tf in counts.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = (array("q"), array("f"))
            postings[0].append(doc_id)
            postings[1].append(tf)
        length = sum(counts.values())
        self._lengths[doc_id] = length
        if doc_id >= len(self._length_array):
            grown = np.zeros(max(2 * len(self._length_array), doc_id + 1), np.float32)
            grown[: len(self._length_array)] = self._length_array
            self._length_array = grown
        self._length_array[doc_id] = length
        self._terms[doc_id] = tuple(counts)
        self._total += length

    def remove(self, doc_id: int) -> None:
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total -= length
        self._length_array[doc_id] = 0
        for term in self._terms.pop(doc_id):
            ids, tfs = self._postings[term]
            at = ids.index(doc_id)
            ids[at], tfs[at] = ids[-1], tfs[-1]  # fill the hole with the last posting
            ids.pop()
            tfs.pop()
            if not ids:
                del self._postings[term]

    def search(self, query: str, k: int = 10, allowed=None) -> list[tuple[int, float]]:
        """The best ``k`` documents for ``query`` (score > 0 only)."""
        n = len(self._lengths)
        if not n:
            return []
        average = self._total / n
        scores = np.zeros(len(self._length_array), np.float32)
        for term in set(tokenize(query)):
            postings = self._postings.get(term)
            if postings is None:
                continue
            ids = np.frombuffer(postings[0], np.int64)  # views: nothing is copied
            tfs = np.frombuffer(postings[1], np.float32)
            idf = math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
            norm = tfs + self.k1 * (1 - self.b + self.b * self._length_array[ids] / average)
            scores[ids] += idf * tfs * (self.k1 + 1) / norm
        if allowed is not None:
            mask = np.zeros(len(scores), bool)
            mask[[i for i in allowed if i < len(scores)]] = True
            scores[~mask] = 0
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        order = sorted(hits.tolist(), key=lambda i: (-scores[i], i))
        return [(i, float(scores[i])) for i in order]
