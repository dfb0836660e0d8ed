"""Vector search: exact below the threshold, HNSW above, serialised in memory."""

from __future__ import annotations

import numpy as np

from memvault.index.vectors import VectorIndex


def random_unit(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_exact_search_add_replace_remove():
    index = VectorIndex(8)
    v = random_unit(20, 8, 1)
    index.add(list(range(100, 120)), v)
    assert index.search(v[5], k=1)[0][0] == 105
    assert abs(index.search(v[5], k=1)[0][1] - 1.0) < 1e-5
    index.add([105], v[6:7])  # replacing keeps one entry per id
    assert len(index) == 20
    index.remove([106, 105])
    found = [i for i, _ in index.search(v[6], k=20)]
    assert 105 not in found and 106 not in found and len(found) == 18


def test_switches_to_hnsw_with_high_recall_and_back():
    dim, n = 32, 3000
    index = VectorIndex(dim, hnsw_threshold=1000)
    data = random_unit(n, dim, 2)
    index.add(list(range(n)), data)
    assert index.uses_hnsw
    queries = random_unit(100, dim, 3)
    hits = 0
    for q in queries:
        exact = {i for i, _ in index.exact_search(q, 10)}
        approx = {i for i, _ in index.search(q, 10)}
        hits += len(exact & approx)
    recall = hits / (10 * len(queries))
    assert recall >= 0.95, recall
    restored = VectorIndex.from_bytes(index.to_bytes(), dim, hnsw_threshold=1000)
    assert restored.uses_hnsw and len(restored) == n
    assert restored.search(queries[0], 10) == index.search(queries[0], 10)
    index.remove(list(range(2600)))
    assert not index.uses_hnsw and len(index) == 400
    assert index.search(data[2999], 1)[0][0] == 2999
