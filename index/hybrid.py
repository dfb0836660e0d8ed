"""Hybrid search over chunks: BM25 and embeddings, fused by normalised scores.

A chunk enters the lexical index as soon as its memory is written (a memory
closed before a search is always found by its words); its vector follows
when the embedder gets to it (``pending`` lists what is not embedded yet).

The candidates are the best FETCH of each signal; every candidate then gets
both scores (its BM25 score, its cosine), each scaled to [0, 1] against the
best candidate's, and they are mixed with weight ALPHA for the words. So a
chunk that only one signal finds, but finds clearly best, can still come
first (reciprocal rank fusion let anything found by both lists beat it).
Only candidates with some real evidence count: a BM25 match, or a cosine
above MIN_COSINE; a query with nothing relevant returns nothing, not the
least bad noise. Results are files: the best chunk of each record first,
the other chunks of the same record that matched with it.

The index keeps no text: a chunk is its place in the record (lines,
heading, title), the owner reads its words from the record when it shows
a hit. ``export`` and ``restore`` store and load everything but the
vectors, which the owner keeps per record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import numpy as np

from .chunking import Chunk, chunk_markdown
from .lexical import BM25, tokenize
from .packing import pack, unpack
from .vectors import HNSW_THRESHOLD, GraphBuild, VectorIndex

MIN_COSINE = 0.2
STRONG_COSINE = 0.4
"""Cosines are scaled against the best candidate's, but never against less than
this: when nothing is close in meaning, the least far is not worth full
marks (a best cosine of 0.22 would otherwise outweigh three query words)."""
LENGTH_STEP = 64
"""Chunks still to embed are kept by length in steps of this many characters."""
FETCH = 50
SCOPE_EXACT_MAX = 20_000
"""A search limited to at most this many chunks compares the query with each of them."""
ALPHA = 0.6
"""The words' share of the fused score (the meaning's is 1 - ALPHA)."""
FEEDBACK_CHUNKS = 3
FEEDBACK_TERMS = 10
FEEDBACK_WEIGHT = 0.3
"""Pseudo-relevance feedback: the commonest FEEDBACK_TERMS other words of the
best FEEDBACK_CHUNKS by words count at this weight in a second pass (taking
them from the best by words and meaning instead gave the same R@10 within
0.004, and had to wait for the query's vector). Measured on the
LoCoMo development set (R@10 without / with): one turn per file 0.702 /
0.730 (0.735 at weight 0.5), one session per file 0.944 / 0.938 (0.927 at
0.5): short memories gain, long ones lose a little, so the weight is low."""
FEEDBACK_POOL = 4
"""The feedback pass rescores the best FEEDBACK_POOL * fetch chunks by words and the
nearest, not every chunk: at 57,000 chunks, 0.8 ms instead of 2.5."""


@dataclass(frozen=True)
class Hit:
    """One record's best chunk, with the others of the same record that matched."""

    record_id: bytes
    chunk: Chunk  # its place: the text is the record's, read when shown
    score: float  # fused, in [0, 1]
    lexical: float  # the chunk's BM25 score (0: no query word in it)
    cosine: float | None  # None: not embedded yet
    others: tuple[Chunk, ...] = ()


@dataclass
class WordEvidence:
    """What a query's words say, before its vector is needed (HybridIndex.read_words)."""

    scope: np.ndarray | None  # the chunks searched (None: all)
    scores: np.ndarray | None  # every chunk's BM25 (None: no chunk yet)
    ranked: np.ndarray  # the best by words, best first
    pool: np.ndarray  # the same by id: the chunks the feedback rescored
    fetch: int
    feedback: float
    terms: list[str] = field(default_factory=list)  # the feedback's words
    more: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # over pool


class HybridIndex:
    """Chunks by words and by vectors. It holds no model: the owner embeds the texts
    in ``pending`` and each query, and decides when (off which lock, in which thread)."""

    def __init__(self, dim: int, *, hnsw_threshold: int = HNSW_THRESHOLD) -> None:
        self.dim = dim
        self.lexical = BM25()
        self.vectors = VectorIndex(dim, hnsw_threshold=hnsw_threshold)
        self._chunks: dict[int, tuple[bytes, Chunk]] = {}
        self._by_record: dict[bytes, list[int]] = {}
        self.pending: dict[int, str] = {}  # chunk id -> text still to embed
        self._pending_by_length: dict[int, dict[int, None]] = {}  # step -> chunk ids
        self._next_id = 1  # chunk ids are never reused: the graph may still hold old ones

    def __len__(self) -> int:
        return len(self._chunks)

    def put(self, record_id: bytes, text: str, vectors: np.ndarray | None = None) -> list[Chunk]:
        """(Re)index a memory's text: lexical at once, semantic via ``add_vectors``.

        ``vectors`` (one per chunk, as stored from an earlier session) skip
        the embedding. Returns the chunks.
        """
        self.remove(record_id)
        chunks = chunk_markdown(text)
        if vectors is not None and len(vectors) != len(chunks):
            vectors = None
        ids = []
        for chunk in chunks:
            chunk_id = self._next_id
            self._next_id += 1
            self._chunks[chunk_id] = (record_id, dataclasses.replace(chunk, text=""))
            self.lexical.add(chunk_id, chunk.for_embedding())
            if vectors is None:
                self._add_pending(chunk_id, chunk.for_embedding())
            ids.append(chunk_id)
        if vectors is not None and ids:
            self.vectors.add(ids, vectors)
        self._by_record[record_id] = ids
        return chunks

    def record_vectors(self, record_id: bytes) -> tuple[list[Chunk], np.ndarray] | None:
        """A record's chunks and vectors, once every chunk is embedded."""
        ids = self._by_record.get(record_id)
        if ids is None or any(i in self.pending for i in ids):
            return None
        matrix = self.vectors.get(ids) if ids else np.zeros((0, self.dim), np.float32)
        if matrix is None:
            return None
        return [self._chunks[i][1] for i in ids], matrix

    def record_of(self, chunk_id: int) -> bytes | None:
        entry = self._chunks.get(chunk_id)
        return entry[0] if entry is not None else None

    def remove(self, record_id: bytes) -> None:
        ids = self._by_record.pop(record_id, [])
        for chunk_id in ids:
            del self._chunks[chunk_id]
            self.lexical.remove(chunk_id)
            self._drop_pending(chunk_id)
        self.vectors.remove(ids)

    def _add_pending(self, chunk_id: int, text: str) -> None:
        self.pending[chunk_id] = text
        self._pending_by_length.setdefault(len(text) // LENGTH_STEP, {})[chunk_id] = None

    def _drop_pending(self, chunk_id: int) -> None:
        text = self.pending.pop(chunk_id, None)
        if text is not None:
            step = len(text) // LENGTH_STEP
            ids = self._pending_by_length[step]
            del ids[chunk_id]
            if not ids:
                del self._pending_by_length[step]

    def pending_batch(
        self, size: int, *, skip: Callable[[int], bool] | None = None
    ) -> dict[int, str]:
        """Up to ``size`` chunks still to embed (chunk id -> text), the shortest
        first, ``skip`` left out (the shortest first: a memory's words are
        searchable by meaning soonest where that is cheapest)."""
        found: dict[int, str] = {}
        for step in sorted(self._pending_by_length):
            for chunk_id in self._pending_by_length[step]:
                if skip is None or not skip(chunk_id):
                    found[chunk_id] = self.pending[chunk_id]
                    if len(found) == size:
                        return found
        return found

    def add_vectors(self, batch: dict[int, str], vectors: np.ndarray) -> None:
        """Store vectors computed for ``batch``, skipping chunks changed meanwhile."""
        ids, rows = [], []
        for row, (chunk_id, text) in enumerate(batch.items()):
            if self.pending.get(chunk_id) == text:
                ids.append(chunk_id)
                rows.append(row)
                self._drop_pending(chunk_id)
        self.vectors.add(ids, vectors[rows])

    def plan_graph(self) -> GraphBuild | None:
        """The vector graph build that is due, if any (see VectorIndex.plan_graph)."""
        return self.vectors.plan_graph()

    def search(
        self,
        query: str,
        vector: np.ndarray | None,
        k: int = 10,
        *,
        allowed: Collection[bytes] | None = None,
        alpha: float = ALPHA,
        fetch: int = FETCH,
        feedback: float = FEEDBACK_WEIGHT,
    ) -> list[Hit]:
        """The best ``k`` records for ``query``, whose embedding is ``vector`` (None:
        words only), each with its matching chunks. ``allowed`` (record ids)
        limits the search to those records: both signals are then computed
        over their chunks only, so a small directory is searched exactly.

        In two steps, so that an owner can score the words while it embeds
        the query: ``read_words`` needs no vector, ``rank`` does."""
        words = self.read_words(query, allowed=allowed, fetch=fetch, feedback=feedback)
        return self.rank(words, vector, k, alpha=alpha)

    def read_words(
        self,
        query: str,
        *,
        allowed: Collection[bytes] | None = None,
        fetch: int = FETCH,
        feedback: float = FEEDBACK_WEIGHT,
    ) -> WordEvidence:
        """What the query's words say: BM25 of every chunk, the best of them, and
        the pseudo-relevance feedback: the commonest other words of the best
        FEEDBACK_CHUNKS by words, weighted ``feedback``, scored over the best
        FEEDBACK_POOL * fetch (a memory that says the same thing in the words
        of the best matches, but not in the question's, moves up)."""
        scope = None
        if allowed is not None:
            scope = np.fromiter(
                (cid for rid in allowed for cid in self._by_record.get(rid, ())), np.int64
            )
        scores = self._within(self.lexical.scores(query), scope)
        ranked = self._best(scores, FEEDBACK_POOL * fetch)
        evidence = WordEvidence(scope, scores, ranked, np.sort(ranked), fetch, feedback)
        if feedback and len(ranked):
            best = ranked[:FEEDBACK_CHUNKS].tolist()
            leave_out = set(tokenize(query))
            evidence.terms = self.lexical.frequent_terms(best, FEEDBACK_TERMS, leave_out)
            evidence.more = self.lexical.term_scores_among(evidence.terms, evidence.pool)
        return evidence

    def rank(
        self,
        evidence: WordEvidence,
        vector: np.ndarray | None,
        k: int = 10,
        *,
        alpha: float = ALPHA,
    ) -> list[Hit]:
        """The best ``k`` records by ``evidence`` (of ``read_words``, with the
        index unchanged since) and the query's ``vector`` (None: words only)."""
        words, ranked, pool, more = evidence.scores, evidence.ranked, evidence.pool, evidence.more
        fetch = evidence.fetch
        nearest = []
        if vector is not None and len(self.vectors):
            nearest = self._nearest(vector, fetch, evidence.scope)
        cosines = dict(nearest)  # every candidate's, computed once per query
        if not more.any():
            fused = self._fuse(words, ranked[:fetch], vector, nearest, cosines, alpha)
            return self._files(fused, words, k)
        # A chunk outside the pool needs a query word (below the best
        # FEEDBACK_POOL * fetch) or a cosine the nearest would have shown.
        extra = np.setdiff1d(np.array([cid for cid, _ in nearest], np.int64), pool)
        extra = extra[extra < len(words)]
        if len(extra):
            pool = np.concatenate([pool, extra])
            more = np.concatenate([more, self.lexical.term_scores_among(evidence.terms, extra)])
            order = np.argsort(pool, kind="stable")
            pool, more = pool[order], more[order]
        combined = words.copy()
        combined[pool] += evidence.feedback * more
        top = pool[np.argsort(-combined[pool], kind="stable")[:fetch]]
        top = top[combined[top] > 0]
        fused = self._fuse(combined, top, vector, nearest, cosines, alpha)
        # What only the feedback found (no query word, nothing close in
        # meaning) is not evidence enough to be shown.
        fused = [f for f in fused if self._evident(f, words)]
        return self._files(fused, words, k)

    @staticmethod
    def _evident(row: tuple[float, int, float | None], words: np.ndarray) -> bool:
        """A query word in the chunk, or a cosine of at least MIN_COSINE."""
        _, cid, cosine = row
        return (cid < len(words) and words[cid] > 0) or (cosine or 0.0) >= MIN_COSINE

    @staticmethod
    def _within(scores: np.ndarray | None, scope: np.ndarray | None) -> np.ndarray | None:
        """BM25 scores kept only for the chunks in ``scope`` (None: all)."""
        if scores is None or scope is None:
            return scores
        kept = np.zeros(len(scores), np.float32)
        inside = scope[scope < len(scores)]
        kept[inside] = scores[inside]
        return kept

    @staticmethod
    def _best(scores: np.ndarray | None, n: int) -> np.ndarray:
        """The ids of the ``n`` best positive scores, best first."""
        if scores is None:
            return np.zeros(0, np.int64)
        found = np.flatnonzero(scores > 0)
        if len(found) > n:
            found = found[np.argpartition(-scores[found], n - 1)[:n]]
        return found[np.argsort(-scores[found], kind="stable")]

    def _fuse(
        self,
        lexical: np.ndarray | None,
        lexical_best: np.ndarray,
        vector: np.ndarray | None,
        nearest: list[tuple[int, float]],
        cosines: dict[int, float],
        alpha: float,
    ) -> list[tuple[float, int, float | None]]:
        """(fused score, chunk id, cosine) of the candidates (``lexical_best``, the
        best by ``lexical``, and ``nearest``), best first. ``cosines`` holds those
        known, and takes those computed here."""
        candidates: dict[int, list[float | None]] = {}  # chunk id -> [bm25, cosine]
        if lexical is not None:
            for cid in lexical_best.tolist():
                candidates[cid] = [float(lexical[cid]), None]
        if vector is not None:
            for cid, cosine in nearest:
                if cid in candidates:
                    candidates[cid][1] = cosine
                elif cosine >= MIN_COSINE:
                    known = lexical is not None and cid < len(lexical)
                    candidates[cid] = [float(lexical[cid]) if known else 0.0, cosine]
            missing = [cid for cid, (_, cos) in candidates.items() if cid not in cosines]
            cosines.update(self.vectors.search_among(missing, vector, len(missing)))
            for cid, scores in candidates.items():
                scores[1] = cosines.get(cid)  # found by words only: its cosine too
        rows = [
            (cid, bm25, cosine) for cid, (bm25, cosine) in candidates.items() if cid in self._chunks
        ]
        if not rows:
            return []
        top_bm25 = max(r[1] for r in rows) or 1.0
        cosines = [r[2] for r in rows if r[2] is not None]
        span = max(max(cosines, default=MIN_COSINE), STRONG_COSINE) - MIN_COSINE
        fused = []
        for cid, bm25, cosine in rows:
            words = bm25 / top_bm25
            # Not embedded yet (just written): its words stand for its meaning,
            # so a fresh memory holding every query word is not outranked by
            # older ones that share one word and are close in meaning.
            meaning = words if cosine is None else max(0.0, cosine - MIN_COSINE) / span
            fused.append((alpha * words + (1 - alpha) * meaning, cid, cosine))
        fused.sort(key=lambda f: (-f[0], f[1]))
        return fused

    def _files(
        self, fused: list[tuple[float, int, float | None]], words: np.ndarray | None, k: int
    ) -> list[Hit]:
        """The best ``k`` records, each with its best chunk first."""
        by_record: dict[bytes, list] = {}
        for row in fused:
            record_id = self._chunks[row[1]][0]
            if record_id in by_record or len(by_record) < k:
                by_record.setdefault(record_id, []).append(row)
        hits = []
        for record_id, chunks in by_record.items():
            score, cid, cosine = chunks[0]
            bm25 = float(words[cid]) if words is not None and cid < len(words) else 0.0
            others = tuple(self._chunks[c[1]][1] for c in chunks[1:])
            hits.append(Hit(record_id, self._chunks[cid][1], score, bm25, cosine, others))
        return hits

    def _nearest(
        self, vector: np.ndarray, fetch: int, scope: np.ndarray | None
    ) -> list[tuple[int, float]]:
        """The chunks nearest ``vector``: of the whole index, or exactly within ``scope``."""
        if scope is None or len(scope) > SCOPE_EXACT_MAX:
            found = self.vectors.search(vector, fetch * (4 if scope is not None else 1))
            if scope is not None:
                inside = set(scope.tolist())
                found = [(cid, cos) for cid, cos in found if cid in inside]
            return found
        return self.vectors.search_among(scope.tolist(), vector, fetch)

    # -- stored with the vault (sealed there by the owner) -------------------------

    def export(self, versions: Mapping[bytes, int]) -> bytes:
        """The index of the records in ``versions`` whose every chunk is embedded,
        each with its version (the owner's, given back by ``restore``); no text
        and no vector of the live chunks."""
        records = [
            rid
            for rid, ids in self._by_record.items()
            if rid in versions and not any(i in self.pending for i in ids)
        ]
        chunk_ids = [i for rid in records for i in self._by_record[rid]]
        places = [self._chunks[i][1] for i in chunk_ids]
        strings = json.dumps([[c.heading, c.title] for c in places]).encode()
        return pack(
            json.dumps({"next_id": self._next_id}).encode(),
            b"".join(records),
            np.array([versions[rid] for rid in records], np.int64),
            np.array([len(self._by_record[rid]) for rid in records], np.int32),
            np.array(chunk_ids, np.int64),
            np.array([[c.start_line, c.end_line] for c in places], np.int32).reshape(-1, 2),
            strings,
            self.lexical.to_bytes(set(chunk_ids)),
            self.vectors.export_graph() or b"",
        )

    @classmethod
    def restore(
        cls,
        data: bytes,
        dim: int,
        vectors_of: Callable[[list[tuple[bytes, int]]], list[np.ndarray | None]],
        *,
        hnsw_threshold: int = HNSW_THRESHOLD,
    ) -> tuple[HybridIndex, dict[bytes, int]]:
        """The index of ``export`` and the version of each record in it.

        ``vectors_of([(record_id, version), ...])`` gives each record's stored
        vectors, or None: a record without them, or without one per chunk, is
        left out (the owner indexes it again). ValueError if ``data`` is not
        an export."""
        header, records, versions, counts, chunk_ids, lines, strings, lexical, graph = unpack(
            data, 9
        )
        next_id = int(json.loads(bytes(header))["next_id"])
        versions, counts = versions.view(np.int64), counts.view(np.int32)
        chunk_ids, lines = chunk_ids.view(np.int64), lines.view(np.int32).reshape(-1, 2)
        places = json.loads(bytes(strings))
        n = len(counts)
        if len(records) != 16 * n or len(versions) != n or (counts < 0).any():
            raise ValueError("inconsistent index")
        if not len(chunk_ids) == len(lines) == len(places) == int(counts.sum()):
            raise ValueError("inconsistent index")
        index = cls(dim, hnsw_threshold=hnsw_threshold)
        index.lexical = BM25.from_bytes(bytes(lexical))
        record_ids = [bytes(records[16 * i : 16 * i + 16]) for i in range(n)]
        ends = np.cumsum(counts).tolist()
        kept: dict[bytes, int] = {}
        with_vectors: list[int] = []
        shared: dict[str, str] = {}  # headings repeat: one string each

        def strings(text: str) -> str:
            return shared.setdefault(text, text)

        for rid, end, count in zip(record_ids, ends, counts.tolist(), strict=True):
            ids = chunk_ids[end - count : end].tolist()
            for i, (start, stop), (heading, title) in zip(
                ids, lines[end - count : end].tolist(), places[end - count : end], strict=True
            ):
                place = Chunk(strings(heading), start, stop, "", strings(title))
                index._chunks[i] = (rid, place)
            index._by_record[rid] = ids
        wanted = list(zip(record_ids, versions.tolist(), strict=True))
        matrix = np.empty((len(chunk_ids), dim), np.float32)  # filled in place: no copies
        for (rid, version), count, vectors in zip(
            wanted, counts.tolist(), vectors_of(wanted), strict=True
        ):
            if vectors is not None and vectors.shape == (count, dim):
                kept[rid] = version
                matrix[len(with_vectors) : len(with_vectors) + count] = vectors
                with_vectors += index._by_record[rid]
        if len(index._chunks) != len(chunk_ids) or len(index.lexical) != len(chunk_ids):
            raise ValueError("inconsistent index")
        ids = np.array(with_vectors, np.int64)
        matrix = matrix[: len(ids)]
        if len(graph):
            index.vectors.restore_graph(bytes(graph), ids, matrix)
        else:
            index.vectors.add(ids.tolist(), matrix)
        for rid in set(record_ids) - kept.keys():
            index.remove(rid)
        index._next_id = max(next_id, int(chunk_ids.max()) + 1 if len(chunk_ids) else 1)
        return index, kept
