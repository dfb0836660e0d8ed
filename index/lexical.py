"""BM25 over chunks, with a tokenizer that keeps identifiers whole.

"ERR_CONN_RESET" and "computeChecksum" are indexed as themselves and as
their parts, so both an exact error code and a word of it find the chunk.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

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
    """Okapi BM25. Postings live in dicts (cheap updates); each term's postings
    are turned into numpy arrays when first queried after a change, and
    scoring is vectorised over them."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, dict[int, int]] = defaultdict(dict)
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
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
            self._postings[term][doc_id] = tf
            self._arrays.pop(term, None)
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
            self._arrays.pop(term, None)
            postings = self._postings[term]
            postings.pop(doc_id, None)
            if not postings:
                del self._postings[term]

    def _postings_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        arrays = self._arrays.get(term)
        if arrays is None:
            postings = self._postings.get(term)
            if not postings:
                return None
            ids = np.fromiter(postings.keys(), np.int64, len(postings))
            tfs = np.fromiter(postings.values(), np.float32, len(postings))
            arrays = self._arrays[term] = (ids, tfs)
        return arrays

    def search(self, query: str, k: int = 10, allowed=None) -> list[tuple[int, float]]:
        """The best ``k`` documents for ``query`` (score > 0 only)."""
        n = len(self._lengths)
        if not n:
            return []
        average = self._total / n
        scores = np.zeros(len(self._length_array), np.float32)
        for term in set(tokenize(query)):
            arrays = self._postings_arrays(term)
            if arrays is None:
                continue
            ids, tfs = arrays
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
