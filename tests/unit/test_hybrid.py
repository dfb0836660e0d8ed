"""Hybrid search with the real embedding model: paraphrases, exact tokens, nothing."""

from __future__ import annotations

import numpy as np
import pytest

from memvault.index.embedder import DIMENSIONS, Embedder
from memvault.index.hybrid import Hit, HybridIndex

pytestmark = pytest.mark.model  # the real embedding model

NOTES = {
    b"deploy": "# Deploy\nDeploys go through `make release`; never push tags by hand.",
    b"db": "# Database\nWe use postgres 16. Migrations run with `alembic upgrade head`.",
    b"ws": "# Websocket\nThe client fails with ERR_CONN_RESET when the proxy times out.",
    b"food": "# Lunch\nThe team likes the ramen place near the office on Fridays.",
    b"code": "# Utils\n`compute_checksum(data)` returns the sha256 hex digest of a file.",
}


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


@pytest.fixture(scope="module")
def index(embedder):
    idx = HybridIndex(DIMENSIONS)
    for record_id, text in NOTES.items():
        idx.put(record_id, text)
    while batch := idx.pending_batch(32):
        idx.add_vectors(batch, embedder.embed(list(batch.values())))
    assert not idx.pending
    return idx


@pytest.fixture(scope="module")
def ask(index, embedder):
    """Search as the service does: the query embedded by the caller."""
    return lambda query, **options: index.search(query, embedder.embed_one(query), **options)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how do we ship a new version to production", b"deploy"),  # paraphrase
        ("which database and schema upgrade tool", b"db"),
        ("where does the team eat", b"food"),
        ("ERR_CONN_RESET", b"ws"),  # rare exact token
        ("compute_checksum", b"code"),
    ],
)
def test_finds_by_meaning_and_by_exact_token(ask, query, expected):
    hits = ask(query, k=3)
    assert hits and hits[0].record_id == expected, [(h.record_id, h.score) for h in hits]


def test_nothing_relevant_returns_nothing(ask):
    assert ask("quantum chromodynamics lattice gluon propagator") == []


def test_words_are_found_before_embedding_and_removed_records_vanish(index, ask):
    index.put(b"new", "# Fresh\nThe zebrafish experiment starts Monday.")
    assert index.pending, "not embedded yet"
    assert b"new" in [h.record_id for h in ask("zebrafish")]
    assert b"new" in [h.record_id for h in index.search("zebrafish", None)], "words alone"
    index.remove(b"new")
    assert ask("zebrafish") == []
    only_db = ask("postgres migrations", allowed={b"db"})
    assert {h.record_id for h in only_db} == {b"db"}


def test_a_query_vector_alone_finds_by_meaning(index, embedder):
    """No shared word: only the vector the caller passed can find the memory."""
    vector = embedder.embed_one("how do we ship a new version to production")
    assert index.search("xyzzy", None) == []
    hits = index.search("xyzzy", vector, k=1)
    assert [h.record_id for h in hits] == [b"deploy"] and hits[0].lexical == 0


def test_a_strong_single_signal_hit_wins_and_scores_stay_in_0_1(ask):
    """Found first by words alone (an exact code), it comes first although other
    notes are nearer in meaning; fused scores lie in [0, 1], the best near 1."""
    hits = ask("ERR_CONN_RESET postgres", k=5)
    assert hits[0].record_id == b"ws", [(h.record_id, h.score) for h in hits]
    assert all(0 <= h.score <= 1 for h in hits) and hits[0].score > 0.5


def test_results_are_files_with_their_matching_chunks(embedder):
    idx = HybridIndex(DIMENSIONS)
    filler = "The rest of this part is about other things entirely. " * 14
    parts = (f"# Part {i}\nThe zebrafish tank, detail {i}. {filler}" for i in range(12))
    long_note = "\n".join(parts)  # each part too long to share a chunk with the next
    idx.put(b"long", long_note)
    idx.put(b"short", "# Fish\nThe zebrafish tank is cleaned on Tuesdays.")
    while batch := idx.pending_batch(32):
        idx.add_vectors(batch, embedder.embed(list(batch.values())))
    hits = idx.search("zebrafish tank", embedder.embed_one("zebrafish tank"), k=2)
    assert {h.record_id for h in hits} == {b"long", b"short"}, "k counts files, not chunks"
    long_hit = next(h for h in hits if h.record_id == b"long")
    assert len(long_hit.others) >= 5, "the file's other matching chunks come with it"


