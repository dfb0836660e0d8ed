"""A full disk and an interrupted shred: clear errors, nothing lost, nothing left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from memvault import errors
from memvault.vault import Vault
from memvault.vault import journal as journal_module
from memvault.vault import store as store_module
from memvault.vault.bodies import CHUNK_SIZE
from memvault.vault.journal import journal_path
from memvault.vault.records import FILE

from .. import rawvault
from ..conftest import (
    FAST_KDF,
    PASSPHRASE,
    assert_one_line_error,
    reopen,
    run_cli,
    small_disk,
)


@pytest.fixture
def tiny_disk(tmp_path):
    with small_disk(tmp_path / "tiny", "700k") as mountpoint:
        yield mountpoint


def test_full_disk_is_a_clear_error_and_loses_nothing(tiny_disk):
    path = tiny_disk / "memory.vault"
    stored = {}
    with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        with pytest.raises(errors.DiskFull):
            for i in range(10_000):
                data = os.urandom(3000)
                vault.put(f"n/{i}.md", data)
                stored[f"n/{i}.md"] = data
        assert len(stored) > 20
        for name, data in stored.items():
            assert vault.get(name) == data
    result = run_cli("put", "one-more.md", vault=path, input=os.urandom(50_000))
    assert "disk holding" in assert_one_line_error(result)
    with reopen(path) as again:
        assert len(again) == len(stored)
        assert again.get("n/0.md") == stored["n/0.md"]


def test_compaction_owed_by_a_killed_session_happens_next_time(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    script = textwrap.dedent(
        """
        import os, sys
        from memvault.vault import Vault
        v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None)
        for i in range(20):
            v.put(f"n/{i}.md", f"note {i} ".encode() * 50)
        store = v._store
        with store.read() as txn:
            rid = v._tree.by_path["n/3.md"].record_id
            value = bytes(txn.get(rid, db="records"))
            wrapped = bytes(txn.get(rid, db="keys"))
        v.delete("n/3.md")
        sys.stdout.buffer.write(value.hex().encode() + b" " + wrapped.hex().encode() + b"\\n")
        sys.stdout.flush()
        os.kill(os.getpid(), 9)  # die before compacting
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(vault_path), PASSPHRASE.decode()],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL
    value_hex, wrapped_hex = proc.stdout.decode().split()
    value, wrapped = bytes.fromhex(value_hex), bytes.fromhex(wrapped_hex)
    assert value[60:92] in vault_path.read_bytes(), "the shredded bytes are still there"
    with reopen(vault_path, readonly=True) as ro:
        assert not ro.exists("n/3.md")
        assert ro.compaction_owed
    locked = run_cli("lock", vault=vault_path)  # nothing is mounted, but a shred is unfinished
    assert "still in its file" in assert_one_line_error(locked)
    assert "pending shreds" in run_cli("status", vault=vault_path, passphrase=None).stdout.decode()
    with reopen(vault_path) as again:  # the next writer finishes the shred as it opens
        assert not again.pending_shreds and not again.compaction_owed
        data = vault_path.read_bytes()
    for i in range(len(value) - 16):
        assert value[i : i + 16] not in data
    for i in range(len(wrapped) - 16):
        assert wrapped[i : i + 16] not in data
    with rawvault.raw(vault_path) as (txn, dbs):
        assert txn.get(b"compaction-owed", db=dbs["state"]) is None
    assert run_cli("lock", vault=vault_path).returncode == 0


def test_rm_works_on_a_full_disk_and_lock_says_the_shred_is_unfinished(tiny_disk):
    path = tiny_disk / "memory.vault"
    Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    vault = reopen(path, journal=True)  # as the mount daemon: changes go to the journal
    names = []
    with pytest.raises(errors.DiskFull):
        for i in range(10_000):
            vault.put(f"n/{i}.md", os.urandom(3000))
            names.append(f"n/{i}.md")
    with pytest.raises(errors.DiskFull):
        vault.put("one-more.md", os.urandom(3000))
    vault.delete(names[0])  # a shred frees space: it must work on a full disk
    assert not vault.exists(names[0])
    with pytest.raises((errors.CompactionPending, errors.DiskFull)):
        vault.close()  # no room to move the journal into the file, or for a compacted copy
    locked = run_cli("lock", vault=path)
    assert "still in its file" in assert_one_line_error(locked)
    with reopen(path, readonly=True) as ro:
        assert not ro.exists(names[0]) and ro.exists(names[1])


def test_a_new_file_whose_first_write_fills_the_disk_stays_an_empty_file(tiny_disk, monkeypatch):
    """The write is refused (DiskFull) and the new file is kept to be stored
    empty, not lost between the tree and the store."""
    monkeypatch.setattr(store_module, "ROOM_BYTES", 0)  # staged even on this tiny disk
    path = tiny_disk / "memory.vault"
    Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(path, journal=True) as vault:
        record_id, _ = vault.create_in(None, "new.md", FILE, mode=0o644, opened=True)
        with pytest.raises(errors.DiskFull):
            chunks = {i: os.urandom(CHUNK_SIZE) for i in range(32)}  # 2 MiB on 700 KiB
            vault.write_chunks(record_id, chunks, 32 * CHUNK_SIZE)
        assert vault.get_record(record_id) == b""
        vault.write_chunks(record_id, {0: b"small enough"}, 12)
    with reopen(path) as again:
        assert again.get("new.md") == b"small enough"


def test_creating_a_file_on_a_full_disk_fails_at_once(tiny_disk):
    """Near a full disk a new file is stored when created, not with its first
    write: a full disk fails the create itself, as on any file system."""
    path = tiny_disk / "memory.vault"
    with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        with pytest.raises(errors.DiskFull):
            for i in range(10_000):
                vault.put(f"n/{i}.md", os.urandom(3000))
        with pytest.raises(errors.DiskFull):
            for i in range(100):
                vault.create_in(None, f"new-{i}.md", FILE, mode=0o644, opened=True)
        assert not vault._writer.staged


def test_zeros_ahead_of_the_journal_that_do_not_fit_are_left_out(tiny_disk, monkeypatch):
    """Zeros written ahead of the journal's entries only make fsync cheaper: on a
    disk without room for them the journal goes on without."""
    monkeypatch.setattr(journal_module, "_ROOM_FOR_ZEROS", 0)  # try them all the same
    monkeypatch.setattr(journal_module, "PREALLOCATED", 1 << 20)  # more than the disk holds
    path = tiny_disk / "memory.vault"
    Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(path, journal=True) as vault:
        vault.put("a.md", b"journaled all the same")
        vault.sync()  # as fsync() does: zeros ahead, which do not fit
        assert journal_path(path).stat().st_size < 1 << 20  # cut back when they failed
        vault.put("b.md", b"and after")
    with reopen(path) as again:
        assert again.get("a.md") == b"journaled all the same"
        assert again.get("b.md") == b"and after"
