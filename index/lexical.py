"""BM25 over chunks, with a tokenizer that keeps identifiers whole.

"ERR_CONN_RESET" and "computeChecksum" are indexed as themselves and as
their parts, so both an exact error code and a word of it find the chunk.
"""

from __future__ import annotations

import functools
import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable

import numpy as np
import Stemmer

_WORD = re.compile(r"[0-9a-zA-Z_]+(?:[.\-][0-9a-zA-Z_]+)*")
_PLAIN = re.compile(r"[0-9a-zA-Z_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STEMMER = Stemmer.Stemmer("english")

# Words that match almost every note (and every conversational turn) and
# would turn any question into noise: English function words and the
# auxiliaries a question is built with ("when did", "what has").
STOPWORDS = frozenset(
    """
    a about after again all also am an and any are as at be been before being
    but by can could did do does doing done for from had has have having he her
    here hers him his how i if in into is it its itself just me more most my no
    nor not of off on once only or other our ours out over own same she should
    so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which
    while who whom why will with would you your yours
    """.split()  # noqa: SIM905 - a paragraph of words reads better than a list
)


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """Snowball's English stem of a plain word ("camping" -> "camp"); identifiers
    with digits or underscores are kept as they are. Cached: a vault's words
    repeat."""
    return _STEMMER.stemWord(word) if word.isalpha() else word


def tokenize(text: str) -> list[str]:
    """Terms for BM25: words lowercased and stemmed, stop words and single
    letters dropped; an identifier ("ERR_CONN_RESET", "computeChecksum",
    "file.py", "de-stress") is kept whole and also split into its parts, so
    both the exact token and a word of it find it."""
    tokens = []
    for whole in _WORD.findall(text):
        pieces = _PLAIN.findall(whole)
        if len(pieces) > 1:
            tokens.append(whole.lower())  # "file.py", "de-stress" as themselves
        for word in pieces:
            lower = word.lower()
            if lower in STOPWORDS or (len(lower) == 1 and not lower.isdigit()):
                continue
            tokens.append(_stem(lower))
            if word.isalpha() and (word.islower() or word.istitle()):
                continue  # a plain word: no parts
            parts = [p.lower() for piece in word.split("_") for p in _CAMEL.findall(piece)]
            if len(parts) > 1:
                tokens += [_stem(p) for p in parts if len(p) > 1 and p not in STOPWORDS]
    return tokens


class BM25:
    """Okapi BM25 with postings kept as packed arrays (array.array: 12 bytes a
    posting, appended in place), so the index of a large vault stays small and
    every query scores with numpy over zero-copy views, with no per-term cache
    to rebuild after a write.

    A removal is O(terms of the document): the document is marked dead (its
    postings stay, masked out of every score, and the live document
    frequencies drop), and dead postings are purged in one pass once they are
    half of all postings. Removing each document from every posting list
    instead costs a scan of each list: quadratic for `rm -rf` of a vault.
    """

    PURGE_MIN = 50_000
    """Dead postings tolerated whatever their share (a purge walks every term)."""

    def __init__(self, k1: float = 1.2, b: float = 0.3) -> None:
        """``b`` 0.3, not the textbook 0.75: memories run from one line to many
        sections, and a short note that names the thing should not lose to a
        long one that also does (measured on the LoCoMo development set:
        turn-level R@10 0.686 with 0.75, 0.702 with 0.3)."""
        self.k1, self.b = k1, b
        self._postings: dict[str, tuple[array, array]] = {}  # term -> (doc ids, tfs)
        self._df: dict[str, int] = {}  # term -> live documents holding it
        self._lengths: dict[int, int] = {}
        self._length_array = np.zeros(1024, np.float32)
        self._alive = np.zeros(1024, bool)
        self._terms: dict[int, tuple[str, ...]] = {}
        self._total = 0
        self._postings_count = 0
        self._dead_postings = 0
        self._dead_ids: set[int] = set()  # removed, with postings still in the lists

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, doc_id: int, text: str) -> None:
        if doc_id in self._lengths:
            self.remove(doc_id)
        if doc_id in self._dead_ids:  # its old postings must not count for the new text
            self._purge()
        counts = Counter(tokenize(text))
        for term, tf in counts.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = (array("q"), array("f"))
            postings[0].append(doc_id)
            postings[1].append(tf)
            self._df[term] = self._df.get(term, 0) + 1
        length = sum(counts.values())
        self._lengths[doc_id] = length
        if doc_id >= len(self._length_array):
            size = max(2 * len(self._length_array), doc_id + 1)
            self._length_array = np.resize(self._length_array, size)
            self._length_array[len(self._alive) :] = 0
            alive = np.zeros(size, bool)
            alive[: len(self._alive)] = self._alive
            self._alive = alive
        self._length_array[doc_id] = length
        self._alive[doc_id] = True
        self._terms[doc_id] = tuple(counts)
        self._total += length
        self._postings_count += len(counts)

    def remove(self, doc_id: int) -> None:
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total -= length
        self._length_array[doc_id] = 0
        self._alive[doc_id] = False
        terms = self._terms.pop(doc_id)
        for term in terms:
            left = self._df[term] - 1
            if left:
                self._df[term] = left
            else:
                del self._df[term]
        self._dead_ids.add(doc_id)
        self._dead_postings += len(terms)
        if self._dead_postings > max(self.PURGE_MIN, self._postings_count // 2):
            self._purge()

    def _purge(self) -> None:
        """Drop every dead posting (one pass over the terms)."""
        for term, (ids, tfs) in list(self._postings.items()):
            id_view = np.frombuffer(ids, np.int64)
            keep = self._alive[id_view]
            if keep.all():
                continue
            if not keep.any():
                del self._postings[term]
                continue
            kept_ids, kept_tfs = array("q"), array("f")
            kept_ids.frombytes(id_view[keep].tobytes())
            kept_tfs.frombytes(np.frombuffer(tfs, np.float32)[keep].tobytes())
            self._postings[term] = (kept_ids, kept_tfs)
        self._postings_count -= self._dead_postings
        self._dead_postings = 0
        self._dead_ids.clear()

    def search(self, query: str, k: int = 10, allowed=None) -> list[tuple[int, float]]:
        """The best ``k`` documents for ``query`` (score > 0 only)."""
        scores = self.scores(query)
        if scores is None:
            return []
        if allowed is not None:
            mask = np.zeros(len(scores), bool)
            mask[[i for i in allowed if i < len(scores)]] = True
            scores[~mask] = 0
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        order = sorted(hits.tolist(), key=lambda i: (-scores[i], i))
        return [(i, float(scores[i])) for i in order]

    def scores(self, query: str) -> np.ndarray | None:
        """Every document's score for ``query``, by document id (None: no documents)."""
        return self.term_scores(set(tokenize(query)))

    def term_scores(self, terms: Iterable[str]) -> np.ndarray | None:
        """Every document's score for terms already tokenized (None: no documents)."""
        n = len(self._lengths)
        if not n:
            return None
        average = self._total / n
        scores = np.zeros(len(self._length_array), np.float32)
        for term in terms:
            postings = self._postings.get(term)
            df = self._df.get(term)
            if postings is None or not df:
                continue
            ids = np.frombuffer(postings[0], np.int64)  # views: nothing is copied
            tfs = np.frombuffer(postings[1], np.float32)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = tfs + self.k1 * (1 - self.b + self.b * self._length_array[ids] / average)
            scores[ids] += idf * tfs * (self.k1 + 1) / norm
        scores *= self._alive  # dead postings score nothing
        return scores
