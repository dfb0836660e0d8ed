"""The search index of a vault: vectors stored sealed per record, no plaintext anywhere."""

from __future__ import annotations

import numpy as np
import pytest

from memvault.index.embedder import DIMENSIONS, Embedder
from memvault.index.model import cache_dir
from memvault.search import Query, SearchService, open_search
from memvault.search.stored import decode_vectors
from memvault.vault import Vault

from ..conftest import FAST_KDF, PASSPHRASE, assert_nowhere, busy_mount, reopen

pytestmark = pytest.mark.model  # the real embedding model

NOTES = {
    "deploy.md": "# Deploy\nDeploys go through make release; never push tags by hand.",
    "zebra.md": "# Zebrafish\nThe zebrafish tank is cleaned every Tuesday by the lab.",
    "lunch.md": "# Lunch\nThe team likes the ramen place near the office.",
}


@pytest.fixture(scope="module")
def embedder():
    model = Embedder()
    return lambda: model


def indexed(vault, embedder) -> SearchService:
    service = SearchService(vault, embedder, DIMENSIONS)
    service.start()
    service.index_all()
    assert service.wait_idle(120)
    return service


def test_vectors_are_stored_sealed_and_reused(vault_path, embedder):
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, text in NOTES.items():
            vault.put(name, text.encode())
        service = indexed(vault, embedder)
        for name in NOTES:
            assert vault.get_derived(vault.record_id(name)) is not None
        assert service.search(Query("when is the fish tank cleaned"))[0].path == "zebra.md"
        service.stop()
    with reopen(vault_path) as vault:
        service = SearchService(vault, embedder, DIMENSIONS)
        service.index_all()
        assert service.index.pending == {}, "stored vectors are reused, nothing re-embedded"
        assert service.search(Query("when is the fish tank cleaned"))[0].path == "zebra.md"
        vault.put("zebra.md", b"# Zebrafish\nThe tank moved to room 12.\n")
        assert vault.get_derived(vault.record_id("zebra.md")) is None, "stale after a change"
    words = [b"zebrafish", b"Tuesday", b"ramen", b"release", b"room 12"]
    assert_nowhere(words, vault_path.parent)
    assert {p.suffix for p in cache_dir().iterdir()} <= {".onnx"}, "the cache holds the model only"


def test_shredded_memory_takes_its_vectors_along(vault_path, embedder):
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, text in NOTES.items():
            vault.put(name, text.encode())
        service = indexed(vault, embedder)
        rid = vault.record_id("zebra.md")
        with vault._store.read() as txn:
            sealed = bytes(txn.get(rid, db="derived"))
        vault.delete("zebra.md")
        assert vault.get_derived(rid) is None
        assert all(h.path != "zebra.md" for h in service.search(Query("zebrafish tank")))
        service.stop()
    data = vault_path.read_bytes()
    for i in range(0, len(sealed) - 16, 7):
        assert sealed[i : i + 16] not in data


def test_reindex_drops_and_rebuilds(vault_path, embedder):
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        vault.put("deploy.md", NOTES["deploy.md"].encode())
        service = indexed(vault, embedder)
        before = vault.get_derived(vault.record_id("deploy.md"))
        service.reindex()
        assert service.wait_idle(60)
        after = vault.get_derived(vault.record_id("deploy.md"))
        assert before is not None and after is not None
        vectors = decode_vectors(after, service.ensure_model().model_sha256)
        assert vectors.shape == (1, DIMENSIONS)
        assert abs(float(np.linalg.norm(vectors)) - 1.0) < 1e-3
        service.stop()


def test_vector_graph_is_built_in_the_background_and_kept_current(vault_path, embedder):
    """Above the threshold an HNSW graph takes over once built; writes keep it current."""
    topics = ["postgres vacuum", "kubernetes ingress", "rust borrow checker", "git rebase"]
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for i in range(24):
            vault.put(f"n{i}.md", f"# Note {i}\nAbout {topics[i % 4]}, case {i}.\n".encode())
        service = SearchService(vault, embedder, DIMENSIONS, hnsw_threshold=16)
        service.start()
        service.index_all()
        assert service.wait_idle(120)
        assert service.index.vectors.uses_hnsw
        vault.put("fish.md", b"# Zebrafish\nThe zebrafish tank is cleaned every Tuesday.\n")
        vault.delete("n0.md")
        assert service.wait_idle(120)
        assert service.index.vectors.uses_hnsw
        hits = service.search(Query("when do we clean the aquarium", k=3))
        assert hits[0].path == "fish.md"
        assert "n0.md" not in {h.path for h in service.search(Query("postgres vacuum", k=30))}
        service.stop()


def test_one_shot_search_with_the_factory(vault_path):
    """The CLI's path without a daemon: open_search, catch_up in the caller's thread."""
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, text in NOTES.items():
            vault.put(f"notes/{name}", text.encode())
        vault.put("other/zebra.md", NOTES["zebra.md"].encode())
        service = open_search(vault)
        service.catch_up()
        assert service.index.pending == {} and service.state() == "ready"
        assert vault.get_derived(vault.record_id("notes/zebra.md")) is not None
        found = service.search(Query("when is the fish tank cleaned", k=5, prefix="/notes/"))
        assert found[0].path == "notes/zebra.md"
        assert all(r.path.startswith("notes/") for r in found)


