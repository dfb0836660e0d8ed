"""Issue 14 on a locked vault, through the real `memvault` command: passwd,
keyslot list|add|remove, a keyfile as second factor, the recovery key, and
edited KDF parameters read as damage. Real vault files, real Argon2id (cheap
parameters), raw scans of the file for the bytes of slots that were removed."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from memvault.crypto import kdf

from ..conftest import KDF_ARGS, assert_one_line_error, run_cli
from ..keyslots_util import (
    RECOVERY_KEY,
    assert_no_byte_of,
    edit_slot_params,
    found_in,
    slot_needles,
    stored_slots,
)

OLD, NEW, OTHER = b"old passphrase", b"new passphrase", b"another passphrase"


@pytest.fixture
def locked(tmp_path):
    """A vault holding one memory, made with passphrase OLD, locked."""
    vault = tmp_path / "vaultdir" / "memory.vault"
    done = run_cli("init", *KDF_ARGS, vault=vault, passphrase=OLD)
    assert done.returncode == 0, done.stderr
    done = run_cli("put", "notes/a.md", vault=vault, passphrase=OLD, input=b"kept across rekeys")
    assert done.returncode == 0, done.stderr
    return vault


def stdin(*lines: bytes) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def reads(vault, passphrase: bytes | None, *extra: str, env=None) -> bytes | None:
    """The memory, read with the given secrets; None if the vault refused them."""
    done = run_cli("get", "notes/a.md", *extra, vault=vault, passphrase=passphrase, env=env)
    return done.stdout if done.returncode == 0 else None


def change(vault, *args: str, lines: list[bytes], env=None):
    return run_cli(
        *args, "--passphrase-stdin", vault=vault, passphrase=None, input=stdin(*lines), env=env
    )


# -- passwd -------------------------------------------------------------------------------------


def test_passwd_opens_with_the_new_passphrase_only_and_leaves_no_byte_of_the_old_slot(locked):
    before = stored_slots(locked)[0]
    assert found_in(before[0], locked.parent), "a vacuous scan: the slot is stored as is"
    done = change(locked, "passwd", *KDF_ARGS, lines=[OLD, NEW])
    assert done.returncode == 0, done.stderr
    assert "still open with the old passphrase" in done.stderr.decode()  # what rekey cannot do
    assert reads(locked, NEW) == b"kept across rekeys"
    assert reads(locked, OLD) is None
    line = assert_one_line_error(run_cli("ls", vault=locked, passphrase=OLD))
    assert "Wrong passphrase" in line
    after = stored_slots(locked)
    assert list(after) == [0] and after[0][1].salt != before[1].salt
    assert_no_byte_of(slot_needles(*before), locked.parent)


def test_passwd_refuses_a_wrong_current_passphrase_and_changes_nothing(locked):
    before = stored_slots(locked)
    done = change(locked, "passwd", *KDF_ARGS, lines=[b"not it", NEW])
    assert done.returncode == 4 and "Wrong passphrase" in assert_one_line_error(done)
    assert stored_slots(locked) == before
    assert reads(locked, OLD) == b"kept across rekeys"


def test_passwd_takes_new_kdf_parameters_and_refuses_ones_outside_the_limits(locked):
    done = change(
        locked,
        "passwd",
        "--kdf-time",
        "2",
        "--kdf-memory",
        "9",
        "--kdf-parallelism",
        "1",
        lines=[OLD, NEW],
    )
    assert done.returncode == 0, done.stderr
    assert stored_slots(locked)[0][1].kdf.describe() == "argon2id t=2 m=9 MiB p=1"
    done = change(locked, "passwd", "--kdf-memory", "4", lines=[NEW, OLD])
    assert done.returncode == 2 and "between" in assert_one_line_error(done)


def test_a_new_passphrase_is_asked_from_the_environment_without_stdin(locked):
    done = run_cli(
        "passwd",
        *KDF_ARGS,
        vault=locked,
        passphrase=OLD,
        env={"MEMVAULT_NEW_PASSPHRASE": NEW.decode()},
    )
    assert done.returncode == 0, done.stderr
    assert reads(locked, NEW) == b"kept across rekeys"


def test_passwd_without_a_second_line_says_what_is_missing(locked):
    done = change(locked, "passwd", *KDF_ARGS, lines=[OLD])
    line = assert_one_line_error(done)
    assert done.returncode == 2 and "no line for the new passphrase" in line, line
    assert reads(locked, OLD) == b"kept across rekeys"


# -- keyslot list | add | remove ----------------------------------------------------------------


def test_keyslot_list_needs_no_passphrase(locked):
    done = run_cli("keyslot", "list", "--json", vault=locked, passphrase=None)
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["index"] == 0 and row["kind"] == "passphrase"
    assert row["kdf"] == "argon2id t=1 m=8 MiB p=1" and row["created"].endswith("UTC")
    text = run_cli("keyslot", "list", vault=locked, passphrase=None).stdout.decode()
    assert text.splitlines()[1].split()[:2] == ["0", "passphrase"]


def test_two_slots_both_open_and_removing_one_leaves_the_other_and_no_byte_of_it(locked):
    done = change(locked, "keyslot", "add", *KDF_ARGS, lines=[OLD, OTHER])
    assert done.returncode == 0, done.stderr
    assert "Added keyslot 1" in done.stderr.decode()
    assert reads(locked, OLD) == reads(locked, OTHER) == b"kept across rekeys"
    removed = stored_slots(locked)[0]

    refused = change(locked, "keyslot", "remove", "0", lines=[OLD])  # its own passphrase
    assert refused.returncode == 2 and "another keyslot" in assert_one_line_error(refused)
    done = change(locked, "keyslot", "remove", "0", lines=[OTHER])
    assert done.returncode == 0, done.stderr
    assert reads(locked, OTHER) == b"kept across rekeys"
    assert reads(locked, OLD) is None
    assert list(stored_slots(locked)) == [1]
    assert_no_byte_of(slot_needles(*removed), locked.parent)

    last = change(locked, "keyslot", "remove", "1", lines=[OTHER])
    line = assert_one_line_error(last)
    assert last.returncode == 2 and "last one that opens the vault" in line, line
    missing = change(locked, "keyslot", "remove", "7", lines=[OTHER])
    assert "no keyslot 7" in assert_one_line_error(missing)


def test_keyslot_add_with_a_wrong_passphrase_adds_nothing(locked):
    done = change(locked, "keyslot", "add", *KDF_ARGS, lines=[b"wrong", OTHER])
    assert done.returncode == 4, done.stderr
    assert list(stored_slots(locked)) == [0]


# -- a keyfile as second factor -----------------------------------------------------------------


def test_2fa_needs_both_factors_and_neither_alone(locked, tmp_path):
    keyfile = tmp_path / "usb" / "vault.key"
    done = change(locked, "2fa", "enable", "--keyfile", str(keyfile), lines=[OLD])
    assert done.returncode == 0, done.stderr
    assert "another device" in done.stderr.decode()
    assert keyfile.stat().st_size == 32 and stat.S_IMODE(keyfile.stat().st_mode) == 0o600
    assert stored_slots(locked)[0][1].kind == "passphrase+keyfile"

    # passphrase alone: refused, naming the keyfile, saying nothing of the passphrase
    right = run_cli("ls", vault=locked, passphrase=OLD)
    wrong = run_cli("ls", vault=locked, passphrase=b"wrong")
    line = assert_one_line_error(right)
    assert right.returncode == 4 and "need a keyfile" in line and "not tried" in line, line
    assert (right.returncode, right.stderr) == (wrong.returncode, wrong.stderr)
    # keyfile alone (with a wrong passphrase): refused
    assert reads(locked, b"wrong", "--keyfile", str(keyfile)) is None
    assert reads(locked, b"", "--keyfile", str(keyfile)) is None
    # both: open, by option or by $MEMVAULT_KEYFILE
    assert reads(locked, OLD, "--keyfile", str(keyfile)) == b"kept across rekeys"
    assert reads(locked, OLD, env={"MEMVAULT_KEYFILE": str(keyfile)}) == b"kept across rekeys"
    # a keyfile with one byte changed: refused as a wrong keyfile, before the passphrase
    changed = tmp_path / "changed.key"
    data = bytearray(keyfile.read_bytes())
    data[17] ^= 0x01
    changed.write_bytes(bytes(data))
    done = run_cli("ls", "--keyfile", str(changed), vault=locked, passphrase=OLD)
    line = assert_one_line_error(done)
    assert done.returncode == 4 and "is not the one" in line and "not tried" in line, line
    gone = run_cli("ls", "--keyfile", str(tmp_path / "nope.key"), vault=locked, passphrase=OLD)
    assert gone.returncode == 3 and "Cannot read the keyfile" in assert_one_line_error(gone)

    status = run_cli("2fa", "status", vault=locked, passphrase=None).stdout.decode()
    assert status.startswith("2FA is on: keyslot(s) 0 need a keyfile"), status
    listing = run_cli("keyslot", "list", vault=locked, passphrase=None).stdout.decode()
    assert "passphrase+keyfile" in listing

    # passwd keeps the keyfile requirement
    done = change(locked, "passwd", "--keyfile", str(keyfile), *KDF_ARGS, lines=[OLD, NEW])
    assert done.returncode == 0, done.stderr
    assert reads(locked, NEW) is None
    assert reads(locked, NEW, "--keyfile", str(keyfile)) == b"kept across rekeys"

    done = change(locked, "2fa", "disable", "--keyfile", str(keyfile), lines=[NEW])
    assert done.returncode == 0, done.stderr
    assert reads(locked, NEW) == b"kept across rekeys"
    assert run_cli("2fa", "status", vault=locked, passphrase=None).stdout.startswith(b"2FA is off")


def test_2fa_enable_makes_a_keyfile_beside_the_vault_by_default_and_never_overwrites(locked):
    default = locked.with_name(locked.name + ".keyfile")
    done = change(locked, "2fa", "enable", lines=[OLD])
    assert done.returncode == 0, done.stderr
    made = default.read_bytes()
    assert len(made) == 32 and stat.S_IMODE(default.stat().st_mode) == 0o600
    assert reads(locked, OLD, "--keyfile", str(default)) == b"kept across rekeys"
    again = change(locked, "2fa", "enable", lines=[OLD])
    assert "already needs a keyfile" in assert_one_line_error(again)
    assert default.read_bytes() == made


def test_2fa_enable_with_a_wrong_passphrase_leaves_no_keyfile_behind(locked, tmp_path):
    keyfile = tmp_path / "k.key"
    done = change(locked, "2fa", "enable", "--keyfile", str(keyfile), lines=[b"wrong"])
    assert done.returncode == 4, done.stderr
    assert not keyfile.exists()
    assert stored_slots(locked)[0][1].kind == "passphrase"


def test_an_existing_file_given_as_keyfile_is_used_as_it_is(locked, tmp_path):
    keyfile = tmp_path / "photo.jpg"
    keyfile.write_bytes(os.urandom(5000))
    done = change(locked, "2fa", "enable", "--keyfile", str(keyfile), lines=[OLD])
    assert done.returncode == 0, done.stderr
    assert reads(locked, OLD, "--keyfile", str(keyfile)) == b"kept across rekeys"


# -- the recovery key ---------------------------------------------------------------------------


def test_init_mentions_the_recovery_key_and_makes_none(tmp_path):
    vault = tmp_path / "v" / "memory.vault"
    done = run_cli("init", *KDF_ARGS, vault=vault)
    assert "memvault recovery enable" in done.stderr.decode()
    assert [s.kind for _, s in stored_slots(vault).values()] == ["passphrase"]


def test_recovery_key_opens_when_the_passphrase_is_forgotten_then_is_removed(locked):
    done = change(locked, "recovery", "enable", *KDF_ARGS, lines=[OLD])
    assert done.returncode == 0, done.stderr
    key = done.stdout.decode().strip()
    assert RECOVERY_KEY.match(key), key
    assert "shown this once" in done.stderr.decode()
    slots = stored_slots(locked)
    assert [s.kind for _, s in slots.values()] == ["passphrase", "recovery"]
    recovery_slot = slots[1]
    again = change(locked, "recovery", "enable", *KDF_ARGS, lines=[OLD])
    assert "already has a recovery key" in assert_one_line_error(again)

    # the recovery key is not a passphrase
    assert reads(locked, key.encode()) is None
    # the forgotten-passphrase path: passwd with the recovery key (typed loosely)
    typed = key.lower().replace("-", " ").encode()
    done = change(locked, "passwd", "--recovery", *KDF_ARGS, lines=[typed, NEW])
    assert done.returncode == 0, done.stderr
    assert reads(locked, NEW) == b"kept across rekeys"
    assert reads(locked, OLD) is None

    done = change(locked, "recovery", "disable", lines=[NEW])
    assert done.returncode == 0, done.stderr
    assert [s.kind for _, s in stored_slots(locked).values()] == ["passphrase"]
    assert_no_byte_of(slot_needles(*recovery_slot), locked.parent)
    done = change(locked, "passwd", "--recovery", *KDF_ARGS, lines=[key.encode(), OLD])
    assert done.returncode == 3 and "no recovery key" in assert_one_line_error(done)


def test_a_recovery_key_with_a_typo_is_refused_before_any_derivation(locked):
    done = change(locked, "recovery", "enable", *KDF_ARGS, lines=[OLD])
    key = done.stdout.decode().strip()
    # The recovery slot now costs the most an unlock accepts (16 passes over 2 GiB:
    # tens of seconds); a typo must be refused without running it.
    top = {"t": kdf.MAX_TIME_COST, "m": kdf.MAX_MEMORY_KIB, "p": 1}
    edit_slot_params(locked, 1, **top)
    first = key[0]
    typo = ("Z" if first != "Z" else "Y") + key[1:]
    swapped = key[:6] + ("U" if key[6] != "U" else "V") + key[7:]
    for wrong in (typo, key[:-1], key + "0", swapped):
        started = time.monotonic()
        done = change(locked, "passwd", "--recovery", *KDF_ARGS, lines=[wrong.encode(), NEW])
        elapsed = time.monotonic() - started
        line = assert_one_line_error(done)
        assert done.returncode == 2 and "not a recovery key" in line and "nothing was tried" in line
        assert elapsed < 8, f"{elapsed:.1f} s: a derivation ran"


# -- edited KDF parameters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"m": 4 * 1024},  # below the minimum memvault ever writes
        {"t": 0},
        {"p": 0},
        {"m": 1 << 40},  # a TiB: a derivation would fail (or exhaust the machine)
        {"t": 1 << 20},
        {"p": 1 << 20},
    ],
)
def test_edited_kdf_parameters_read_as_damage_not_as_a_wrong_passphrase(locked, params):
    edit_slot_params(locked, 0, **params)
    started = time.monotonic()
    for args in (["ls"], ["passwd", *KDF_ARGS]):
        done = change(locked, *args, lines=[OLD, NEW])
        line = assert_one_line_error(done)
        assert done.returncode == 7, line
        assert "header was edited or damaged" in line and "nothing was derived" in line, line
        assert "Wrong passphrase" not in line
    assert time.monotonic() - started < 10
    status = run_cli("status", vault=locked, passphrase=None).stdout.decode()
    assert "unlock will refuse it" in status
