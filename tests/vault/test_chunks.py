"""Large files in sealed chunks (256 KiB), on real LMDB files: a write re-seals
only the chunks it touches, holes are stored nowhere, and a chunk moved,
dropped or put back from an older version is an explicit error."""

from __future__ import annotations

import os

import pytest

from memvault.errors import MemoryCorrupted
from memvault.vault.bodies import CHUNK_SIZE

from .. import rawvault
from ..conftest import assert_nowhere, reopen

MB = 1 << 20


def chunk_values(path) -> dict[bytes, bytes]:
    with rawvault.raw(path) as (txn, dbs):
        return {bytes(k): bytes(v) for k, v in txn.cursor(dbs["chunks"])}


def test_a_large_file_is_chunks_and_a_small_table(vault, vault_path):
    data = os.urandom(16 * CHUNK_SIZE + 17)
    vault.put("big.bin", data)
    rid = vault.record_id("big.bin")
    assert vault.get("big.bin") == data
    assert vault.read_chunk(rid, 3) == data[3 * CHUNK_SIZE : 4 * CHUNK_SIZE]
    assert vault.read_chunk(rid, 16) == data[16 * CHUNK_SIZE :]  # the 17 bytes of the last
    # A large read: several chunks at once, the short last one (padded) too.
    assert vault.read_span(rid, 0, 4) == data[: 4 * CHUNK_SIZE]
    assert vault.read_span(rid, 14, 16) == data[14 * CHUNK_SIZE :]
    assert vault.read_span(rid, 17, 4) == b""
    vault.close()
    assert len(chunk_values(vault_path)) == 17
    with rawvault.raw(vault_path) as (txn, dbs):
        assert len(txn.get(rid, db=dbs["records"])) < 2048, "the record holds the table only"
    with reopen(vault_path, readonly=True) as again:
        assert again.get("big.bin") == data


def test_a_write_reseals_only_the_chunks_it_touches(vault, vault_path):
    data = bytearray(os.urandom(10 * CHUNK_SIZE))
    vault.put("big.bin", bytes(data))
    vault.close()
    before = chunk_values(vault_path)
    with reopen(vault_path) as v:
        rid = v.record_id("big.bin")
        patch = os.urandom(CHUNK_SIZE)
        v.write_chunks(rid, {5: patch}, len(data))
        data[5 * CHUNK_SIZE : 6 * CHUNK_SIZE] = patch
        assert v.get("big.bin") == data
    after = chunk_values(vault_path)
    assert before.keys() == after.keys()
    assert sum(before[k] != after[k] for k in before) == 1
    with reopen(vault_path, readonly=True) as v:
        assert v.get("big.bin") == data


@pytest.mark.parametrize("attack", ["swap", "drop", "rollback", "another file"])
def test_a_moved_dropped_or_old_chunk_is_an_explicit_error(vault, vault_path, attack):
    data = os.urandom(4 * CHUNK_SIZE)
    vault.put("big.bin", data)
    vault.put("other.bin", os.urandom(4 * CHUNK_SIZE))
    rid = vault.record_id("big.bin")
    keys = [vault._bodies.chunk_key(rid, i) for i in range(4)]
    other = vault._bodies.chunk_key(vault.record_id("other.bin"), 1)
    old_value = None
    if attack == "rollback":
        vault.close()
        old_value = chunk_values(vault_path)[keys[1]]
        with reopen(vault_path) as v:
            v.write_chunks(rid, {1: os.urandom(CHUNK_SIZE)}, len(data))
    else:
        vault.close()
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        db = dbs["chunks"]
        if attack == "swap":
            a, b = bytes(txn.get(keys[1], db=db)), bytes(txn.get(keys[2], db=db))
            txn.put(keys[1], b, db=db)
            txn.put(keys[2], a, db=db)
        elif attack == "drop":
            txn.delete(keys[2], db=db)
        elif attack == "rollback":
            txn.put(keys[1], old_value, db=db)
        else:
            txn.put(keys[1], bytes(txn.get(other, db=db)), db=db)
    with reopen(vault_path, readonly=True) as v:
        with pytest.raises(MemoryCorrupted, match="big.bin"):
            v.get("big.bin")
        with pytest.raises(MemoryCorrupted, match="big.bin"):
            v.read_span(rid, 0, 4)
        assert v.read_chunk(rid, 0) == data[:CHUNK_SIZE], "the chunks left alone still read"
        assert len(v.get("other.bin")) == 4 * CHUNK_SIZE