def test_a_memory_rewritten_fifty_times_is_embedded_once_when_quiet(vault_path, embedder):
    """Words at once (read-your-writes), meaning once the memory is left alone."""
    real = embedder()
    embedded: list[str] = []

    class Counting:  # the real model, counting what it is asked to embed
        model_sha256 = real.model_sha256

        def embed(self, texts):
            embedded.extend(texts)
            return real.embed(texts)

        def tokenize(self, text):  # a query
            embedded.append(text)
            return real.tokenize(text)

        run = staticmethod(real.run)

    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        service = SearchService(vault, Counting, DIMENSIONS, workers=2, quiet=0.5)
        service.start()
        service.index_all()
        for i in range(50):
            vault.put("draft.md", f"# Draft\nThe zebrafish tank, revision {i}.\n".encode())
            if i == 10:
                found = service.search(Query("zebrafish revision", k=1))
                assert found and found[0].path == "draft.md", "its words are found at once"
        assert service.wait_idle(120)
        drafts = [t for t in embedded if "tank, revision" in t]  # not the query
        assert drafts == ["Draft\n# Draft\nThe zebrafish tank, revision 49."], drafts
        service.stop()


def test_background_workers_run_at_idle_priority(vault_path, embedder):
    import os
    import threading

    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        vault.put("a.md", b"# A\nsomething to embed\n")
        service = SearchService(vault, embedder, DIMENSIONS, workers=2)
        before = set(threading.enumerate())
        service.start()
        service.index_all()
        assert service.wait_idle(120)
        workers = [t for t in set(threading.enumerate()) - before if t.name.startswith("embedder")]
        assert len(workers) == 2
        for worker in workers:
            assert os.sched_getscheduler(worker.native_id) == os.SCHED_IDLE
        assert os.sched_getscheduler(0) != os.SCHED_IDLE, "only the workers, not the process"
        service.stop()


def test_embedding_waits_for_a_lull_in_the_mounts_requests(vault_path, embedder):
    """A worker at idle priority still holds the GIL: while requests keep coming
    (for less than the workers' patience), nothing is embedded; once they stop,
    everything is."""
    import time

    from memvault.search.service import BATCH_PATIENCE

    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        service = SearchService(vault, embedder, DIMENSIONS, workers=2, quiet=0.1)
        service.start()
        service.index_all()
        assert service.wait_idle(120)
        with busy_mount(vault, BATCH_PATIENCE * 0.75):
            vault.put("fish.md", b"# Zebrafish\nThe zebrafish tank is cleaned on Tuesdays.\n")
            time.sleep(BATCH_PATIENCE * 0.6)
            assert service.search(Query("zebrafish", k=1))[0].path == "fish.md", "words at once"
            assert service.index.pending, "embedded while the mount was busy"
        assert service.wait_idle(60) and not service.index.pending
        assert vault.get_derived(vault.record_id("fish.md")) is not None
        service.stop()


def test_variants_of_a_query_embed_it_once(vault_path, embedder):
    """`q`, `q.json`, `q?k=20`: the query's vector is reused (embedding is most of
    a query's time); another query is embedded, and results stay right."""
    real = embedder()
    asked: list[str] = []

    class Counting:
        model_sha256 = real.model_sha256

        def embed(self, texts):
            asked.extend(texts)
            return real.embed(texts)

        def tokenize(self, text):  # a query
            asked.append(text)
            return real.tokenize(text)

        run = staticmethod(real.run)

    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, text in NOTES.items():
            vault.put(name, text.encode())
        service = SearchService(vault, Counting, DIMENSIONS)
        service.catch_up()
        asked.clear()
        for variant in (Query("fish tank"), Query("fish tank", k=20), Query("fish tank", k=1)):
            assert service.search(variant)[0].path == "zebra.md"
        assert service.search(Query("noodle soup"))[0].path == "lunch.md"
        assert asked == ["fish tank", "noodle soup"]


def test_a_vault_pinned_to_the_float_model_keeps_it_until_reindex(vault_path):
    """Vaults embedded before the int8 model keep working with their stored
    vectors; `reindex` moves them to the int8 model."""
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, text in NOTES.items():
            vault.put(name, text.encode())
        before = SearchService(vault, lambda: Embedder(quantized=False), DIMENSIONS)
        before.catch_up()
        float_sha = vault.pinned_model()
        stored = vault.get_derived(vault.record_id("zebra.md"))
    with reopen(vault_path) as vault:
        service = open_search(vault)
        service.index_all()
        assert service.index.pending == {}, "the stored float vectors are used"
        assert service.search(Query("when is the fish tank cleaned"))[0].path == "zebra.md"
        assert vault.pinned_model() == float_sha
        assert vault.get_derived(vault.record_id("zebra.md")) == stored
        int8_sha = service.reindex()
        assert int8_sha != float_sha and vault.pinned_model() == int8_sha
        service.catch_up()
        assert service.search(Query("when is the fish tank cleaned"))[0].path == "zebra.md"
