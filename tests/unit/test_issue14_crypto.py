"""Issue 14, the crypto alone: keyslot kinds, the two factors of a
passphrase+keyfile slot, and recovery keys (format, checksum, typos)."""

from __future__ import annotations

import json

import pytest

from memvault.crypto import DecryptionError, KdfParams, Keyslot, new_key, with_checksum
from memvault.crypto.checksum import without_checksum
from memvault.crypto.keyslot import KEYFILE, RECOVERY, SlotChecksumError, keyfile_hash
from memvault.crypto.recovery import (
    ALPHABET,
    KEY_BYTES,
    RecoveryKeyTypo,
    new_recovery_key,
    parse_recovery_key,
)

FAST = KdfParams(1, 8 * 1024, 1)
VAULT_ID = bytes(range(16))
PW = bytearray(b"passphrase")
KEYFILE_BYTES = bytes(range(32))


def _slot(kind: str = KEYFILE, keyfile: bytes | None = None):
    master = new_key()
    keyfile = keyfile_hash(KEYFILE_BYTES) if kind == KEYFILE and keyfile is None else keyfile
    slot = Keyslot.create(0, master, PW, FAST, 2, VAULT_ID, kind=kind, keyfile=keyfile)
    return master, Keyslot.decode(slot.encode())


def test_a_keyfile_slot_needs_both_factors():
    master, slot = _slot()
    kf = keyfile_hash(KEYFILE_BYTES)
    assert slot.kind == KEYFILE and slot.created_ns > 0
    assert slot.unwrap(bytearray(PW), 2, VAULT_ID, kf) == master
    with pytest.raises(DecryptionError):  # the passphrase alone
        slot.unwrap(bytearray(PW), 2, VAULT_ID)
    with pytest.raises(DecryptionError):  # the keyfile alone
        slot.unwrap(bytearray(b"guess"), 2, VAULT_ID, kf)
    changed = bytearray(KEYFILE_BYTES)
    changed[5] ^= 1
    assert slot.keyfile_matches(kf) and not slot.keyfile_matches(keyfile_hash(changed))
    with pytest.raises(DecryptionError):
        slot.unwrap(bytearray(PW), 2, VAULT_ID, keyfile_hash(changed))


def test_a_slot_whose_kind_was_edited_does_not_open():
    master, slot = _slot(RECOVERY)
    doc = json.loads(without_checksum(slot.encode()))
    doc["kind"] = "passphrase"  # with a recomputed checksum: an edit, not rot
    edited = Keyslot.decode(with_checksum(json.dumps(doc, sort_keys=True).encode()))
    with pytest.raises(DecryptionError):
        edited.unwrap(bytearray(PW), 2, VAULT_ID)
    doc["kind"] = KEYFILE  # a keyfile slot needs its keyfile check
    with pytest.raises(SlotChecksumError):
        Keyslot.decode(with_checksum(json.dumps(doc, sort_keys=True).encode()))


def test_a_slot_written_before_kinds_reads_as_a_passphrase_slot():
    master, slot = _slot("passphrase")
    doc = json.loads(without_checksum(slot.encode()))
    del doc["kind"], doc["created_ns"]
    old = Keyslot.decode(with_checksum(json.dumps(doc, sort_keys=True).encode()))
    assert old.kind == "passphrase" and old.created_ns == 0
    assert old.binding() == slot.binding()  # bound as it always was
    assert old.unwrap(bytearray(PW), 2, VAULT_ID) == master


def test_recovery_keys_are_high_entropy_groups_that_parse_back():
    key, printed = new_recovery_key()
    assert len(key) * 8 >= 128 and KEY_BYTES * 8 == 160
    groups = printed.split("-")
    assert len(groups) == 8 and all(len(g) == 5 and set(g) <= set(ALPHABET) for g in groups)
    assert parse_recovery_key(printed) == key
    loose = printed.lower().replace("-", " ").replace("0", "o").replace("1", "l")
    assert parse_recovery_key(loose) == key
    assert new_recovery_key()[1] != printed


def test_every_single_character_typo_is_caught_by_the_checksum():
    _, printed = new_recovery_key()
    chars = printed.replace("-", "")
    for at in range(len(chars)):
        for other in ALPHABET:
            if other == chars[at]:
                continue
            typo = chars[:at] + other + chars[at + 1 :]
            with pytest.raises(RecoveryKeyTypo):
                parse_recovery_key(typo)
    for wrong in (chars[:-1], chars + "0", chars[:10] + "U" + chars[11:], ""):
        with pytest.raises(RecoveryKeyTypo):
            parse_recovery_key(wrong)
