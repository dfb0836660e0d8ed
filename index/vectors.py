"""Vector search: an exact matrix product below a threshold, HNSW above it.

Vectors are L2-normalised, so the inner product is the cosine. Below
``hnsw_threshold`` vectors, one matrix-vector product is exact and fast;
above it an hnswlib graph answers in sub-millisecond time. The switch is
automatic both ways. Serialisation is in memory only (hnswlib's pickle
support, never its save-to-a-path method, which would write plaintext to
disk); the caller encrypts the bytes.
"""

from __future__ import annotations

import io
import pickle

import hnswlib
import numpy as np

HNSW_THRESHOLD = 20_000
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 96


class VectorIndex:
    def __init__(self, dim: int, *, hnsw_threshold: int = HNSW_THRESHOLD) -> None:
        self.dim = dim
        self.hnsw_threshold = hnsw_threshold
        self._ids = np.zeros(0, np.int64)
        self._buffer = np.zeros((0, dim), np.float32)
        self._matrix = self._buffer  # the first len(self._ids) rows of the buffer
        self._row: dict[int, int] = {}
        self._hnsw: hnswlib.Index | None = None

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def uses_hnsw(self) -> bool:
        return self._hnsw is not None

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if not len(ids):
            return
        self.remove([i for i in ids if i in self._row])
        vectors = np.asarray(vectors, np.float32).reshape(len(ids), self.dim)
        start = len(self._ids)
        end = start + len(ids)
        if end > len(self._buffer):  # grow by doubling: one big, fresh allocation
            grown = np.empty((max(2 * len(self._buffer), end, 1024), self.dim), np.float32)
            grown[:start] = self._matrix
            self._buffer = grown
        self._buffer[start:end] = vectors
        self._matrix = self._buffer[:end]
        self._ids = np.concatenate([self._ids, np.asarray(ids, np.int64)])
        for offset, i in enumerate(ids):
            self._row[int(i)] = start + offset
        if self._hnsw is not None:
            self._hnsw_add(np.asarray(ids, np.int64), vectors)
        elif len(self._ids) >= self.hnsw_threshold:
            self._build_hnsw()

    def remove(self, ids: list[int]) -> None:
        present = [int(i) for i in ids if int(i) in self._row]
        if not present:
            return
        rows = [self._row.pop(i) for i in present]
        if self._hnsw is not None:
            for i in present:
                self._hnsw.mark_deleted(i)
        keep = np.ones(len(self._ids), bool)
        keep[rows] = False
        self._ids = self._ids[keep]
        self._buffer = np.array(self._matrix[keep], np.float32)  # a fresh compact copy
        self._matrix = self._buffer
        self._row = {int(i): r for r, i in enumerate(self._ids)}
        if self._hnsw is not None and len(self._ids) < self.hnsw_threshold // 2:
            self._hnsw = None  # small again: exact search is cheaper

    def get(self, ids: list[int]) -> np.ndarray | None:
        """The stored vectors of ``ids`` (None if any is missing)."""
        rows = [self._row.get(int(i)) for i in ids]
        if any(r is None for r in rows):
            return None
        return self._matrix[rows]

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """The ``k`` nearest ids with their cosine similarity, best first."""
        n = len(self._ids)
        if not n:
            return []
        k = min(k, n)
        query = np.asarray(query, np.float32).reshape(self.dim)
        if self._hnsw is not None:
            self._hnsw.set_ef(max(HNSW_EF_SEARCH, k))
            labels, distances = self._hnsw.knn_query(query, k=k)
            return [(int(i), float(1 - d)) for i, d in zip(labels[0], distances[0], strict=True)]
        scores = self._matrix @ query
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self._ids[r]), float(scores[r])) for r in top]

    def exact_search(self, query: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """Exact search whatever the size (to measure HNSW recall)."""
        hnsw, self._hnsw = self._hnsw, None
        try:
            return self.search(query, k)
        finally:
            self._hnsw = hnsw

    def _build_hnsw(self) -> None:
        index = hnswlib.Index(space="ip", dim=self.dim)
        index.init_index(
            max_elements=max(2 * len(self._ids), 1024),
            ef_construction=HNSW_EF_CONSTRUCTION,
            M=HNSW_M,
            allow_replace_deleted=True,
        )
        index.set_num_threads(1)
        if len(self._ids):
            index.add_items(self._matrix, self._ids)
        self._hnsw = index

    def _hnsw_add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        needed = self._hnsw.get_current_count() + len(ids)
        if needed > self._hnsw.get_max_elements():
            self._hnsw.resize_index(2 * needed)
        self._hnsw.add_items(vectors, ids, replace_deleted=True)

    # -- serialisation (in memory; the vault seals the bytes) --------------------

    def to_bytes(self) -> bytes:
        out = io.BytesIO()
        np.save(out, self._ids, allow_pickle=False)
        np.save(out, self._matrix, allow_pickle=False)
        graph = pickle.dumps(self._hnsw) if self._hnsw is not None else b""
        out.write(graph)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, dim: int, *, hnsw_threshold: int = HNSW_THRESHOLD):
        index = cls(dim, hnsw_threshold=hnsw_threshold)
        stream = io.BytesIO(data)
        index._ids = np.load(stream, allow_pickle=False)
        index._matrix = index._buffer = np.load(stream, allow_pickle=False)
        index._row = {int(i): r for r, i in enumerate(index._ids)}
        graph = stream.read()
        if graph:
            # Only ever bytes this vault sealed itself (authenticated before this).
            index._hnsw = pickle.loads(graph)  # noqa: S301
        return index
