"""Vector search: an exact matrix product below a threshold, HNSW above it.

Vectors are L2-normalised, so the inner product is the cosine. Below
``hnsw_threshold`` vectors, one matrix-vector product is exact and fast;
above it an hnswlib graph answers in sub-millisecond time.

Building a graph of tens of thousands of vectors takes tens of seconds, so
it is never done inside ``add``: once a graph is due, ``plan_graph`` (under
the owner's lock) snapshots the vectors into a GraphBuild, whose ``build``
runs without the lock (hnswlib releases the GIL) and whose ``install`` (under
the lock again) replays what changed meanwhile. Exact search answers until
then. Once installed, the graph holds the vectors, and the float32 matrix
gives way to an int8 copy (a quarter of its size; hnswlib keeps its own
float32 copy, and hands a vector out at 20 µs): it gives the cosines of
chosen ids, within about 0.001.

``export`` gives the graph without its vectors (the owner stores those
anyway, and seals both); ``restore`` puts the two back together, so a large
index is ready at unlock without the build.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

import hnswlib
import numpy as np

from .packing import pack, unpack

HNSW_THRESHOLD = 20_000
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 200
"""Measured at 57,000 chunks of the benchmark's notes (many near-duplicates):
recall@10 against exact search 0.88 at ef 96, 0.97 at ef 200 (p95 about 1 ms)."""
GRAPH_THREADS = 2
BLOCK = 4096
"""Rows copied or quantized at a time (a few MB: in cache, no large temporaries)."""


class Rows:
    """Vectors by id in one growing matrix: float32, or int8 with a scale per
    row (a quarter of the memory, cosines within about 0.001)."""

    def __init__(self, dim: int, dtype=np.float32) -> None:
        self.dim, self.dtype = dim, np.dtype(dtype)
        self.count = 0
        self.ids = np.zeros(0, np.int64)
        self.data = np.zeros((0, dim), self.dtype)
        self.scales = np.zeros(0, np.float32)
        self.row: dict[int, int] = {}

    @property
    def quantized(self) -> bool:
        return self.dtype == np.int8

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Append rows for ``ids`` (none of them present)."""
        start, end = self.count, self.count + len(ids)
        if end > len(self.data):  # grow by doubling: one big, fresh allocation
            size = max(2 * len(self.data), end, 1024)
            self.data = _grown(self.data, size, start)
            self.ids = _grown(self.ids, size, start)
            self.scales = _grown(self.scales, size, start)
        if self.quantized:
            for at in range(0, len(ids), BLOCK):  # in blocks: no 100 MB temporaries
                block = vectors[at : at + BLOCK]
                scales = np.abs(block).max(axis=1) / 127
                scales[scales == 0] = 1
                rows = slice(start + at, start + at + len(block))
                self.data[rows] = np.rint(block * (1 / scales)[:, None])
                self.scales[rows] = scales
        else:
            self.data[start:end] = vectors
        self.ids[start:end] = ids
        self.count = end
        self.row.update(zip(ids.tolist(), range(start, end), strict=True))

    def remove(self, ids: list[int]) -> None:
        """Forget ``ids`` (all present): each hole is filled with the last row."""
        for i in ids:
            row = self.row.pop(i)
            last = self.count - 1
            if row != last:
                moved = int(self.ids[last])
                self.data[row] = self.data[last]
                self.scales[row] = self.scales[last]
                self.ids[row] = moved
                self.row[moved] = row
            self.count = last

    def vectors(self, ids: list[int]) -> np.ndarray:
        rows = [self.row[i] for i in ids]
        if self.quantized:
            return self.data[rows] * self.scales[rows, None]
        return self.data[rows]

    def dot(self, query: np.ndarray) -> np.ndarray:
        """Every row's inner product with ``query`` (exact rows only)."""
        return self.data[: self.count] @ query


