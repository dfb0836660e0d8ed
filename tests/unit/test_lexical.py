"""BM25 and its identifier-aware tokenizer."""

from __future__ import annotations

import numpy as np
import pytest

from memvault.index.lexical import BM25, tokenize


def test_tokenizer_keeps_identifiers_and_their_parts():
    tokens = tokenize("ERR_CONN_RESET in computeChecksum() at HTTPServer v2")
    for expected in (
        "err_conn_reset",
        "err",
        "conn",
        "reset",
        "computechecksum",
        "comput",  # stemmed, as "computing" and "computed" are
        "checksum",
        "httpserver",
        "http",
        "server",
        "v2",
    ):
        assert expected in tokens


def test_tokenizer_stems_prose_drops_stop_words_and_single_letters():
    tokens = tokenize("When did Caroline's group go camping? She camped, researching de-stress.")
    assert tokens.count("camp") == 2 and "research" in tokens
    assert not {"when", "did", "she", "s"} & set(tokens)
    assert "de-stress" in tokens and "stress" in tokens
    assert {"file.py", "file", "py"} <= set(tokenize("see file.py"))
    assert "snake_case" in tokenize("the snake_case name") and "ERR_LMDB_7731".lower() in tokenize(
        "got ERR_LMDB_7731"
    )


def test_bm25_ranks_rare_exact_tokens_and_forgets_removed_documents():
    index = BM25()
    index.add(1, "deploys go through make release")
    index.add(2, "the websocket fails with ERR_CONN_RESET after 30 seconds")
    index.add(3, "release notes for version 2; release party on friday")
    index.add(4, "nothing relevant here at all")
    assert index.search("ERR_CONN_RESET")[0][0] == 2
    top = [doc for doc, _ in index.search("release")]
    assert top[:2] == [3, 1]
    assert index.search("kubernetes") == []
    index.remove(2)
    assert index.search("ERR_CONN_RESET") == []
    index.add(1, "now about kubernetes instead")  # re-adding replaces
    assert [d for d, _ in index.search("release")] == [3]
    assert index.search("kubernetes")[0][0] == 1
    assert len(index) == 3
    assert [d for d, _ in index.search("release notes kubernetes", allowed={1})] == [1]


def test_removed_documents_score_as_if_never_added_before_and_after_a_purge():
    """Removal marks a document dead; scores must equal those of an index that
    never held it, whether or not its postings were purged yet."""
    import random

    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    docs = {i: " ".join(rng.choices(words, k=rng.randint(3, 30))) for i in range(1, 400)}
    index = BM25()
    index.PURGE_MIN = 200  # purge several times along the way
    index.DENSE_MIN = 3  # common terms scored from rows kept between queries
    for doc_id, text in docs.items():
        index.add(doc_id, text)
    alive = dict(docs)
    purged = 0
    for doc_id in rng.sample(sorted(docs), 300):
        index.remove(doc_id)
        del alive[doc_id]
        purged += index._dead_postings == 0
        if len(alive) % 50 == 0:
            fresh = BM25()
            for d, text in alive.items():
                fresh.add(d, text)
            for query in ("w1 w2", "w7", "w3 w30 w39"):
                got = index.search(query, k=500)
                want = fresh.search(query, k=500)
                assert [d for d, _ in got] == [d for d, _ in want]
                assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(got, want, strict=True))
    assert purged, "the dead postings were purged at least once"
    assert len(index) == len(alive)


def test_a_stored_index_scores_as_the_one_it_was_made_from_without_removed_words():
    import random

    rng = random.Random(3)
    words = [f"term{i}" for i in range(60)]
    index = BM25()
    for doc_id in range(1, 300):
        index.add(doc_id, " ".join(rng.choices(words, k=rng.randint(1, 40))))
    index.add(300, "a zanzibarquokka sighting")  # the only document with this word
    for doc_id in rng.sample(range(1, 300), 120):
        index.remove(doc_id)
    index.remove(300)
    data = index.to_bytes()
    assert b"zanzibarquokka" not in data, "a removed document's words are not stored"
    loaded = BM25.from_bytes(data)
    assert len(loaded) == len(index)
    for query in ("term1 term2", "term7", "term3 term30 term59", "zanzibarquokka"):
        got, want = loaded.search(query, k=500), index.search(query, k=500)
        assert [d for d, _ in got] == [d for d, _ in want]
        assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(got, want, strict=True))
    loaded.add(301, "term1 fresh words after loading")
    loaded.remove(5)
    assert loaded.search("fresh")[0][0] == 301


def test_a_damaged_stored_index_is_refused():
    index = BM25()
    index.add(1, "some words here")
    data = index.to_bytes()
    for bad in (data[:-3], data + b"x", b"", data[:8] + b"\xff" * (len(data) - 8)):
        with pytest.raises(ValueError):
            BM25.from_bytes(bad)


def test_frequent_terms_of_documents_leave_out_the_query_words():
    index = BM25()
    index.add(1, "camping trip to the lake, camping again, lake lake")
    index.add(2, "lake house near the forest")
    assert index.frequent_terms([1, 2], 2, leave_out={"camp"}) == ["lake", "trip"]


def test_scores_among_some_documents_are_their_full_scores():
    """The feedback pass scores a few documents only: the same numbers, whatever
    order the documents came in (a stored index, re-added ids, removed ones)."""
    index = BM25()
    texts = {i: f"token bucket limiter {'retry ' * (i % 4)}doc{i} backoff" for i in range(60)}
    for doc_id in [*range(30, 60), *range(0, 30)]:  # out of order: postings unsorted
        index.add(doc_id, texts[doc_id])
    index.remove(7)
    index.add(45, "retry retry storm")
    restored = BM25.from_bytes(index.to_bytes())
    terms = ["retri", "backoff", "storm", "absent"]
    some = np.array([0, 3, 7, 12, 29, 30, 45, 59], np.int64)
    for bm25 in (index, restored):
        full = bm25.term_scores(terms)
        assert np.allclose(bm25.term_scores_among(terms, some), full[some])
        assert bm25.term_scores_among(terms, some)[2] == 0, "a removed document scores nothing"
