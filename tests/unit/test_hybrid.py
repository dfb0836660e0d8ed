"""Hybrid search with the real embedding model: paraphrases, exact tokens, nothing."""

from __future__ import annotations

import pytest

from memvault.index.embedder import DIMENSIONS, Embedder
from memvault.index.hybrid import HybridIndex

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
    long_note = "\n".join(f"# Part {i}\nThe zebrafish tank, detail {i}." for i in range(12))
    idx.put(b"long", long_note)
    idx.put(b"short", "# Fish\nThe zebrafish tank is cleaned on Tuesdays.")
    while batch := idx.pending_batch(32):
        idx.add_vectors(batch, embedder.embed(list(batch.values())))
    hits = idx.search("zebrafish tank", embedder.embed_one("zebrafish tank"), k=2)
    assert {h.record_id for h in hits} == {b"long", b"short"}, "k counts files, not chunks"
    long_hit = next(h for h in hits if h.record_id == b"long")
    assert len(long_hit.others) >= 5, "the file's other matching chunks come with it"


def test_feedback_finds_a_memory_in_the_words_of_the_best_match():
    """Pseudo-relevance feedback: a memory sharing no word with the query but
    several with the best match is found (words only: no vectors here); an
    exact match stays first."""
    idx = HybridIndex(DIMENSIONS)
    idx.put(b"class", "Caroline joined a pottery class; the clay wheel spins fast and wet.")
    idx.put(b"vase", "She glazed a vase on the wheel: clay, wet hands, spins slowly.")
    idx.put(b"other", "The quarterly budget review moved to Thursday afternoon.")
    without = idx.search("pottery class", None, 3, feedback=0)
    assert [h.record_id for h in without] == [b"class"]
    found = idx.search("pottery class", None, 3)
    assert [h.record_id for h in found] == [b"class", b"vase"]
    assert found[1].lexical == 0, "its BM25 for the query itself is still shown as none"
    assert 0 < found[1].score < found[0].score <= 1