class VectorIndex:
    """Vectors by id: a float32 matrix (exact search) until the graph is
    installed, then the graph for searching and an int8 copy of the vectors
    for the cosines of chosen ids (hnswlib hands its own out at 20 µs each)."""

    def __init__(self, dim: int, *, hnsw_threshold: int = HNSW_THRESHOLD) -> None:
        self.dim = dim
        self.hnsw_threshold = hnsw_threshold
        self._rows = Rows(dim)
        self._hnsw: hnswlib.Index | None = None
        self._changes: list[tuple[str, np.ndarray, np.ndarray | None]] | None = None
        """Set while a graph is being built: what to replay into it."""

    def __len__(self) -> int:
        return self._rows.count

    def __contains__(self, i: int) -> bool:
        return i in self._rows.row

    @property
    def uses_hnsw(self) -> bool:
        return self._hnsw is not None

    @property
    def graph_due(self) -> bool:
        """Big enough for HNSW, and no graph built or being built."""
        return self._hnsw is None and self._changes is None and len(self) >= self.hnsw_threshold

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if not len(ids):
            return
        self.remove([i for i in ids if i in self])
        vectors = np.asarray(vectors, np.float32).reshape(len(ids), self.dim)
        id_array = np.asarray(ids, np.int64)
        self._rows.add(id_array, vectors)
        if self._hnsw is not None:
            _graph_add(self._hnsw, id_array, vectors)
        if self._changes is not None:
            self._changes.append(("add", id_array, vectors.copy()))

    def remove(self, ids: list[int]) -> None:
        present = list(dict.fromkeys(int(i) for i in ids if int(i) in self))
        if not present:
            return
        self._rows.remove(present)
        if self._hnsw is not None:
            for i in present:
                self._hnsw.mark_deleted(i)
            if len(self) < self.hnsw_threshold // 2:
                self._to_matrix()  # small again: exact search is cheaper
        if self._changes is not None:
            self._changes.append(("remove", np.asarray(present, np.int64), None))

    def _to_matrix(self) -> None:
        """Let the graph go and search the float32 matrix of its live vectors again."""
        graph, self._hnsw = self._hnsw, None
        ids = self._rows.ids[: len(self)].tolist()
        self._rows = Rows(self.dim)
        if ids:
            self._rows.add(np.asarray(ids, np.int64), _vectors_of(graph, ids))

    def get(self, ids: list[int]) -> np.ndarray | None:
        """The stored vectors of ``ids``, exactly (None if any is missing)."""
        if not all(i in self for i in ids):
            return None
        if self._hnsw is not None:
            return _vectors_of(self._hnsw, ids)
        return self._rows.vectors([int(i) for i in ids])

    def search_among(
        self, ids: list[int], query: np.ndarray, k: int = 10
    ) -> list[tuple[int, float]]:
        """The ``k`` of ``ids`` nearest ``query`` (exact; ids without a vector skipped)."""
        present = [int(i) for i in ids if i in self]
        if not present:
            return []
        scores = self._rows.vectors(present) @ np.asarray(query, np.float32).reshape(self.dim)
        k = min(k, len(present))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(present[i], float(scores[i])) for i in top]

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """The ``k`` nearest ids with their cosine similarity, best first."""
        n = len(self)
        if not n:
            return []
        k = min(k, n)
        query = np.asarray(query, np.float32).reshape(self.dim)
        if self._hnsw is not None:
            self._hnsw.set_ef(max(HNSW_EF_SEARCH, k))
            labels, distances = self._hnsw.knn_query(query, k=k)
            return [(int(i), float(1 - d)) for i, d in zip(labels[0], distances[0], strict=True)]
        scores = self._rows.dot(query)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self._rows.ids[r]), float(scores[r])) for r in top]

    def exact_search(self, query: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """Exact search whatever the size (to measure HNSW recall)."""
        if self._hnsw is None:
            return self.search(query, k)
        ids = self._rows.ids[: len(self)].tolist()
        scores = _vectors_of(self._hnsw, ids) @ np.asarray(query, np.float32)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(ids[i], float(scores[i])) for i in top]

    # -- building the graph, off the caller's lock --------------------------------

    def plan_graph(self) -> GraphBuild | None:
        """A graph build to run off the lock if one is due (call with the lock held)."""
        if not self.graph_due:
            return None
        ids, matrix = self.graph_snapshot()
        return GraphBuild(self, ids, matrix)

    def abandon_graph(self) -> None:
        """Stop recording changes for a build that failed; a later one may be planned."""
        self._changes = None

    def graph_snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the ids and vectors to build from; changes are recorded from now."""
        self._changes = []
        return self._rows.ids[: len(self)].copy(), self._rows.data[: len(self)].copy()

    @staticmethod
    def build_graph(ids: np.ndarray, matrix: np.ndarray) -> hnswlib.Index:
        graph = hnswlib.Index(space="ip", dim=matrix.shape[1])
        graph.init_index(
            max_elements=max(2 * len(ids), 1024),
            ef_construction=HNSW_EF_CONSTRUCTION,
            M=HNSW_M,
            allow_replace_deleted=True,
        )
        if len(ids):
            graph.add_items(matrix, ids, num_threads=GRAPH_THREADS)
        return graph

    def install_graph(self, graph: hnswlib.Index, built_from: np.ndarray) -> None:
        """Replay the changes made since the snapshot, then search with ``graph``."""
        live = set(built_from.tolist())
        for kind, ids, vectors in self._changes or []:
            for i in ids.tolist():
                if i in live:
                    graph.mark_deleted(i)
                    live.discard(i)
            if kind == "add":
                _graph_add(graph, ids, vectors)
                live.update(ids.tolist())
        self._changes = None
        if len(self) >= self.hnsw_threshold // 2:
            ids = self._rows.ids[: len(self)].copy()
            self._use_graph(graph, ids, self._rows.vectors(ids.tolist()))

    def _use_graph(self, graph: hnswlib.Index, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Search with ``graph``, which holds ``vectors`` (of ``ids``) and no other
        live one; keep only an int8 copy of them."""
        self._hnsw = graph
        self._rows = Rows(self.dim, np.int8)
        self._rows.add(ids, vectors)

    def build_hnsw_now(self) -> None:
        """Build and install the graph in the caller's thread (tests, tools)."""
        ids, matrix = self.graph_snapshot()
        self.install_graph(self.build_graph(ids, matrix), ids)

    # -- stored with the vault ----------------------------------------------------------

    def export_graph(self) -> bytes | None:
        """The graph without its vectors (None: no graph): the owner keeps the
        live ones; those of deleted elements (a shredded memory's, perhaps) are
        not kept anywhere, and come back as zeros that searches pass by."""
        if self._hnsw is None:
            return None
        state = dict(self._hnsw.__getstate__()[0])
        labels, links = _split_rows(state)
        arrays = {k: state.pop(k) for k in _GRAPH_ARRAYS}
        del state["data_level0"]
        header = json.dumps(state).encode()
        return pack(header, labels, links, *(arrays[k] for k in _GRAPH_ARRAYS))

    def restore_graph(self, data: bytes, ids: np.ndarray, matrix: np.ndarray) -> None:
        """Search with the graph of ``export_graph`` and the vectors ``matrix``
        (row i: the vector of ``ids[i]``): an element of the graph without a
        vector there is deleted, a vector without an element is added.
        ValueError if ``data`` is not such a graph."""
        header, labels, links, *parts = unpack(data, 3 + len(_GRAPH_ARRAYS))
        state = json.loads(bytes(header))
        count, size = state["cur_element_count"], state["size_data_per_element"]
        labels = labels.view(np.uint64).astype(np.int64)
        offset, label_at = state["offset_data"], state["label_offset"]
        if state["dim"] != self.dim or label_at - offset != 4 * self.dim or len(labels) != count:
            raise ValueError("a graph of other vectors")
        rows = np.zeros((count, size), np.uint8)
        rows[:, :offset] = links.reshape(count, offset)
        rows[:, label_at : label_at + 8] = labels.view(np.uint8).reshape(count, 8)
        vectors = rows[:, offset:label_at].view(np.float32)
        where = _positions(ids, labels)
        for at in range(0, count, BLOCK):  # in blocks: no 100 MB temporaries
            found = where[at : at + BLOCK]
            vectors[at : at + BLOCK][found >= 0] = matrix[found[found >= 0]]
        state["data_level0"] = rows.reshape(-1).view(np.int8)
        for key, part in zip(_GRAPH_ARRAYS, parts, strict=True):
            state[key] = part.view(_GRAPH_ARRAYS[key])
        graph = hnswlib.Index.__new__(hnswlib.Index)
        graph.__setstate__((state,))
        for label in labels[where < 0].tolist():
            with contextlib.suppress(RuntimeError):  # already deleted
                graph.mark_deleted(label)
        self._changes = None
        self._use_graph(graph, labels[where >= 0], matrix[where[where >= 0]])
        missing = np.flatnonzero(_positions(labels, ids) < 0)
        if len(missing):
            self.add(ids[missing].tolist(), matrix[missing])


