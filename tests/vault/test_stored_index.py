"""The search index stored at lock: restored at unlock, sealed, gone with the
first change after it, and never trusted when it does not check out."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from memvault.index.embedder import DIMENSIONS, Embedder
from memvault.search import Query, SearchService
from memvault.vault import Vault, schema

from ..conftest import FAST_KDF, PASSPHRASE, assert_nowhere, reopen
from ..rawvault import raw

pytestmark = pytest.mark.model  # the real embedding model

TOPICS = ["deploy", "zebrafish", "ramen", "kubernetes", "invoice", "violin", "glacier"]
GRAPH_AT = 20  # chunks: small enough for a test, and the graph is stored too


@pytest.fixture(scope="module")
def embedder():
    model = Embedder()
    return lambda: model


def notes() -> dict[str, str]:
    out = {}
    for n in range(30):
        topic = TOPICS[n % len(TOPICS)]
        out[f"{topic}/{n:02}.md"] = (
            f"# {topic.title()} note {n}\nAbout {topic}: item {n} of the list, "
            f"checked on day {n * 3}.\n\n## Details\nThe {topic} details number {n}."
        )
    out["secret/quokka.md"] = "# Field trip\nWe saw a quokkaflute near the lighthouse."
    return out


def service(vault: Vault, embedder, *, start: bool = False) -> SearchService:
    found = SearchService(vault, embedder, DIMENSIONS, hnsw_threshold=GRAPH_AT)
    if start:
        found.start()
    found.index_all()
    if start:
        assert found.wait_idle(120)
    return found


def answers(found: SearchService) -> list[list[tuple[str, float, int, str]]]:
    out = []
    for q in ("zebrafish details", "what did we see near the lighthouse", "item 7 violin"):
        out.append([(r.path, r.score, r.start_line, r.snippet) for r in found.search(Query(q))])
    return out


def paths(found: SearchService, query: str) -> list[str]:
    return [r.path for r in found.search(Query(query))]


def locked_with_index(vault_path, embedder) -> list:
    """A vault of the notes, locked with its index stored; the answers it gave."""
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, text in notes().items():
            vault.put(name, text.encode())
        found = service(vault, embedder, start=True)
        assert found.index.vectors.uses_hnsw
        before = answers(found)
        found.stop()
        assert vault.search_index_stored
    return before


def stored_blob(vault_path) -> bytes:
    with raw(vault_path) as (txn, dbs):
        return bytes(txn.get(schema.SEARCH_INDEX_KEY, db=dbs["state"]))


def test_the_index_is_restored_at_unlock_as_it_was(vault_path, embedder):
    before = locked_with_index(vault_path, embedder)
    with reopen(vault_path) as vault:
        found = service(vault, embedder)  # not started: no thread could build a graph
        assert found.index.vectors.uses_hnsw, "the graph came from the vault, not a build"
        assert found.index.pending == {}, "nothing embedded again"
        assert len(found.index) > GRAPH_AT
        assert answers(found) == before
        vault.put("violin/new.md", b"# Violin\nA brand new violin lesson plan.")
        got = found.search(Query("violin lesson plan"))
        assert got[0].path == "violin/new.md", [(r.path, r.score, r.cosine, r.words) for r in got]


def test_the_stored_index_is_sealed(vault_path, embedder):
    locked_with_index(vault_path, embedder)
    with reopen(vault_path) as vault:
        found = service(vault, embedder)
        cid = found.index._by_record[vault.record_id("secret/quokka.md")][0]
        vector = found.index.vectors.get([cid])[0]
        stored_vectors = vault.get_derived(vault.record_id("secret/quokka.md"))  # int8, plain
    assert_nowhere([b"quokkaflute", b"lighthouse", b"Field trip"], vault_path.parent)
    data = vault_path.read_bytes()
    raw_vector = np.asarray(vector, np.float32).tobytes()
    for i in range(0, len(raw_vector) - 16, 16):
        assert raw_vector[i : i + 16] not in data, "a vector's bytes in the clear"
    for i in range(0, len(stored_vectors) - 16, 16):
        assert stored_vectors[i : i + 16] not in data, "stored vectors in the clear"


def test_a_change_deletes_it_and_a_shred_leaves_no_trace_of_it(vault_path, embedder):
    locked_with_index(vault_path, embedder)
    old = stored_blob(vault_path)
    with reopen(vault_path) as vault:
        found = service(vault, embedder, start=True)
        assert vault.search_index_stored
        shredded = found.index._by_record[vault.record_id("secret/quokka.md")]
        vector = found.index.vectors.get(shredded)[0].tobytes()
        vault.delete("secret/quokka.md")
        assert not vault.search_index_stored, "deleted with the shred"
        assert "secret/quokka.md" not in paths(found, "quokkaflute")
        found.stop()
        assert vault.search_index_stored, "stored again at lock"
        assert b"quokkaflute" not in vault.search_index()
        assert b"lighthouse" not in vault.search_index(), "no word of the shredded memory"
        stored = vault.search_index()
        for i in range(0, len(vector) - 16, 16):
            assert vector[i : i + 16] not in stored, "the shredded memory's vector is kept"
    data = vault_path.read_bytes()
    for i in range(0, len(old) - 32, len(old) // 200):
        assert old[i : i + 32] not in data, "the earlier stored index left bytes behind"
    with reopen(vault_path) as vault:
        assert "secret/quokka.md" not in paths(service(vault, embedder), "quokkaflute lighthouse")


def test_a_tampered_stored_index_is_rebuilt_not_trusted(vault_path, embedder, caplog):
    before = locked_with_index(vault_path, embedder)
    blob = stored_blob(vault_path)
    with raw(vault_path, write=True) as (txn, dbs):
        flipped = bytearray(blob)
        flipped[len(blob) // 2] ^= 0x01
        txn.put(schema.SEARCH_INDEX_KEY, bytes(flipped), db=dbs["state"])
    with caplog.at_level(logging.WARNING), reopen(vault_path) as vault:
        found = service(vault, embedder)
        assert "stored search index failed authentication" in caplog.text
        assert answers(found) == before, "rebuilt from the memories themselves"


def test_an_authentic_but_malformed_index_is_rebuilt(vault_path, embedder, caplog):
    before = locked_with_index(vault_path, embedder)
    with reopen(vault_path) as vault:
        good = vault.search_index()
        for bad in (good[:-100], good[:50] + b"\x00" * (len(good) - 50)):
            vault.put_search_index(bad)
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                found = service(vault, embedder)
            assert "stored search index is unusable" in caplog.text or found.index.pending
            assert answers(found) == before


def test_an_unusable_stored_index_is_replaced_at_the_next_lock(vault_path, embedder):
    before = locked_with_index(vault_path, embedder)
    with reopen(vault_path) as vault:
        vault.put_search_index(vault.search_index()[:-100])  # say, an older format
        found = service(vault, embedder, start=True)
        found.stop()
    with reopen(vault_path) as vault:
        found = service(vault, embedder)
        assert found.index.vectors.uses_hnsw, "restored: stored anew at the lock before"
        assert answers(found) == before
