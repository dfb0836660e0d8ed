"""Hybrid search over chunks: BM25 and embeddings, fused by reciprocal rank.

A chunk enters the lexical index as soon as its memory is written (a memory
closed before a search is always found by its words); its vector follows
when the embedder gets to it (``pending`` lists what is not embedded yet).
Only candidates with some real evidence are fused: a BM25 match, or a cosine
above MIN_COSINE. A query with nothing relevant therefore returns nothing,
not the least bad noise.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .chunking import Chunk, chunk_markdown
from .lexical import BM25
from .vectors import HNSW_THRESHOLD, GraphBuild, VectorIndex

MIN_COSINE = 0.2
RRF_K = 60
CANDIDATES = 50


@dataclass(frozen=True)
class Hit:
    record_id: bytes
    chunk: Chunk
    score: float
    lexical_rank: int | None
    semantic_rank: int | None
    cosine: float | None


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
        self._ids = itertools.count(1)

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
            chunk_id = next(self._ids)
            self._chunks[chunk_id] = (record_id, chunk)
            self.lexical.add(chunk_id, chunk.for_embedding())
            if vectors is None:
                self.pending[chunk_id] = chunk.for_embedding()
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
            self.pending.pop(chunk_id, None)
        self.vectors.remove(ids)

    def pending_batch(self, size: int) -> dict[int, str]:
        """Up to ``size`` chunks still to embed (chunk id -> text), oldest first."""
        return dict(itertools.islice(self.pending.items(), size))

    def add_vectors(self, batch: dict[int, str], vectors: np.ndarray) -> None:
        """Store vectors computed for ``batch``, skipping chunks changed meanwhile."""
        ids, rows = [], []
        for row, (chunk_id, text) in enumerate(batch.items()):
            if self.pending.get(chunk_id) == text:
                ids.append(chunk_id)
                rows.append(row)
                del self.pending[chunk_id]
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
        allowed: Callable[[bytes], bool] | None = None,
    ) -> list[Hit]:
        """The best chunks for ``query``, whose embedding is ``vector`` (None: words only).

        ``allowed`` filters by record (a path prefix).
        """
        fetch = CANDIDATES if allowed is None else CANDIDATES * 4  # a filter drops some
        lexical = self.lexical.search(query, fetch)
        semantic = []
        if vector is not None and len(self.vectors):
            semantic = [h for h in self.vectors.search(vector, fetch) if h[1] >= MIN_COSINE]

        def keep(hits):
            out = []
            for chunk_id, score in hits:
                entry = self._chunks.get(chunk_id)
                if entry is not None and (allowed is None or allowed(entry[0])):
                    out.append((chunk_id, score))
                    if len(out) == CANDIDATES:
                        break
            return out

        lexical, semantic = keep(lexical), keep(semantic)
        fused: dict[int, float] = {}
        lex_rank = {cid: r for r, (cid, _) in enumerate(lexical, start=1)}
        sem = {cid: (r, cos) for r, (cid, cos) in enumerate(semantic, start=1)}
        for cid, r in lex_rank.items():
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + r)
        for cid, (r, _) in sem.items():
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + r)
        best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
        hits = []
        for cid, score in best:
            record_id, chunk = self._chunks[cid]
            r, cos = sem.get(cid, (None, None))
            hits.append(Hit(record_id, chunk, score, lex_rank.get(cid), r, cos))
        return hits
