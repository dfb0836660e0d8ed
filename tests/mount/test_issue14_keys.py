"""Issue 14 on a mounted vault: passwd, keyslot add|list|remove, 2fa enable and
the recovery key, asked of the live daemon (which checks the secret against its
own keyslots); the mount serves on, the file is compacted before the command
returns, and the next unlock takes only the new secrets."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memvault.errors import DaemonFailed
from memvault.fs import control
from memvault.keys import KeyRequest

from ..conftest import KDF_ARGS, PASSPHRASE, assert_one_line_error
from ..fsutil import Mount, mounted
from ..keyslots_util import (
    RECOVERY_KEY,
    assert_no_byte_of,
    edit_slot_params,
    found_in,
    slot_needles,
    stored_slots,
)

NEW, OTHER = b"a new passphrase", b"another passphrase"
CONTENT = b"# served throughout\n"


def cli(m: Mount, *args: str, lines: list[bytes] | None = None, **env: str):
    """The real command in the mount's environment; ``lines`` go to --passphrase-stdin."""
    full = {k: v for k, v in m.env.items() if k != "MEMVAULT_PASSPHRASE"}
    full.update(env)
    if lines is not None:
        args = (*args, "--passphrase-stdin")
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        input=b"".join(line + b"\n" for line in lines or []),
        capture_output=True,
        env=full,
        timeout=120,
        start_new_session=True,
    )


def relock_with(m: Mount, *extra: str, lines: list[bytes], **env: str):
    """Lock, then try to unlock with the given secrets (the result of the unlock)."""
    assert m.lock().returncode == 0
    return cli(m, "unlock", str(m.root), *extra, lines=lines, **env)


def test_passwd_while_mounted(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "a.md").write_bytes(CONTENT)
        old = stored_slots(m.vault)[0]
        assert found_in(old[1].wrapped_key.hex().encode(), m.vault)
        wrong = cli(m, "passwd", *KDF_ARGS, lines=[b"not it", NEW])
        assert wrong.returncode == 4 and "Wrong passphrase" in assert_one_line_error(wrong)
        done = cli(m, "passwd", *KDF_ARGS, lines=[PASSPHRASE, NEW])
        assert done.returncode == 0, done.stderr
        assert (m.root / "a.md").read_bytes() == CONTENT, "the mount serves on"
        # compacted before returning: no byte of the old slot, in the file or the journal
        assert_no_byte_of(slot_needles(*old), m.vault.parent)
        assert list(stored_slots(m.vault)) == [0]

        refused = relock_with(m, lines=[PASSPHRASE])
        assert refused.returncode == 4 and "Wrong passphrase" in assert_one_line_error(refused)
        done = cli(m, "unlock", str(m.root), lines=[NEW])
        assert done.returncode == 0, done.stderr
        assert (m.root / "a.md").read_bytes() == CONTENT
        assert_no_byte_of(slot_needles(*old), m.vault.parent)


def test_keyslot_add_list_remove_while_mounted(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "a.md").write_bytes(CONTENT)
        done = cli(m, "keyslot", "add", *KDF_ARGS, lines=[PASSPHRASE, OTHER])
        assert done.returncode == 0, done.stderr
        listing = cli(m, "keyslot", "list").stdout.decode().splitlines()
        assert [row.split()[:2] for row in listing[1:]] == [
            ["0", "passphrase"],
            ["1", "passphrase"],
        ]
        removed = stored_slots(m.vault)[0]
        last_check = cli(m, "keyslot", "remove", "0", lines=[PASSPHRASE])
        assert "another keyslot" in assert_one_line_error(last_check)
        done = cli(m, "keyslot", "remove", "0", lines=[OTHER])
        assert done.returncode == 0, done.stderr
        assert list(stored_slots(m.vault)) == [1]
        assert_no_byte_of(slot_needles(*removed), m.vault.parent)
        last = cli(m, "keyslot", "remove", "1", lines=[OTHER])
        assert "last one that opens the vault" in assert_one_line_error(last)
        # a request the CLI would never send is refused as such, and changes nothing
        sock = next((tmp_path / "run" / "memvault").glob("*.sock"))
        absurd = KeyRequest("add", bytearray(OTHER), new_secret=bytearray(NEW))
        wire = {**absurd.to_wire(), "kdf": {"t": 1, "m": 1 << 40, "p": 1}}
        with pytest.raises(DaemonFailed) as refused:
            control.ask(sock, "keys", pid=m.daemon_pid(), **wire)
        assert refused.value.exit_code == 2 and "not one it understands" in str(refused.value)
        assert list(stored_slots(m.vault)) == [1]
        assert (m.root / "a.md").read_bytes() == CONTENT

        refused = relock_with(m, lines=[PASSPHRASE])
        assert refused.returncode == 4, refused.stderr
        done = cli(m, "unlock", str(m.root), lines=[OTHER])
        assert done.returncode == 0, done.stderr


