"""Old versions and shredded memories leave the file: after edits too, and even
when the daemon is killed right after `rm` (regression tests for "edited-away
secrets stay in the file" and "shreds left unfinished while lock reports
success")."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from memvault.vault import Vault

from .. import rawvault
from ..conftest import FAST_KDF, PASSPHRASE, assert_nowhere, busy_mount, reopen
from ..fsutil import force_lock, mounted


def _windows(secret: bytes, size: int = 16):
    return (secret[i : i + size] for i in range(0, len(secret) - size + 1))


def assert_gone(path, secret: bytes) -> None:
    data = path.read_bytes()
    for window in _windows(secret):
        assert window not in data, "bytes of an old version are still in the vault file"


def test_edited_away_secret_leaves_the_file_at_lock(vault_path):
    vault = Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None)
    vault.put("env.md", b"GITHUB_TOKEN=ghp_" + os.urandom(20).hex().encode() + b"\n" * 200)
    old = rawvault.record_for(vault_path, vault, "env.md")[1]
    vault.put("env.md", b"GITHUB_TOKEN=<moved to the keychain>\n" * 5)
    assert vault.compaction_owed
    vault.close()
    assert_gone(vault_path, old)
    with reopen(vault_path) as again:
        assert again.get("env.md").startswith(b"GITHUB_TOKEN=<moved")


def test_edited_away_secret_leaves_the_file_after_a_quiet_moment(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    vault = reopen(vault_path, compact_delay=0.3, journal=True)
    try:
        vault.put("env.md", b"PASSWORD=" + os.urandom(30).hex().encode())
        vault.sync()
        old = rawvault.record_for(vault_path, vault, "env.md")[1]
        vault.rename("env.md", "renamed-env.md")  # old metadata (the old path) goes too
        vault.put("renamed-env.md", b"PASSWORD=[gone]")
        deadline = time.monotonic() + 10
        while vault.compaction_owed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not vault.compaction_owed
        assert_gone(vault_path, old)
    finally:
        vault.close()


def test_shred_with_daemon_killed_right_after_rm_is_finished_by_the_next_unlock(tmp_path):
    with mounted(tmp_path) as mount:
        (mount.root / "secret.md").write_bytes(b"launch codes " * 100)
        assert mount.lock().returncode == 0  # now in LMDB, with the ciphertext known
        with rawvault.raw(mount.vault) as (txn, dbs):
            values = [bytes(v) for _, v in txn.cursor(dbs["records"])]
        assert mount.unlock().returncode == 0
        os.unlink(mount.root / "secret.md")
        os.kill(mount.daemon_pid(), signal.SIGKILL)  # within moments of the rm
        time.sleep(0.2)
        locked = mount.lock()
        assert locked.returncode == 1, locked
        message = locked.stderr.decode()
        assert "still in its file" in message and "Traceback" not in message
        status = mount.cli("status").stdout.decode()
        assert "pending shreds" in status
        assert mount.unlock().returncode == 0  # the next writer compacts as it opens
        assert not (mount.root / "secret.md").exists()
        for value in values:  # the file record's ciphertext is gone
            assert_gone(mount.vault, value)
        run_dir = Path(mount.env["XDG_RUNTIME_DIR"])
        assert_nowhere([b"launch codes", b"secret.md"], mount.vault.parent, run_dir)
        assert mount.lock().returncode == 0
        force_lock(mount)


def test_a_session_that_changed_nothing_does_not_rewrite_the_file(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(vault_path) as v:
        v.put("a.md", b"a")
    for options in ({"journal": True}, {}):
        inode = vault_path.stat().st_ino
        with reopen(vault_path, **options):
            pass
        assert vault_path.stat().st_ino == inode, f"rewritten by an idle session {options}"


def test_the_journal_moves_into_lmdb_in_a_lull(vault):
    """Moving the journal into LMDB waits for a pause in the mount's requests
    (at most FLUSH_PATIENCE), then happens without being asked."""
    from memvault.vault.housekeeping import FLUSH_DELAY, FLUSH_PATIENCE

    vault_path = vault.path
    vault.close()
    vault = reopen(vault_path, compact_delay=None, journal=True)
    try:
        with busy_mount(vault, FLUSH_DELAY + FLUSH_PATIENCE * 0.6):
            vault.put("a.md", b"journaled first")
            time.sleep(FLUSH_DELAY + FLUSH_PATIENCE * 0.4)
            assert vault._store.journaled_entries, "flushed while the mount was busy"
        deadline = time.monotonic() + 10
        while vault._store.journaled_entries and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not vault._store.journaled_entries, "never flushed after the requests stopped"
    finally:
        vault.close()
    assert reopen(vault_path).get("a.md") == b"journaled first"


def test_a_compaction_waiting_for_a_lull_does_not_hold_up_an_urgent_flush(vault, monkeypatch):
    """While requests keep coming, a due compaction waits (up to its patience);
    a journal grown past FLUSH_BYTES meanwhile is moved into LMDB at once."""
    from memvault.vault import housekeeping

    monkeypatch.setattr(housekeeping, "FLUSH_BYTES", 64 << 10)
    vault_path = vault.path
    vault.close()
    vault = reopen(vault_path, compact_delay=0.2, journal=True)
    try:
        with busy_mount(vault, 4.0):
            vault.put("old.md", b"x" * 100)
            vault.delete("old.md")  # a compaction is owed, due in 0.2 s: it waits for a lull
            time.sleep(1.0)
            # Past the (lowered) FLUSH_BYTES, the last write alone too: whenever
            # the flush thread gets to run, nothing is left below the mark.
            for i, kib in enumerate([40, 40, 40, 80]):
                vault.put(f"big-{i}.md", os.urandom(kib << 10))
            deadline = time.monotonic() + 2.0
            while vault._store.journaled_entries and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not vault._store.journaled_entries, "the urgent flush waited for the lull"
            assert vault.compaction_owed, "the compaction still waits for its lull"
    finally:
        vault.close()
