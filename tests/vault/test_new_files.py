"""A new file the mount's create holds open is stored with its first write (one
commit for both), or at its close, fsync or lock; whatever happens to it before
then stores a consistent vault."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from memvault.vault import Vault
from memvault.vault.records import DIRECTORY, FILE
from memvault.vault.sealing import POOLED_RECORDS

from ..conftest import FAST_KDF, PASSPHRASE, reopen

WRITER = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    from memvault.vault.records import FILE
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    closed, _ = v.create_in(None, "closed-empty.md", FILE, mode=0o640, opened=True)
    v.store_new_files()  # what the mount does at its close
    written, _ = v.create_in(None, "written.md", FILE, mode=0o644, opened=True)
    v.write_chunks(written, {0: b"first write"}, 11)
    print("done", flush=True)
    os.kill(os.getpid(), 9)  # before the journal is moved into LMDB
    """
)


def journal_vault(vault_path) -> Vault:
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    return reopen(vault_path, journal=True)


def test_a_new_file_and_its_first_write_are_one_commit(vault_path):
    with journal_vault(vault_path) as v:
        before = v._store.next_seq
        record_id, _ = v.create_in(None, "a.md", FILE, mode=0o644, opened=True)
        v.write_chunks(record_id, {0: b"hello"}, 5)
        assert v._store.next_seq == before + 1
        assert v.get("a.md") == b"hello"
    with reopen(vault_path) as again:
        assert again.get("a.md") == b"hello"
        assert again.stat("a.md").mode == 0o644


def test_a_new_file_not_held_open_is_stored_at_once(vault_path):
    """mknod, the CLI and the API: nobody will write or close it, so no staging."""
    with journal_vault(vault_path) as v:
        before = v._store.next_seq
        v.create_in(None, "made.md", FILE, mode=0o644)
        assert v._store.next_seq == before + 1 and not v._writer.staged


def test_a_closed_new_file_and_a_written_one_survive_a_killed_writer(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(vault_path), PASSPHRASE.decode()],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL and done.stdout == b"done\n", done.stderr
    with reopen(vault_path) as again:
        assert again.get("closed-empty.md") == b""
        assert again.stat("closed-empty.md").mode == 0o640
        assert again.get("written.md") == b"first write"


def test_new_files_changed_before_they_are_stored(vault_path):
    with journal_vault(vault_path) as v:
        sub, _ = v.create_in(None, "sub", DIRECTORY, mode=0o755)
        chmodded, _ = v.create_in(sub, "chmod.md", FILE, mode=0o644, opened=True)
        v.set_record_attrs(chmodded, mode=0o600)
        moved, _ = v.create_in(sub, "old-name.md", FILE, mode=0o644, opened=True)
        v.move(sub, "old-name.md", None, "new-name.md")
        cut, _ = v.create_in(None, "extended.md", FILE, mode=0o644, opened=True)
        v.resize_record(cut, 10)
        gone, _ = v.create_in(None, "gone.md", FILE, mode=0o644, opened=True)
        v.remove_record(gone, directory=False)
        orphan, _ = v.create_in(None, "orphan.md", FILE, mode=0o644, opened=True)
        v.orphan_record(orphan)  # unlinked while open
        v.remove_record(orphan, directory=False)  # its last close
        unwritten, _ = v.create_in(None, "never-written.md", FILE, mode=0o644, opened=True)
        assert v.get_record(unwritten) == b""
        assert v.read_chunk(unwritten, 0) == b""
    with reopen(vault_path) as again:  # opens: the integrity sum matches what is stored
        assert again.stat("sub/chmod.md").mode == 0o600
        assert again.get("new-name.md") == b""
        assert not again.exists("sub/old-name.md")
        assert again.get("extended.md") == bytes(10)
        assert not again.exists("gone.md") and not again.exists("orphan.md")
        assert again.get("never-written.md") == b""  # stored at lock
        assert len(again) == 4


def test_new_files_take_the_keys_made_ahead_and_keep_them_after_lock(vault_path):
    """Keys made at the mount's lulls (Vault.prepare_records) are as good as keys
    made at once: each file gets its own, and its content opens after a lock."""
    with journal_vault(vault_path) as v:
        v.prepare_records(3)
        prepared = list(v._sealer._prepared)
        assert len(prepared) == 3 and len({rid for rid, _, _ in prepared}) == 3
        made = [v.create_in(None, f"n{i}.md", FILE, mode=0o644, opened=True)[0] for i in range(4)]
        for i, record_id in enumerate(made):
            v.write_chunks(record_id, {0: f"note {i}".encode()}, 6)
        assert set(made[:3]) == {rid for rid, _, _ in prepared}  # the fourth made at once
        assert not v._sealer._prepared
        v.prepare_records(2)
        left = [key for _, key, _ in v._sealer._prepared]
    assert all(not any(key) for key in left), "keys made ahead outlived the lock"
    with reopen(vault_path) as again:
        assert [again.get(f"n{i}.md") for i in range(4)] == [f"note {i}".encode() for i in range(4)]
        keys = {bytes(again._tree.of(rid).data_key) for rid in made}
        assert len(keys) == 4


def test_keys_made_ahead_stop_at_the_pool_size(vault_path):
    with journal_vault(vault_path) as v:
        v._sealer.prepare_records(POOLED_RECORDS - 1)
        v.prepare_records(10)
        assert len(v._sealer._prepared) == POOLED_RECORDS