def test_2fa_enable_while_mounted_then_both_factors_are_needed(tmp_path):
    keyfile = tmp_path / "usb" / "vault.key"
    with mounted(tmp_path) as m:
        (m.root / "a.md").write_bytes(CONTENT)
        done = cli(m, "2fa", "enable", "--keyfile", str(keyfile), lines=[PASSPHRASE])
        assert done.returncode == 0, done.stderr
        assert keyfile.stat().st_size == 32
        status = cli(m, "2fa", "status").stdout.decode()
        assert status.startswith("2FA is on"), status

        alone = relock_with(m, lines=[PASSPHRASE])
        line = assert_one_line_error(alone)
        assert alone.returncode == 4 and "need a keyfile" in line and "not tried" in line, line
        assert not m.is_mounted()
        changed = tmp_path / "changed.key"
        data = bytearray(keyfile.read_bytes())
        data[0] ^= 0x80
        changed.write_bytes(bytes(data))
        wrong = cli(m, "unlock", str(m.root), "--keyfile", str(changed), lines=[PASSPHRASE])
        assert wrong.returncode == 4 and "is not the one" in assert_one_line_error(wrong)
        keyfile_only = cli(m, "unlock", str(m.root), "--keyfile", str(keyfile), lines=[b"guess"])
        assert keyfile_only.returncode == 4, keyfile_only.stderr
        assert not m.is_mounted()
        both = cli(m, "unlock", str(m.root), lines=[PASSPHRASE], MEMVAULT_KEYFILE=str(keyfile))
        assert both.returncode == 0, both.stderr
        assert (m.root / "a.md").read_bytes() == CONTENT


def test_recovery_key_while_mounted_the_forgotten_passphrase_path(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "a.md").write_bytes(CONTENT)
        done = cli(m, "recovery", "enable", *KDF_ARGS, lines=[PASSPHRASE])
        assert done.returncode == 0, done.stderr
        key = done.stdout.decode().strip()
        assert RECOVERY_KEY.match(key), key

        # locked, then unlocked with the recovery key only (no passphrase anywhere)
        done = relock_with(m, "--recovery", lines=[key.encode()])
        assert done.returncode == 0, done.stderr
        assert (m.root / "a.md").read_bytes() == CONTENT
        # mounted: a new passphrase, opened with the recovery key
        last = "X" if key[-1] != "X" else "Y"  # a typo, whatever the key ends with
        typo = cli(m, "passwd", "--recovery", *KDF_ARGS, lines=[(key[:-1] + last).encode(), NEW])
        assert typo.returncode == 2 and "not a recovery key" in assert_one_line_error(typo)
        done = cli(m, "passwd", "--recovery", *KDF_ARGS, lines=[key.encode(), NEW])
        assert done.returncode == 0, done.stderr
        recovery_slot = stored_slots(m.vault)[1]
        done = cli(m, "recovery", "disable", lines=[NEW])
        assert done.returncode == 0, done.stderr
        assert [s.kind for _, s in stored_slots(m.vault).values()] == ["passphrase"]
        assert_no_byte_of(slot_needles(*recovery_slot), m.vault.parent)

        gone = relock_with(m, "--recovery", lines=[key.encode()])
        assert gone.returncode == 3 and "no recovery key" in assert_one_line_error(gone)
        old = cli(m, "unlock", str(m.root), lines=[PASSPHRASE])
        assert old.returncode == 4, old.stderr
        done = cli(m, "unlock", str(m.root), lines=[NEW])
        assert done.returncode == 0, done.stderr
        assert (m.root / "a.md").read_bytes() == CONTENT


def test_unlock_refuses_edited_kdf_parameters_as_damage_before_deriving(tmp_path):
    with mounted(tmp_path) as m:
        assert m.lock().returncode == 0
        edit_slot_params(m.vault, 0, m=1 << 40)  # a TiB: no derivation could even start
        done = cli(m, "unlock", str(m.root), lines=[PASSPHRASE])
        line = assert_one_line_error(done)
        assert done.returncode == 7 and "header was edited or damaged" in line, line
        assert not m.is_mounted()
