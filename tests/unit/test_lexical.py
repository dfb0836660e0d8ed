"""BM25 and its identifier-aware tokenizer."""

from __future__ import annotations

from memvault.index.lexical import BM25, tokenize


def test_tokenizer_keeps_identifiers_and_their_parts():
    tokens = tokenize("ERR_CONN_RESET in computeChecksum() at HTTPServer v2")
    for expected in (
        "err_conn_reset",
        "err",
        "conn",
        "reset",
        "computechecksum",
        "compute",
        "checksum",
        "httpserver",
        "http",
        "server",
        "v2",
    ):
        assert expected in tokens


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
