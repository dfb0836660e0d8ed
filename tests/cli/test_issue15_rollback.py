"""Issue 15, rollback detection: a vault replaced by an older copy of itself is
refused at the next open, naming both generations; --accept-rollback opens it
on purpose and from then on it is the one remembered."""

from __future__ import annotations

import re
import shutil

from ..conftest import assert_one_line_error, run_cli
from ..rawvault import journal_entry_ends
from .test_cli import init


def put(vault_path, name: str, data: bytes) -> None:
    done = run_cli("put", name, vault=vault_path, input=data)
    assert done.returncode == 0, done.stderr


def test_an_older_copy_of_the_vault_is_refused_until_accepted(vault_path, tmp_path):
    init(vault_path)
    put(vault_path, "a.md", b"first\n")
    older = tmp_path / "older.vault"
    shutil.copy(vault_path, older)
    put(vault_path, "b.md", b"second\n")
    shutil.copy(older, vault_path)  # an older copy put back over the vault

    refused = run_cli("get", "a.md", vault=vault_path)
    assert refused.returncode == 7
    message = assert_one_line_error(refused)
    found, seen = map(
        int, re.search(r"generation (\d+), seen at generation (\d+)", message).groups()
    )
    assert found < seen and "--accept-rollback" in message
    assert run_cli("ls", vault=vault_path).returncode == 7, "every command refuses it"

    accepted = run_cli("get", "a.md", "--accept-rollback", vault=vault_path)
    assert accepted.returncode == 0 and accepted.stdout == b"first\n"
    again = run_cli("ls", vault=vault_path)
    assert again.returncode == 0 and again.stdout == b"a.md\n", "now the remembered one"


def test_a_machine_that_never_saw_the_vault_says_so_once(vault_path, tmp_path, monkeypatch):
    init(vault_path)
    put(vault_path, "a.md", b"first\n")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "another-machine"))
    first = run_cli("get", "a.md", vault=vault_path)
    assert (
        first.returncode == 0 and "First use of this vault on this machine" in first.stderr.decode()
    )
    second = run_cli("get", "a.md", vault=vault_path)
    assert second.returncode == 0 and "First use" not in second.stderr.decode()


def test_the_record_holds_no_secret_and_a_forged_one_is_ignored(vault_path, machine_state):
    init(vault_path)
    put(vault_path, "secret-name.md", b"a memory that must not leak\n")
    records = list(machine_state.glob("memvault/*.seen"))
    assert len(records) == 1
    text = records[0].read_text()
    assert "secret-name" not in text and "must not leak" not in text
    forged = re.sub(r'"generation": \d+', '"generation": 999999', text)
    records[0].write_text(forged)  # a higher generation without the key's MAC
    done = run_cli("get", "secret-name.md", vault=vault_path)
    assert done.returncode == 0, "a record that does not verify is no record"


def test_unlock_refuses_an_older_copy_and_accepts_it_on_purpose(tmp_path):
    from ..fsutil import force_lock, mounted

    with mounted(tmp_path) as m:
        (m.root / "a.md").write_bytes(b"first\n")
        assert m.lock().returncode == 0
        older = tmp_path / "older.vault"
        shutil.copy(m.vault, older)
        assert m.unlock().returncode == 0
        (m.root / "b.md").write_bytes(b"second\n")
        assert m.lock().returncode == 0
        shutil.copy(older, m.vault)
        refused = m.unlock()
        assert refused.returncode == 7 and not m.is_mounted()
        assert "seen at generation" in assert_one_line_error(refused)
        accepted = m.unlock("--accept-rollback")
        assert accepted.returncode == 0, accepted.stderr
        assert sorted(p.name for p in m.root.iterdir()) == ["a.md"]
        trail = m.cli("audit").stdout.decode()
        assert "accept-rollback" in trail and "seen" in trail
        force_lock(m)


def test_journal_entries_cut_from_a_killed_daemons_journal_are_detected(tmp_path):
    """The peers' blind spot: the last changes of a killed session dropped from the
    end of its journal. Within the boot, the journal's MACed header says how far
    it went; an older vault and journal put back together fall behind the
    generation this machine recorded."""
    import os
    import signal
    import time

    from memvault.vault.journal import journal_path

    from ..fsutil import force_lock, mounted

    with mounted(tmp_path) as m:
        for i in range(5):  # journaled; killed before any lull lets them into LMDB
            (m.root / f"n{i}.md").write_bytes(f"note {i}\n".encode())
        os.kill(m.daemon_pid(), signal.SIGKILL)
        journal = journal_path(m.vault)
        data = journal.read_bytes()
        ends = journal_entry_ends(data)
        assert len(ends) >= 5
        journal.write_bytes(data[: ends[-3]])  # the last changes cut off

        cut = m.unlock()
        assert cut.returncode == 7 and not m.is_mounted()
        message = cut.stderr.decode().strip().splitlines()[-1]  # after the stale-mount note
        assert (
            "journal" in message and "shortened" in message and "--accept-journal-loss" in message
        )
        assert m.unlock("--accept-journal-loss").returncode == 0
        kept = sorted(p.name for p in m.root.iterdir())
        assert kept and kept == [f"n{i}.md" for i in range(len(kept))] and len(kept) < 5

        # An older copy of the vault and its journal, taken while it was mounted.
        (m.root / "early.md").write_bytes(b"early\n")
        time.sleep(1.5)  # a lull: the journal moves into the vault file, recorded here
        older = {p: p.read_bytes() for p in (m.vault, journal_path(m.vault)) if p.exists()}
        for i in range(3):
            (m.root / f"late{i}.md").write_bytes(b"late\n")
        time.sleep(1.5)
        os.kill(m.daemon_pid(), signal.SIGKILL)
        journal_path(m.vault).unlink(missing_ok=True)
        for path, data in older.items():
            path.write_bytes(data)
        refused = m.unlock()
        assert refused.returncode == 7 and not m.is_mounted()
        assert "seen at generation" in refused.stderr.decode().strip().splitlines()[-1]
        force_lock(m)


def test_another_copy_changed_elsewhere_to_the_same_generation_is_refused(vault_path, tmp_path):
    init(vault_path)
    put(vault_path, "a.md", b"first\n")
    travelling = tmp_path / "travelling.vault"
    shutil.copy(vault_path, travelling)
    put(vault_path, "b.md", b"written here\n")
    elsewhere = {"XDG_STATE_HOME": str(tmp_path / "another-machine")}
    done = run_cli("put", "c.md", vault=travelling, input=b"written elsewhere\n", env=elsewhere)
    assert done.returncode == 0, done.stderr
    shutil.copy(travelling, vault_path)  # the other copy comes back, as far along as this one

    refused = run_cli("ls", vault=vault_path)
    assert refused.returncode == 7
    message = assert_one_line_error(refused)
    assert "not the copy this machine last saw" in message and "--accept-rollback" in message
    accepted = run_cli("ls", "--accept-rollback", vault=vault_path)
    assert accepted.returncode == 0 and accepted.stdout == b"a.md\nc.md\n"
