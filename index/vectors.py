"""Vector search: an exact matrix product below a threshold, HNSW above it.

Vectors are L2-normalised, so the inner product is the cosine. Below
``hnsw_threshold`` vectors, one matrix-vector product is exact and fast;
above it an hnswlib graph answers in sub-millisecond time.

Building a graph of tens of thousands of vectors takes tens of seconds, so
it is never done inside ``add``: once a graph is due, ``plan_graph`` (under
the owner's lock) snapshots the vectors into a GraphBuild, whose ``build``
runs without the lock (hnswlib releases the GIL) and whose ``install`` (under
the lock again) replays what changed meanwhile. Exact search answers until
then. Once installed, the graph holds the vectors: the matrix is let go
(hnswlib keeps its own copy of each vector, and two copies of 57,000 are
170 MB).

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


class VectorIndex:
    """Vectors by id: a matrix (exact search) until the graph is installed, then
    the graph alone."""

    def __init__(self, dim: int, *, hnsw_threshold: int = HNSW_THRESHOLD) -> None:
        self.dim = dim
        self.hnsw_threshold = hnsw_threshold
        self._count = 0
        self._id_buffer = np.zeros(0, np.int64)
        self._buffer = np.zeros((0, dim), np.float32)
        self._row: dict[int, int] = {}
        self._hnsw: hnswlib.Index | None = None
        self._labels: set[int] = set()  # the live ids in the graph
        self._changes: list[tuple[str, np.ndarray, np.ndarray | None]] | None = None
        """Set while a graph is being built: what to replay into it."""

    def __len__(self) -> int:
        return len(self._labels) if self._hnsw is not None else self._count

    def __contains__(self, i: int) -> bool:
        return i in self._labels if self._hnsw is not None else i in self._row

    @property
    def _ids(self) -> np.ndarray:
        return self._id_buffer[: self._count]

    @property
    def _matrix(self) -> np.ndarray:
        return self._buffer[: self._count]

    @property
    def uses_hnsw(self) -> bool:
        return self._hnsw is not None

    @property
    def graph_due(self) -> bool:
        """Big enough for HNSW, and no graph built or being built."""
        return self._hnsw is None and self._changes is None and self._count >= self.hnsw_threshold

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if not len(ids):
            return
        self.remove([i for i in ids if i in self])
        vectors = np.asarray(vectors, np.float32).reshape(len(ids), self.dim)
        id_array = np.asarray(ids, np.int64)
        if self._hnsw is not None:
            _graph_add(self._hnsw, id_array, vectors)
            self._labels.update(id_array.tolist())
            return
        start, end = self._count, self._count + len(ids)
        if end > len(self._buffer):  # grow by doubling: one big, fresh allocation
            size = max(2 * len(self._buffer), end, 1024)
            grown = np.empty((size, self.dim), np.float32)
            grown[:start] = self._matrix
            grown_ids = np.empty(size, np.int64)
            grown_ids[:start] = self._ids
            self._buffer, self._id_buffer = grown, grown_ids
        self._buffer[start:end] = vectors
        self._id_buffer[start:end] = id_array
        self._count = end
        for offset, i in enumerate(ids):
            self._row[int(i)] = start + offset
        if self._changes is not None:
            self._changes.append(("add", id_array, vectors.copy()))

    def remove(self, ids: list[int]) -> None:
        """Forget ``ids``: each hole is filled with the last row (no full copy)."""
        present = [int(i) for i in ids if int(i) in self]
        if not present:
            return
        if self._hnsw is not None:
            for i in present:
                self._hnsw.mark_deleted(i)
                self._labels.discard(i)
            if len(self._labels) < self.hnsw_threshold // 2:
                self._to_matrix()  # small again: exact search is cheaper
            return
        for i in present:
            row = self._row.pop(i)
            last = self._count - 1
            if row != last:
                moved = int(self._id_buffer[last])
                self._buffer[row] = self._buffer[last]
                self._id_buffer[row] = moved
                self._row[moved] = row
            self._count = last
        if self._changes is not None:
            self._changes.append(("remove", np.asarray(present, np.int64), None))

    def _to_matrix(self) -> None:
        """Let the graph go and search the matrix of its live vectors again."""
        graph, self._hnsw = self._hnsw, None
        ids = sorted(self._labels)
        self._labels = set()
        if ids:
            self.add(ids, _vectors_of(graph, ids))

    def get(self, ids: list[int]) -> np.ndarray | None:
        """The stored vectors of ``ids`` (None if any is missing)."""
        if not all(i in self for i in ids):
            return None
        if self._hnsw is not None:
            return _vectors_of(self._hnsw, ids)
        return self._buffer[[self._row[int(i)] for i in ids]]

    def search_among(
        self, ids: list[int], query: np.ndarray, k: int = 10
    ) -> list[tuple[int, float]]:
        """The ``k`` of ``ids`` nearest ``query`` (exact; ids without a vector skipped)."""
        present = [i for i in ids if i in self]
        if not present:
            return []
        scores = self.get(present) @ np.asarray(query, np.float32).reshape(self.dim)
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
        scores = self._matrix @ query
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self._id_buffer[r]), float(scores[r])) for r in top]

    def exact_search(self, query: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """Exact search whatever the size (to measure HNSW recall)."""
        if self._hnsw is None:
            return self.search(query, k)
        return self.search_among(sorted(self._labels), query, k)

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
        return self._ids.copy(), self._matrix.copy()

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
        if self._count >= self.hnsw_threshold // 2:
            self._use_graph(graph, live)

    def _use_graph(self, graph: hnswlib.Index, live: set[int]) -> None:
        self._hnsw, self._labels = graph, live
        self._count, self._row = 0, {}
        self._buffer = np.zeros((0, self.dim), np.float32)
        self._id_buffer = np.zeros(0, np.int64)

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
        given = {int(i): row for row, i in enumerate(ids.tolist())}
        where = np.array([given.get(int(i), -1) for i in labels], np.int64)
        vectors[where >= 0] = matrix[where[where >= 0]]
        state["data_level0"] = rows.reshape(-1).view(np.int8)
        for key, part in zip(_GRAPH_ARRAYS, parts, strict=True):
            state[key] = part.view(_GRAPH_ARRAYS[key])
        graph = hnswlib.Index.__new__(hnswlib.Index)
        graph.__setstate__((state,))
        for label in labels[where < 0].tolist():
            with contextlib.suppress(RuntimeError):  # already deleted
                graph.mark_deleted(label)
        self._changes = None
        in_graph = set(labels[where >= 0].tolist())
        self._use_graph(graph, in_graph)
        missing = [row for i, row in given.items() if i not in in_graph]
        if missing:
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
