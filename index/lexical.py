"""BM25 over chunks, with a tokenizer that keeps identifiers whole.

"ERR_CONN_RESET" and "computeChecksum" are indexed as themselves and as
their parts, so both an exact error code and a word of it find the chunk.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from array import array
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Iterator

import numpy as np
import Stemmer

from .packing import pack, unpack

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


def _stem(word: str) -> str:
    """Snowball's English stem of a plain word ("camping" -> "camp"); identifiers
    with digits or underscores are kept as they are."""
    return _STEMMER.stemWord(word) if word.isalpha() else word


def tokenize(text: str) -> list[str]:
    """Terms for BM25: words lowercased and stemmed, stop words and single
    letters dropped; an identifier ("ERR_CONN_RESET", "computeChecksum",
    "file.py", "de-stress") is kept whole and also split into its parts, so
    both the exact token and a word of it find it."""
    return [term for whole in _WORD.findall(text) for term in _terms_of(whole)]


@functools.lru_cache(maxsize=1 << 16)
def _terms_of(whole: str) -> tuple[str, ...]:
    """The terms of one word or identifier as it is written. Cached: a vault's
    words repeat, and a snippet tokenizes the sentences of every result."""
    if whole.isalpha() and (whole.islower() or whole.istitle()):  # most of prose
        lower = whole.lower()
        return (_stem(lower),) if len(lower) > 1 and lower not in STOPWORDS else ()
    tokens = []
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
    return tuple(tokens)


class BM25:
    """Okapi BM25 with postings kept as packed arrays (array.array: 8 bytes a
    posting, appended in place), so the index of a large vault stays small and
    every query scores with numpy over zero-copy views, with no per-term cache
    to rebuild after a write. Terms are numbered: a document keeps its term
    numbers and counts (for removal, and for the words a feedback pass adds).

    A removal is O(terms of the document): the document is marked dead (its
    postings stay, masked out of every score, and the live document
    frequencies drop), and dead postings are purged in one pass once they are
    half of all postings. Removing each document from every posting list
    instead costs a scan of each list: quadratic for `rm -rf` of a vault.

    Document ids are below 2**31 (posting lists hold int32).
    """

    PURGE_MIN = 50_000
    """Dead postings tolerated whatever their share (a purge walks every term)."""
    DENSE_MIN = 4096
    """A term in this many documents is scored from a dense row of its weights,
    kept until the index changes: adding a row costs 1/40 of scattering the
    postings (a feedback pass meets terms in most documents)."""
    DENSE_BYTES = 8 << 20

    def __init__(self, k1: float = 1.2, b: float = 0.3) -> None:
        """``b`` 0.3, not the textbook 0.75: memories run from one line to many
        sections, and a short note that names the thing should not lose to a
        long one that also does (measured on the LoCoMo development set:
        turn-level R@10 0.686 with 0.75, 0.702 with 0.3)."""
        self.k1, self.b = k1, b
        self._term_ids: dict[str, int] = {}
        self._words: list[str] = []  # term id -> term
        self._postings: dict[int, tuple[array, array]] = {}  # term id -> (doc ids, tfs)
        self._df = np.zeros(1024, np.int32)  # term id -> live documents holding it
        self._docs: dict[int, array] = {}  # doc id -> its term ids, then their counts
        self._length_array = np.zeros(1024, np.float32)
        self._alive = np.zeros(1024, bool)
        self._total = 0
        self._postings_count = 0
        self._dead_postings = 0
        self._dead_ids: set[int] = set()  # removed, with postings still in the lists
        self._unsorted: set[int] = set()  # terms whose postings are not by document id
        self._dense: OrderedDict[int, np.ndarray] = OrderedDict()  # term id -> idf * weights
        self._norms: np.ndarray | None = None  # every document's length normalisation

    def __len__(self) -> int:
        return len(self._docs)

    def _term_id(self, term: str) -> int:
        term_id = self._term_ids.get(term)
        if term_id is None:
            term_id = self._term_ids[term] = len(self._words)
            self._words.append(term)
            if term_id >= len(self._df):
                self._df = np.concatenate([self._df, np.zeros(len(self._df), np.int32)])
        return term_id

    def add(self, doc_id: int, text: str) -> None:
        if doc_id in self._docs:
            self.remove(doc_id)
        if doc_id in self._dead_ids:  # its old postings must not count for the new text
            self._purge()
        counts = Counter(tokenize(text))
        self._forget_weights()
        terms = array("i", (self._term_id(term) for term in counts))
        for term_id, tf in zip(terms, counts.values(), strict=True):
            postings = self._postings.get(term_id)
            if postings is None:
                postings = self._postings[term_id] = (array("i"), array("f"))
            elif postings[0][-1] > doc_id:
                self._unsorted.add(term_id)
            postings[0].append(doc_id)
            postings[1].append(tf)
        self._df[np.frombuffer(terms, np.int32)] += 1
        self._docs[doc_id] = terms + array("i", counts.values())
        self._mark_alive(doc_id, sum(counts.values()))
        self._postings_count += len(counts)

    def _forget_weights(self) -> None:
        """A document came or went: every weight depends on the lengths and counts."""
        self._dense.clear()
        self._norms = None

    def _mark_alive(self, doc_id: int, length: int) -> None:
        if doc_id >= len(self._length_array):
            # Every query passes over these arrays: grown by a quarter, not doubled.
            size = max(len(self._length_array) * 5 // 4, doc_id + 1)
            lengths = np.zeros(size, np.float32)
            lengths[: len(self._length_array)] = self._length_array
            alive = np.zeros(size, bool)
            alive[: len(self._alive)] = self._alive
            self._length_array, self._alive = lengths, alive
        self._length_array[doc_id] = length
        self._alive[doc_id] = True
        self._total += length

    def remove(self, doc_id: int) -> None:
        entry = self._docs.pop(doc_id, None)
        if entry is None:
            return
        self._forget_weights()
        self._total -= int(self._length_array[doc_id])
        self._length_array[doc_id] = 0
        self._alive[doc_id] = False
        terms = np.frombuffer(entry, np.int32)[: len(entry) // 2]
        self._df[terms] -= 1
        self._dead_ids.add(doc_id)
        self._dead_postings += len(terms)
        if self._dead_postings > max(self.PURGE_MIN, self._postings_count // 2):
            self._purge()

    def _purge(self) -> None:
        """Drop every dead posting (one pass over the terms)."""
        for term_id, (ids, tfs) in list(self._postings.items()):
            id_view = np.frombuffer(ids, np.int32)
            keep = self._alive[id_view]
            if keep.all():
                continue
            if not keep.any():
                del self._postings[term_id]
                continue
            kept_ids, kept_tfs = array("i"), array("f")
            kept_ids.frombytes(id_view[keep].tobytes())
            kept_tfs.frombytes(np.frombuffer(tfs, np.float32)[keep].tobytes())
            self._postings[term_id] = (kept_ids, kept_tfs)
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
        if not self._docs:
            return None
        scores = np.zeros(len(self._length_array), np.float32)
        for term_id, idf in self._weighed(terms):
            row = self._dense.get(term_id)
            if row is None:
                ids_buffer, tfs_buffer = self._postings[term_id]
                ids = np.frombuffer(ids_buffer, np.int32)  # views: nothing is copied
                tfs = np.frombuffer(tfs_buffer, np.float32)
                weights = (idf * (self.k1 + 1)) * tfs / (tfs + self._norms[ids])
                if len(ids) < self.DENSE_MIN:
                    scores[ids] += weights
                    continue
                row = self._dense_row(term_id, ids, weights)
            scores += row
        scores *= self._alive  # dead postings score nothing
        return scores

    def term_scores_among(self, terms: Iterable[str], doc_ids: np.ndarray) -> np.ndarray:
        """The scores of ``doc_ids`` (sorted, unique) only, aligned with them, for
        terms already tokenized: a binary search of each term's postings for
        them, not a pass over the postings or a row for every document."""
        scores = np.zeros(len(doc_ids), np.float32)
        if not self._docs or not len(doc_ids):
            return scores
        for term_id, idf in self._weighed(terms):
            ids, tfs = self._sorted_postings(term_id)
            at = np.minimum(np.searchsorted(ids, doc_ids), len(ids) - 1)
            found = np.flatnonzero(ids[at] == doc_ids)
            tf = tfs[at[found]]
            scores[found] += (idf * (self.k1 + 1)) * tf / (tf + self._norms[doc_ids[found]])
        return scores * self._alive[doc_ids]

    def _weighed(self, terms: Iterable[str]) -> Iterator[tuple[int, float]]:
        """(term id, idf) of the terms some live document holds; the documents'
        length normalisation made ready for them (index not empty)."""
        n = len(self._docs)
        if self._norms is None:
            self._norms = self.k1 * (1 - self.b + (self.b / (self._total / n)) * self._length_array)
        for term in terms:
            term_id = self._term_ids.get(term)
            if term_id is not None and self._df[term_id]:
                df = int(self._df[term_id])
                yield term_id, math.log(1 + (n - df + 0.5) / (df + 0.5))

    def _sorted_postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """A term's postings (views), ordered by document id first if they were not."""
        ids_buffer, tfs_buffer = self._postings[term_id]
        ids = np.frombuffer(ids_buffer, np.int32)
        tfs = np.frombuffer(tfs_buffer, np.float32)
        if term_id in self._unsorted:
            order = np.argsort(ids, kind="stable")
            ids, tfs = ids[order], tfs[order]
            self._postings[term_id] = (array("i", ids.tobytes()), array("f", tfs.tobytes()))
            self._unsorted.discard(term_id)
        return ids, tfs

    def _dense_row(self, term_id: int, ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """A common term's weights (idf included) for every document, kept (the
        least recently made go first) until the index changes."""
        row = np.zeros(len(self._length_array), np.float32)
        row[ids] = weights
        self._dense[term_id] = row
        while len(self._dense) * row.nbytes > self.DENSE_BYTES:
            self._dense.popitem(last=False)
        return row

    def frequent_terms(self, doc_ids: Iterable[int], n: int, leave_out: set[str]) -> list[str]:
        """The ``n`` terms most frequent in ``doc_ids`` together, ``leave_out``
        left out (ties: the first seen)."""
        counts: Counter[int] = Counter()
        for doc_id in doc_ids:
            entry = self._docs.get(doc_id)
            if entry is not None:
                half = len(entry) // 2
                for term_id, tf in zip(entry[:half], entry[half:], strict=True):
                    counts[term_id] += tf
        words = (self._words[term_id] for term_id, _ in counts.most_common())
        return list(itertools.islice((w for w in words if w not in leave_out), n))

    # -- stored with the vault (sealed there by the owner) -------------------------

    def to_bytes(self, keep: Collection[int] | None = None) -> bytes:
        """The live documents (those in ``keep`` only, if given), with only the
        terms they hold: a removed document's words are not in it."""
        doc_ids = [d for d in self._docs if keep is None or d in keep]
        entries = [np.frombuffer(self._docs[d], np.int32) for d in doc_ids]
        sizes = np.array([len(e) // 2 for e in entries], np.int32)
        data = np.concatenate(entries) if entries else np.zeros(0, np.int32)
        owner, is_term, _ = _layout(sizes)
        used = np.unique(data[is_term])
        renumber = np.full(len(self._words), -1, np.int32)
        renumber[used] = np.arange(len(used), dtype=np.int32)
        data = data.copy()
        data[is_term] = renumber[data[is_term]]
        words = "\n".join(self._words[t] for t in used.tolist()).encode()
        return pack(words, np.array(doc_ids, np.int32), sizes, data)

    @classmethod
    def from_bytes(cls, data: bytes, **kwargs) -> BM25:
        """An index from ``to_bytes``; raises ValueError if ``data`` is not one."""
        words_blob, doc_ids, doc_sizes, doc_data = unpack(data, 4)
        doc_ids, doc_sizes, doc_data = (a.view(np.int32) for a in (doc_ids, doc_sizes, doc_data))
        words = bytes(words_blob).decode().split("\n") if len(words_blob) else []
        if len(doc_ids) != len(doc_sizes) or (doc_sizes < 0).any():
            raise ValueError("inconsistent index")
        if 2 * doc_sizes.astype(np.int64).sum() != len(doc_data):
            raise ValueError("inconsistent index")
        owner, is_term, ends = _layout(doc_sizes)
        starts = ends - 2 * doc_sizes.astype(np.int64)
        terms, tfs = doc_data[is_term], doc_data[~is_term]
        if len(terms) and (terms.min() < 0 or terms.max() >= len(words)):
            raise ValueError("a term out of range")
        if len(doc_ids) and doc_ids.min() < 0:
            raise ValueError("a document id out of range")
        index = cls(**kwargs)
        index._words = words
        index._term_ids = {w: i for i, w in enumerate(words)}
        index._df = np.bincount(terms, minlength=max(1024, len(words))).astype(np.int32)
        raw = doc_data.tobytes()
        for doc_id, start, end in zip(
            doc_ids.tolist(), starts.tolist(), ends.tolist(), strict=True
        ):
            index._docs[doc_id] = array("i", raw[4 * start : 4 * end])
        if len(index._docs) != len(doc_ids):
            raise ValueError("a document twice")
        size = max(1024, int(doc_ids.max()) + 1 if len(doc_ids) else 0)
        lengths = np.bincount(owner[is_term], weights=tfs, minlength=len(doc_ids))
        index._length_array = np.zeros(size, np.float32)
        index._length_array[doc_ids] = lengths
        index._alive = np.zeros(size, bool)
        index._alive[doc_ids] = True
        index._total = int(lengths.sum())
        posting_docs = doc_ids[owner[is_term]]
        order = np.lexsort((posting_docs, terms))  # by term, then by document
        bounds = np.flatnonzero(np.diff(terms[order])) + 1
        for group in np.split(order, bounds) if len(order) else []:
            index._postings[int(terms[group[0]])] = (
                array("i", posting_docs[group].tobytes()),
                array("f", tfs[group].astype(np.float32).tobytes()),
            )
        index._postings_count = len(terms)
        return index


def _layout(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents stored end to end, each as its ``size`` term ids then as many
    counts: the document of each position, whether it holds a term id, and
    where each document ends."""
    spans = sizes.astype(np.int64) * 2
    ends = np.cumsum(spans)
    owner = np.repeat(np.arange(len(sizes), dtype=np.int32), spans)
    halves = np.repeat(sizes.astype(np.int64), 2)  # each document: terms, then counts
    is_term = np.repeat(np.tile(np.array([True, False]), len(sizes)), halves)
    return owner, is_term, ends