def test_holes_are_stored_nowhere_and_truncation_cuts(vault, vault_path):
    vault.put("sparse.bin", b"x")
    rid = vault.record_id("sparse.bin")
    vault.resize_record(rid, 160 * CHUNK_SIZE)
    assert vault.stat("sparse.bin").size == 160 * CHUNK_SIZE
    assert vault.read_chunk(rid, 0)[:2] == b"x\0"
    assert vault.read_chunk(rid, 100) == bytes(CHUNK_SIZE)
    vault.write_chunks(rid, {50: b"y" * CHUNK_SIZE}, 160 * CHUNK_SIZE)
    # chunk 0 was stored 1 byte long, 49 and 51 are holes
    assert vault.read_span(rid, 0, 2) == b"x" + bytes(2 * CHUNK_SIZE - 1)
    assert vault.read_span(rid, 49, 3) == bytes(CHUNK_SIZE) + b"y" * CHUNK_SIZE + bytes(CHUNK_SIZE)
    vault.close()
    assert len(chunk_values(vault_path)) == 2, "chunk 0 and chunk 50; the rest are holes"
    with reopen(vault_path) as v:
        v.resize_record(rid, 50 * CHUNK_SIZE + 10)  # into chunk 50
        v.resize_record(rid, 51 * CHUNK_SIZE)  # and out again: the cut part reads as zeros
        chunk = v.read_chunk(rid, 50)
        assert chunk == b"y" * 10 + bytes(CHUNK_SIZE - 10)


def test_a_file_crossing_one_chunk_converts_both_ways(vault, vault_path):
    small = b"# note\n" * 100
    vault.put("n.md", small)
    rid = vault.record_id("n.md")
    tail = os.urandom(CHUNK_SIZE)
    vault.write_chunks(rid, {1: tail}, CHUNK_SIZE + len(tail))
    content = vault.get("n.md")
    assert content[: len(small)] == small and content[CHUNK_SIZE:] == tail
    assert set(content[len(small) : CHUNK_SIZE]) == {0}
    vault.resize_record(rid, 50)
    assert vault.get("n.md") == small[:50]
    vault.close()
    assert chunk_values(vault_path) == {}, "back inline: no chunk left"


def test_a_shredded_large_file_leaves_no_chunk_and_no_byte(vault, vault_path):
    marker = b"SECRET-CHUNK-MARKER-" + os.urandom(4).hex().encode()
    data = (marker + b"\n") * (3 * MB // len(marker))
    vault.put("big.md", data)
    vault.put("keep.md", b"kept")
    vault.delete("big.md")
    vault.close()
    assert chunk_values(vault_path) == {}
    assert_nowhere([marker], vault_path.parent)


def test_resize_notifies_after_the_vault_lock_is_released(vault):
    """A listener that takes another lock (the search index's) must never run
    under the vault's: a worker takes them the other way round."""
    vault.put("big.bin", os.urandom(3 * CHUNK_SIZE))
    rid = vault.record_id("big.bin")
    held = []
    vault.add_listener(lambda *event: held.append(vault._lock._is_owned()))
    vault.resize_record(rid, CHUNK_SIZE + 5)
    vault.write_chunks(rid, {0: b"x" * CHUNK_SIZE}, CHUNK_SIZE + 5)
    assert held == [False, False]


def test_repair_leaves_no_chunk_of_a_dropped_record(vault, vault_path):
    from memvault.errors import VaultDamaged

    vault.put("big.bin", os.urandom(3 * CHUNK_SIZE))
    vault.put("keep.md", b"kept")
    rid = vault.record_id("big.bin")
    vault.close()
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.delete(rid, db=dbs["keys"])  # its data key gone: the record cannot be read
    rawvault.drop_snapshot(vault_path)  # so that the unlock reads every record
    with pytest.raises(VaultDamaged):
        reopen(vault_path)
    with reopen(vault_path, repair=True) as v:
        v.repair(accept_unverified=True)
    assert chunk_values(vault_path) == {}
    with reopen(vault_path, readonly=True) as v:
        assert v.get("keep.md") == b"kept"


def test_a_compaction_keeps_a_files_chunks_in_order_in_the_file(vault, vault_path):
    """Chunk keys are keyed hashes (random order): copied in key order, a large
    file's chunks would be scattered over the file, and a cold read of it would
    read other files' chunks ahead (store._in_place)."""

    def places() -> list[int]:
        vault_bytes = vault_path.read_bytes()
        keys = vault._bodies.chunk_keys_of(vault._tree.of(rid))
        with vault._store.read() as txn:  # the vault is open: through its own environment
            return [vault_bytes.index(bytes(txn.get(key, db="chunks")[:64])) for key in keys]

    rid = None
    for name in ("a.bin", "big.bin", "z.bin"):  # chunks of other files around it
        vault.put(name, os.urandom(8 * CHUNK_SIZE))
        rid = vault.record_id("big.bin") if name == "big.bin" else rid
    vault.put("a.bin", b"replaced: a compaction is owed")
    written = places()
    assert written == sorted(written), "written one after the other"
    vault.compact()
    assert not vault.compaction_owed
    compacted = places()
    assert compacted == sorted(compacted)
    assert compacted[-1] - compacted[0] < 8 * (CHUNK_SIZE + 4096), "and together"
