"""Issue 15, rollback detection: a vault replaced by an older copy of itself is
refused at the next open, naming both generations; --accept-rollback opens it
on purpose and from then on it is the one remembered."""

from __future__ import annotations

import re
import shutil

from ..conftest import assert_one_line_error, run_cli
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
        force_lock(m)
