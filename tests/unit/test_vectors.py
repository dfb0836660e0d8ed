"""Vector search: exact below the threshold, HNSW above (built off the caller's lock)."""

from __future__ import annotations

import numpy as np
import pytest

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


def recall_at_10(index: VectorIndex, queries: np.ndarray) -> float:
    hits = 0
    for q in queries:
        exact = {i for i, _ in index.exact_search(q, 10)}
        approx = {i for i, _ in index.search(q, 10)}
        hits += len(exact & approx)
    return hits / (10 * len(queries))


def test_switches_to_hnsw_with_high_recall_and_back():
    dim, n = 32, 3000
    index = VectorIndex(dim, hnsw_threshold=1000)
    data = random_unit(n, dim, 2)
    index.add(list(range(n)), data)
    assert index.graph_due and not index.uses_hnsw  # never built inside add()
    index.build_hnsw_now()
    assert index.uses_hnsw and not index.graph_due
    recall = recall_at_10(index, random_unit(100, dim, 3))
    assert recall >= 0.95, recall
    index.remove(list(range(2600)))
    assert not index.uses_hnsw and len(index) == 400
    assert index.search(data[2999], 1)[0][0] == 2999


def test_graph_built_off_lock_replays_changes_made_meanwhile():
    dim = 32
    index = VectorIndex(dim, hnsw_threshold=1000)
    data = random_unit(2000, dim, 4)
    index.add(list(range(1500)), data[:1500])
    ids, matrix = index.graph_snapshot()
    assert not index.graph_due  # one build at a time
    # While the graph is built elsewhere, the index changes and still answers exactly.
    index.add(list(range(1500, 2000)), data[1500:])
    index.remove(list(range(0, 100)))
    index.add([1999], data[5:6])  # a replaced vector
    index.remove([1998])
    assert index.search(data[1700], 1)[0][0] == 1700
    index.install_graph(VectorIndex.build_graph(ids, matrix), ids)
    assert index.uses_hnsw and len(index) == 1899
    found = {i for i, _ in index.search(data[1700], 10)}
    assert 1700 in found
    assert index.search(data[5], 2)[0][0] in (5, 1999)
    for gone in (0, 50, 99, 1998):
        assert gone not in {i for i, _ in index.search(data[gone], 10)}
    assert recall_at_10(index, random_unit(100, dim, 5)) >= 0.95


def test_a_planned_graph_build_is_installed_or_given_up():
    """plan_graph is what a lock-holding owner calls; a failed build must not block the next."""
    index = VectorIndex(8, hnsw_threshold=32)
    v = random_unit(40, 8, 7)
    index.add(list(range(31)), v[:31])
    assert index.plan_graph() is None, "below the threshold"
    index.add([31], v[31:32])
    failed = index.plan_graph()
    assert failed is not None and index.plan_graph() is None, "one build at a time"
    failed.install()  # never built: given up
    assert not index.uses_hnsw
    job = index.plan_graph()
    assert job is not None, "a new build can be planned"
    index.add(list(range(32, 40)), v[32:40])  # lands during the build: replayed
    job.build()
    job.install()
    assert index.uses_hnsw and index.search(v[39], k=1)[0][0] == 39


def test_a_graph_exported_without_its_vectors_is_restored_whole():
    """The exported graph carries no live vector (the owner stores those); put
    back together with them it answers exactly as the graph it came from."""
    v = random_unit(1500, 16, 4)
    index = VectorIndex(16, hnsw_threshold=1000)
    index.add(list(range(1200)), v[:1200])
    index.build_hnsw_now()
    index.remove(list(range(0, 1200, 7)))  # deleted elements stay in the graph
    index.add(list(range(1200, 1500)), v[1200:])  # some take deleted places
    exported = index.export_graph()
    live = sorted(i for i in range(1500) if i in index)
    assert v[live[10]].tobytes() not in exported
    restored = VectorIndex(16, hnsw_threshold=1000)
    shuffled = np.random.default_rng(1).permutation(live)
    restored.restore_graph(exported, shuffled, v[shuffled])
    assert restored.uses_hnsw and len(restored) == len(index)
    for q in random_unit(20, 16, 5):
        assert restored.search(q, 10) == index.search(q, 10)
    assert np.array_equal(restored.get(live[:5]), v[live[:5]])
    restored.add([5000], v[:1])
    restored.remove(live[:3])
    assert restored.search(v[0], 1)[0][0] in (0, 5000)


def test_a_graph_restored_with_other_vectors_follows_the_vectors():
    """An element without a vector is deleted, a vector without an element added;
    what is not an exported graph is refused."""
    v = random_unit(1300, 16, 6)
    index = VectorIndex(16, hnsw_threshold=1000)
    index.add(list(range(1200)), v[:1200])
    index.build_hnsw_now()
    exported = index.export_graph()
    ids = np.array([*range(100, 1200), 1250])  # 0-99 lost, 1250 new
    restored = VectorIndex(16, hnsw_threshold=1000)
    restored.restore_graph(exported, ids, v[ids])
    assert len(restored) == len(ids) and 5 not in restored and 1250 in restored
    assert restored.search(v[1250], 1)[0][0] == 1250
    assert restored.search(v[5], 1)[0][0] != 5
    for bad in (exported[:-5], exported + b"x", b""):
        with pytest.raises(ValueError):
            VectorIndex(16, hnsw_threshold=1000).restore_graph(bad, ids, v[ids])
