"""The journal: closed changes survive a killed writer without an fsync each."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from memvault import errors
from memvault.journal import journal_path
from memvault.vault import Vault

from .conftest import FAST_KDF, PASSPHRASE, assert_nowhere, reopen, run_cli

WRITER = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    for i in range(40):
        v.put(f"j/{i}.md", f"journaled {sys.argv[3]} {i}".encode() * 20)
    v.delete("j/0.md")
    v.rename("j/1.md", "j/renamed.md")
    print("done", flush=True)
    os.kill(os.getpid(), 9)  # before the journal is moved into LMDB
    """
)


def killed_writer(vault_path, marker="m"):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(vault_path), PASSPHRASE.decode(), marker],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL and done.stdout == b"done\n"
    assert journal_path(vault_path).stat().st_size > 0


def expected(i, marker="m"):
    return f"journaled {marker} {i}".encode() * 20


def test_killed_writer_loses_nothing_and_readers_see_it(vault_path):
    killed_writer(vault_path)
    with reopen(vault_path, readonly=True) as ro:  # replayed in memory only
        assert ro.get("j/39.md") == expected(39)
        assert not ro.exists("j/0.md") and ro.get("j/renamed.md") == expected(1)
    assert journal_path(vault_path).stat().st_size > 0
    with reopen(vault_path) as again:  # replayed into LMDB, journal emptied
        assert len(again) == 39
        assert again.get("j/2.md") == expected(2)
    assert not journal_path(vault_path).exists()
    with reopen(vault_path) as again:
        assert again.get("j/renamed.md") == expected(1)


def test_journal_holds_no_plaintext(vault_path):
    marker = "JOURNALMARKER0x5eed"
    killed_writer(vault_path, marker)
    assert_nowhere([marker.encode(), b"renamed.md", b"j/39.md"], vault_path.parent)


def test_torn_tail_is_ignored_and_forged_entry_refused(vault_path):
    killed_writer(vault_path)
    journal = journal_path(vault_path)
    data = journal.read_bytes()
    journal.write_bytes(data[:-7])  # a power cut in the middle of the last entry
    with reopen(vault_path, readonly=True) as ro:
        assert ro.get("j/38.md") == expected(38)
    forged = bytearray(data)
    forged[40] ^= 1  # inside the first entry
    journal.write_bytes(bytes(forged))
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)
    journal.write_bytes(data)
    line = run_cli("get", "j/5.md", vault=vault_path)
    assert line.returncode == 0 and line.stdout == expected(5)


def test_journaled_vault_flushes_and_shreds(vault_path):
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None):
        pass
    with reopen(vault_path, journal=True) as v:
        v.put("a.md", b"A" * 500)
        v._store.flush()
        rid = v.record_id("a.md")
        with v._store.read() as txn:
            value = bytes(txn.get(rid, db=v._store.dbs["records"]))
        v.put("b.md", b"B" * 500)
        assert journal_path(vault_path).stat().st_size > 0
        v.delete("a.md")
    assert not journal_path(vault_path).exists()
    data = vault_path.read_bytes()
    for i in range(len(value) - 16):
        assert value[i : i + 16] not in data
    with reopen(vault_path) as again:
        assert again.get("b.md") == b"B" * 500 and not again.exists("a.md")
