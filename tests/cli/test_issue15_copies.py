"""Issue 15, signed copies, backup and restore: `lock --sign` and `backup --sign`
write FILE.sig, `verify` checks it without the passphrase (any flipped byte
fails, another vault's key is unknown), `backup` copies a consistent vault
mounted or not, and `restore` checks a backup and puts it in place as a
deliberate rollback."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat

from memvault.cli import main as cli_main

from ..conftest import assert_one_line_error, reopen, run_cli
from ..rawvault import flip_in_file, record_for, split
from .test_cli import init


def put(vault_path, name: str, data: bytes) -> None:
    done = run_cli("put", name, vault=vault_path, input=data)
    assert done.returncode == 0, done.stderr


def sign_locked(vault_path) -> str:
    """Sign the locked vault; return the fingerprint `status` shows afterwards."""
    done = run_cli("lock", "--sign", vault=vault_path)
    assert done.returncode == 0, done.stderr
    assert "Signed it" in done.stderr.decode()
    status = json.loads(run_cli("status", "--json", vault=vault_path).stdout)
    return status["signing_key"]


def verify(path, *extra: str, vault=None):
    """`memvault verify` with no passphrase anywhere in reach."""
    return run_cli("verify", str(path), *extra, vault=vault, passphrase=None)


def test_a_signed_vault_verifies_without_the_passphrase_and_every_flip_fails(vault_path, tmp_path):
    init(vault_path)
    put(vault_path, "notes/a.md", b"a memory worth signing\n")
    fingerprint = sign_locked(vault_path)
    assert fingerprint and len(fingerprint.replace("-", "")) == 32
    sig = vault_path.with_name(vault_path.name + ".sig")
    assert stat.S_IMODE(sig.stat().st_mode) == 0o600
    assert b"worth signing" not in sig.read_bytes() and b"notes" not in sig.read_bytes()

    ok = verify(vault_path)
    assert ok.returncode == 0, ok.stderr
    assert fingerprint in ok.stderr.decode() and "this machine" in ok.stderr.decode()
    assert verify(vault_path, "--key", fingerprint.upper()).returncode == 0

    original = vault_path.read_bytes()
    copy = tmp_path / "flipped.vault"
    shutil.copy(sig, copy.with_name(copy.name + ".sig"))
    rng = random.Random(15)
    for n, offset in enumerate(rng.sample(range(len(original)), 200)):
        flipped = bytearray(original)
        flipped[offset] ^= 1 << rng.randrange(8)
        copy.write_bytes(flipped)
        if n < 3:  # the command itself, as a user runs it
            done = verify(copy)
            assert done.returncode == 7, (offset, done.stderr)
            assert "changed after it was signed" in assert_one_line_error(done)
        else:  # the same command in this process: 200 subprocesses would take minutes
            assert cli_main(["verify", str(copy)]) == 7, offset
    copy.write_bytes(original)
    assert verify(copy).returncode == 0, "the unchanged bytes pass under any name"

    doc = json.loads(sig.read_text())  # the statement altered: the signature fails
    doc["generation"] += 1
    copy.with_name(copy.name + ".sig").write_text(json.dumps(doc))
    altered = verify(copy)
    assert altered.returncode == 7 and "signature itself" in assert_one_line_error(altered)


def test_a_signature_by_another_vaults_key_is_unknown(vault_path, tmp_path):
    from memvault.signing import sign_file

    init(vault_path)
    put(vault_path, "a.md", b"mine\n")
    mine = sign_locked(vault_path)
    other = tmp_path / "other" / "other.vault"
    init(other)
    put(other, "b.md", b"theirs\n")
    theirs = sign_locked(other)
    assert theirs != mine
    # The other vault's key signs this vault's bytes, naming this vault.
    forged = tmp_path / "forged.vault"
    shutil.copy(vault_path, forged)
    vault_id = json.loads(vault_path.with_name("memory.vault.sig").read_text())["vault_id"]
    assert sign_file(forged, _seed_of(other), bytes.fromhex(vault_id), 99) == theirs

    unknown = verify(forged)
    assert unknown.returncode == 7
    message = assert_one_line_error(unknown)
    assert "does not know" in message and theirs in message
    assert verify(forged, "--key", mine).returncode == 7, "nor is it the key given"
    assert verify(forged, "--key", theirs).returncode == 0, "unless that key is vouched for"


def _seed_of(path) -> bytearray:
    from memvault.vault import Vault

    from ..conftest import PASSPHRASE

    with Vault.open(path, PASSPHRASE) as vault:
        return vault.signing_seed()


def test_backup_while_mounted_is_consistent_signed_and_restores_as_a_deliberate_rollback(
    tmp_path,
):
    from ..fsutil import mounted

    backup = tmp_path / "backups" / "monday.vault"
    backup.parent.mkdir()
    with mounted(tmp_path) as m:
        (m.root / "notes").mkdir()
        (m.root / "notes" / "a.md").write_bytes(b"alpha kept in the backup\n")
        with open(m.root / "b.md", "wb", buffering=0) as f:  # written, not closed: in the copy
            f.write(b"bravo kept too\n")
            done = m.cli("backup", str(backup), "--sign")
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().strip() == str(backup)
        (m.root / "c.md").write_bytes(b"charlie came later\n")
        status = json.loads(m.cli("status", "--json").stdout)
        assert status["signing_key"] and status["signing_key"] in done.stderr.decode()
        signed_lock = m.cli("lock", "--sign")
        assert signed_lock.returncode == 0, signed_lock.stderr
        assert not m.is_mounted()

        assert stat.S_IMODE(backup.stat().st_mode) == 0o600
        raw = backup.read_bytes()
        for plain in (b"alpha", b"bravo", b"notes", b"a.md"):
            assert plain not in raw
        assert verify(backup).returncode == 0
        assert verify(m.vault).returncode == 0, "lock --sign through the daemon"

        busy = m.unlock()
        assert busy.returncode == 0
        refused = m.cli("restore", str(backup))
        assert refused.returncode != 0 and "lock it before" in assert_one_line_error(refused)
        assert m.lock().returncode == 0

        restored = m.cli("restore", str(backup))
        assert restored.returncode == 0, restored.stderr
        assert "signed by" in restored.stderr.decode()
        aside = list(m.vault.parent.glob("memory.vault.before-restore-*"))
        assert len(aside) == 1, "the replaced vault is kept"
        listed = m.cli("ls", "-R")
        assert listed.returncode == 0, listed.stderr  # no --accept-rollback needed
        assert sorted(listed.stdout.decode().split()) == ["b.md", "notes/", "notes/a.md"]
        assert m.cli("get", "b.md").stdout == b"bravo kept too\n"
        trail = [json.loads(line) for line in m.cli("audit", "--json").stdout.splitlines()]
        assert [e["op"] for e in trail[-2:]] == ["accept-rollback", "restore"]
        assert trail[-1]["detail"] == f"from {backup}" and trail[-1]["caller"]["name"] == "restore"
        assert any(e["op"] == "backup" for e in trail), "the backup, in the trail it copied"
        assert m.unlock().returncode == 0, "the mount opens the restored vault too"
        assert (m.root / "notes" / "a.md").read_bytes() == b"alpha kept in the backup\n"


def test_backup_of_a_locked_vault_and_what_restore_refuses(vault_path, tmp_path):
    init(vault_path)
    put(vault_path, "a.md", b"first\n")
    into = tmp_path / "backups"
    into.mkdir()
    done = run_cli("backup", str(into), vault=vault_path)
    assert done.returncode == 0, done.stderr
    (copy,) = into.iterdir()
    assert copy.name.startswith("memory-") and copy.suffix == ".vault"
    assert done.stdout.decode().strip() == str(copy)
    again = run_cli("backup", str(copy), vault=vault_path)
    assert again.returncode == 2 and "never writes a copy over" in assert_one_line_error(again)
    unsigned = verify(copy)
    assert unsigned.returncode == 0 and "not signed" in unsigned.stderr.decode()

    damaged = tmp_path / "damaged.vault"  # a record's body flipped: only the full check sees it
    shutil.copy(copy, damaged)
    with reopen(damaged, readonly=True) as vault:
        _, value, _ = record_for(damaged, vault, "a.md")
    body = split(value)[1]
    flip_in_file(damaged, body, len(body) // 2)
    assert verify(damaged).returncode == 0, "unsigned: the structure alone still holds"
    refused = run_cli("restore", str(damaged), vault=vault_path)
    assert refused.returncode == 7, refused.stderr
    assert run_cli("get", "a.md", vault=vault_path).stdout == b"first\n", "nothing replaced"

    other = tmp_path / "other.vault"
    init(other)
    foreign = run_cli("restore", str(other), vault=vault_path)
    assert foreign.returncode == 2 and "another vault" in assert_one_line_error(foreign)

    fresh = tmp_path / "elsewhere" / "restored.vault"
    placed = run_cli("restore", str(copy), vault=fresh)
    assert placed.returncode == 0, placed.stderr
    assert run_cli("get", "a.md", vault=fresh).stdout == b"first\n"
    assert os.stat(fresh).st_mode & 0o077 == 0

    broken = tmp_path / "broken" / "memory.vault"  # a vault too damaged to name itself
    broken.parent.mkdir()
    broken.write_bytes(b"\0" * 8192)
    mended = run_cli("restore", str(copy), vault=broken)
    assert mended.returncode == 0, mended.stderr
    assert run_cli("get", "a.md", vault=broken).stdout == b"first\n"
    (kept,) = broken.parent.glob("memory.vault.before-restore-*")
    assert kept.read_bytes() == b"\0" * 8192