_GRAPH_ARRAYS = {
    "label_lookup_external": np.uint64,
    "label_lookup_internal": np.uint32,
    "element_levels": np.int32,
    "link_lists": np.int8,
}


def _split_rows(state: dict) -> tuple[np.ndarray, np.ndarray]:
    """The graph's level-0 rows without their vectors: (labels, links)."""
    count, size = state["cur_element_count"], state["size_data_per_element"]
    rows = state["data_level0"].view(np.uint8).reshape(count, size)
    offset, label_at = state["offset_data"], state["label_offset"]
    labels = np.ascontiguousarray(rows[:, label_at : label_at + 8]).view(np.uint64).reshape(-1)
    return labels, np.ascontiguousarray(rows[:, :offset])


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of ``wanted`` is in ``ids`` (-1: not there)."""
    if not len(ids):
        return np.full(len(wanted), -1, np.int64)
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids, wanted, sorter=order), len(ids) - 1)
    found = order[at]
    return np.where(ids[found] == wanted, found, -1)


def _vectors_of(graph: hnswlib.Index, ids: list[int]) -> np.ndarray:
    return np.asarray(graph.get_items(list(ids)), np.float32)


@dataclass
class GraphBuild:
    """One HNSW build: ``build()`` without the owner's lock, ``install()`` under it."""

    index: VectorIndex
    ids: np.ndarray
    matrix: np.ndarray
    graph: hnswlib.Index | None = None

    def build(self) -> None:
        self.graph = VectorIndex.build_graph(self.ids, self.matrix)

    def install(self) -> None:
        """Search with the built graph from now on (or give the build up if it failed)."""
        if self.graph is None:
            self.index.abandon_graph()
        else:
            self.index.install_graph(self.graph, self.ids)


def _graph_add(graph: hnswlib.Index, ids: np.ndarray, vectors: np.ndarray) -> None:
    needed = graph.get_current_count() + len(ids)
    if needed > graph.get_max_elements():
        graph.resize_index(2 * needed)
    graph.add_items(vectors, ids, replace_deleted=True)


def _grown(array: np.ndarray, size: int, keep: int) -> np.ndarray:
    grown = np.empty((size, *array.shape[1:]), array.dtype)
    grown[:keep] = array[:keep]
    return grown