def test_feedback_lifts_a_memory_in_the_words_of_the_best_match(embedder):
    """Pseudo-relevance feedback: a memory with none of the query's words but
    several of the best match's moves up; one that shares only those words,
    nothing of the query and nothing of its meaning, is not shown at all."""
    idx = HybridIndex(DIMENSIONS)
    notes = {
        b"class": "Caroline joined a pottery class; the clay wheel spins fast and wet.",
        b"vase": "She glazed a vase on the wheel: clay, wet hands, it spins slowly.",
        b"ceramics": "Ceramics evening: kiln temperatures and glaze recipes for stoneware.",
        b"car": "Spins, wet wheel, clay on the tyres: the car slid off the muddy road.",
        b"budget": "The quarterly budget review moved to Thursday afternoon.",
    }
    for record_id, text in notes.items():
        idx.put(record_id, text)
    while batch := idx.pending_batch(32):
        idx.add_vectors(batch, embedder.embed(list(batch.values())))
    vector = embedder.embed_one("pottery class")

    def search(**options) -> dict[bytes, Hit]:
        return {h.record_id: h for h in idx.search("pottery class", vector, 5, **options)}

    without, hits = search(feedback=0), search()
    assert next(iter(hits)) == next(iter(without)) == b"class"
    assert hits[b"vase"].score > without[b"vase"].score + 0.05  # +0.085 measured
    assert hits[b"vase"].lexical == 0, "its BM25 for the query itself is still shown as none"
    assert all(0 < h.score <= 1 for h in hits.values())
    assert b"car" not in hits, "the feedback's words alone are no evidence"


def test_a_weak_best_cosine_does_not_outweigh_the_query_words(embedder):
    """A memory just written (no vector yet) with three of the query's words
    comes before one with a single word whose cosine is the best of a poor lot."""
    idx = HybridIndex(DIMENSIONS)
    idx.put(b"oncall", "# On-call\nThe pager rotates weekly; escalate to the SRE lead.")
    idx.put(b"lunch", "# Lunch\nThe team likes the ramen place near the office on Fridays.")
    while batch := idx.pending_batch(32):
        idx.add_vectors(batch, embedder.embed(list(batch.values())))
    idx.put(b"fresh", "# Auth\nJWT signing keys rotate every thirty days, by the zebra team.")
    query = "token key rotation policy zebra"
    hits = idx.search(query, embedder.embed_one(query), 3)
    assert [h.record_id for h in hits][:2] == [b"fresh", b"oncall"]
    assert hits[0].cosine is None and hits[1].cosine < 0.4


def test_chunks_are_embedded_shortest_first_in_batches_of_like_lengths():
    idx = HybridIndex(8)
    lengths = [1400, 30, 700, 90, 1300, 40, 600, 100]
    for n, length in enumerate(lengths):
        idx.put(f"r{n}".encode(), "w" * length)
    first = idx.pending_batch(4)
    assert sorted(len(t) for t in first.values()) == [30, 40, 90, 100]
    skipped = idx.pending_batch(2, skip=lambda cid: len(idx.pending[cid]) < 100)
    assert [len(t) for t in skipped.values()] == [100, 600]


def test_a_restored_index_never_gives_a_new_chunk_an_id_its_graph_still_holds():
    """A record half embedded at export is left out of it; its chunks' ids stay
    in the graph (deleted at restore), so new chunks must take ids past them
    (hnswlib loses a live label that an old deleted element shares)."""
    rng = np.random.default_rng(2)

    def vectors(n: int) -> np.ndarray:
        v = rng.standard_normal((n, 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    idx = HybridIndex(8, hnsw_threshold=4)
    for n in range(6):
        idx.put(rid(f"done{n}"), f"# Note {n}\nwords of note {n}")
    idx.add_vectors(dict(idx.pending), vectors(len(idx.pending)))
    idx.put(rid("half"), "# A\nfirst part\n\n# B\nsecond part")
    first = dict(list(idx.pending.items())[:1])
    idx.add_vectors(first, vectors(1))
    idx.vectors.build_hnsw_now()
    stored = {r: idx.record_vectors(r)[1] for r in idx._by_record if r != rid("half")}
    data = idx.export(dict.fromkeys(idx._by_record, 1))

    restored, kept = HybridIndex.restore(
        data, 8, lambda wanted: [stored.get(r) for r, _ in wanted], hnsw_threshold=4
    )
    assert restored.vectors.uses_hnsw and rid("half") not in kept
    restored.remove(rid("done0"))  # more deleted places in the graph, taken by new chunks
    restored.remove(rid("done1"))
    for n in range(4):
        restored.put(rid(f"new{n}"), f"new note {n}")
        restored.add_vectors(dict(restored.pending), vectors(len(restored.pending)))
    restored.put(rid("half"), "# A\nfirst part\n\n# B\nsecond part")
    restored.add_vectors(dict(restored.pending), vectors(len(restored.pending)))
    for name in ["half", "new0", "new1", "new2", "new3", "done5"]:
        assert restored.record_vectors(rid(name)) is not None, name


def rid(name: str) -> bytes:
    """A record id of the vault's size."""
    return name.encode().ljust(16, b".")
