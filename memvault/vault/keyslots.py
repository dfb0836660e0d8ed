"""Which keyslots a secret may open, and the policy of changing them.

An unlock first picks the slots the user's factors fit (a recovery key
tries recovery slots only; a passphrase tries passphrase slots, and the
passphrase+keyfile slots whose keyfile check the given keyfile passes), so
that a missing or wrong keyfile is named before the passphrase is asked
and without saying anything about it. Every slot's KDF cost is checked
before any Argon2id runs: an edited header must not cost minutes and GiBs.

Changes (passwd, add, remove, 2fa, recovery) work on an unlocked Vault,
in process or in the mount daemon, given the slot the user's secret opened
(:func:`authenticate`); Vault.replace_slots writes them in one transaction
and compacts, so a removed slot's bytes leave the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..crypto import DecryptionError, KdfParams, Keyslot, wipe
from ..crypto.keyslot import KEYFILE, PASSPHRASE, RECOVERY
from ..crypto.recovery import new_recovery_key
from ..errors import (
    KeyfileMissing,
    KeyslotRefused,
    NoRecoveryKey,
    UnreasonableKdf,
    VaultCorrupted,
    VaultTampered,
    WrongKeyfile,
    WrongPassphrase,
    WrongRecoveryKey,
)
from .header import READABLE_VERSIONS, Header

MAX_SLOTS = 256
"""Slot indexes are one byte (the key in the slots database)."""


@dataclass(frozen=True)
class Factors:
    """What the user gives besides the typed secret."""

    keyfile: bytes | None = None
    """The keyfile's hash (crypto.keyslot.keyfile_hash), if one was given."""
    keyfile_name: str = ""
    recovery: bool = False
    """The secret is a recovery key (already parsed: its checksum held)."""


PASSPHRASE_ONLY = Factors()


def check_slots(path: Path, slots: list) -> None:
    """Damaged slots and KDF costs outside the limits are refused before any derivation."""
    for slot in slots:
        if not isinstance(slot, Keyslot):
            raise VaultCorrupted(path, f"keyslot {slot.index} is damaged")
        try:
            slot.kdf.validate()
        except ValueError:
            raise UnreasonableKdf(slot.index, slot.kdf.describe(), KdfParams.limits()) from None


def _names(slots: list[Keyslot]) -> str:
    return ", ".join(str(s.index) for s in slots)


def candidates(path: Path, slots: list, factors: Factors) -> list[Keyslot]:
    """The slots the given factors may open (raises if none can: nothing is derived)."""
    check_slots(path, slots)
    if factors.recovery:
        found = [s for s in slots if s.is_recovery]
        if not found:
            raise NoRecoveryKey(path)
        return found
    plain = [s for s in slots if s.kind == PASSPHRASE]
    twofa = [s for s in slots if s.needs_keyfile]
    if factors.keyfile is None:
        if not plain and twofa:
            raise KeyfileMissing(_names(twofa), path)
        return plain
    fitting = [s for s in twofa if s.keyfile_matches(factors.keyfile)]
    if not plain and not fitting:
        if twofa:
            raise WrongKeyfile(factors.keyfile_name, _names(twofa))
        return plain  # a keyfile given to a vault without 2FA: only the passphrase counts
    return fitting + plain


def unlock(
    path: Path, header: Header, slots: list, secret: bytearray, factors: Factors
) -> tuple[bytearray, Keyslot]:
    """The master key and the slot that opened it (the secret is wiped)."""
    versions = (header.version, *(v for v in READABLE_VERSIONS if v != header.version))
    try:
        for slot in candidates(path, slots, factors):
            try:
                master, version = slot.unwrap_for(
                    secret, versions, header.vault_id, factors.keyfile
                )
            except DecryptionError:
                continue
            if version != header.version:
                wipe(master)
                raise VaultTampered(
                    path, f"its header says format {header.version}, its keys are format {version}"
                )
            return master, slot
        raise _wrong(path, slots, factors)
    finally:
        wipe(secret)


def _wrong(path: Path, slots: list, factors: Factors) -> Exception:
    if factors.recovery:
        return WrongRecoveryKey(path)
    twofa = [s for s in slots if s.needs_keyfile]
    if twofa and factors.keyfile is None:  # a mixed vault: the passphrase may be a 2FA slot's
        return KeyfileMissing(_names(twofa), path)
    return WrongPassphrase(path)


def authenticate(vault, secret: bytearray, factors: Factors) -> Keyslot:
    """The slot of an unlocked vault that ``secret`` (and the factors) open."""
    master, slot = unlock(vault.path, vault.header, vault.slots, secret, factors)
    try:
        if not vault.is_master(master):  # cannot happen unless the slots were swapped
            raise WrongPassphrase(vault.path)
    finally:
        wipe(master)
    return slot


# -- the changes --------------------------------------------------------------------


def _slot(vault, index: int) -> Keyslot:
    for slot in vault.slots:
        if slot.index == index:
            return slot
    raise KeyslotRefused(f"The vault has no keyslot {index} (`memvault keyslot list` shows them).")


def _free_index(vault) -> int:
    used = {s.index for s in vault.slots}
    for index in range(MAX_SLOTS):
        if index not in used:
            return index
    raise KeyslotRefused(f"The vault already has {MAX_SLOTS} keyslots; remove one first.")


def _openers(slots: list) -> list[Keyslot]:
    """The slots an everyday unlock uses (not the recovery slot)."""
    return [s for s in slots if isinstance(s, Keyslot) and not s.is_recovery]


def passwd(
    vault,
    opened: Keyslot,
    new_secret: bytearray,
    kdf: KdfParams,
    keyfile: bytes | None,
    replace: int | None = None,
) -> Keyslot:
    """Wrap the master key under a new passphrase in place of a slot (the one the
    secret opened; with a recovery key, ``replace`` or the only passphrase slot).
    A passphrase+keyfile slot stays one, with the keyfile given."""
    if replace is None and not opened.is_recovery:
        replace = opened.index
    if replace is None:
        openers = _openers(vault.slots)
        if len(openers) > 1:
            raise KeyslotRefused(
                f"The vault has {len(openers)} passphrase keyslots ({_names(openers)}); "
                "say which one the new passphrase replaces with --slot N."
            )
        replace = openers[0].index if openers else _free_index(vault)
    old = next((s for s in vault.slots if s.index == replace), None)
    if old is not None and old.is_recovery:
        raise KeyslotRefused(
            f"Keyslot {replace} holds the recovery key; `memvault recovery disable` removes it."
        )
    # With the recovery key and no keyfile (both lost), the new slot is a passphrase alone.
    kind = KEYFILE if old is not None and old.needs_keyfile and keyfile is not None else PASSPHRASE
    slot = vault.new_slot(replace, new_secret, kdf, kind=kind, keyfile=keyfile)
    vault.replace_slots([slot], [replace] if old is not None else [])
    return slot


def add(vault, new_secret: bytearray, kdf: KdfParams) -> Keyslot:
    """One more passphrase slot."""
    slot = vault.new_slot(_free_index(vault), new_secret, kdf)
    vault.replace_slots([slot], [])
    return slot


def remove(vault, opened: Keyslot, index: int) -> None:
    """Remove a slot, given the secret of another; never the last everyday one."""
    doomed = _slot(vault, index)
    if not doomed.is_recovery and len(_openers(vault.slots)) <= 1:
        raise KeyslotRefused(
            f"Keyslot {index} is the last one that opens the vault with a passphrase; "
            "add another (`memvault keyslot add`) before removing it."
        )
    if opened.index == index:
        raise KeyslotRefused(
            f"That passphrase opens keyslot {index}, the one being removed: give the "
            "passphrase of another keyslot."
        )
    vault.replace_slots([], [index])


def enable_2fa(
    vault, opened: Keyslot, secret: bytearray, keyfile: bytes, kdf: KdfParams
) -> tuple[Keyslot, list[Keyslot]]:
    """Rewrap the opened slot so it needs the keyfile too; also return the
    passphrase slots that still open the vault without one."""
    if opened.is_recovery:
        raise KeyslotRefused(
            "2FA is for a passphrase keyslot; give its passphrase, not the recovery key."
        )
    if opened.needs_keyfile:
        raise KeyslotRefused(f"Keyslot {opened.index} already needs a keyfile.")
    slot = vault.new_slot(opened.index, secret, kdf, kind=KEYFILE, keyfile=keyfile)
    vault.replace_slots([slot], [opened.index])
    return slot, [s for s in vault.slots if s.kind == PASSPHRASE]


def disable_2fa(vault, opened: Keyslot, secret: bytearray, kdf: KdfParams) -> Keyslot:
    """Rewrap the opened slot under its passphrase alone."""
    if not opened.needs_keyfile:
        raise KeyslotRefused(
            f"Keyslot {opened.index} does not need a keyfile; give --keyfile to name the "
            "2FA keyslot's keyfile."
        )
    slot = vault.new_slot(opened.index, secret, kdf)
    vault.replace_slots([slot], [opened.index])
    return slot


def enable_recovery(vault, kdf: KdfParams) -> tuple[Keyslot, str]:
    """Add a recovery slot; return it and the key's printed form (shown once)."""
    existing = [s for s in vault.slots if isinstance(s, Keyslot) and s.is_recovery]
    if existing:
        raise KeyslotRefused(
            f"The vault already has a recovery key (keyslot {existing[0].index}); "
            "`memvault recovery disable` first to make a new one."
        )
    key, printed = new_recovery_key()
    slot = vault.new_slot(_free_index(vault), key, kdf, kind=RECOVERY)
    vault.replace_slots([slot], [])
    return slot, printed


def disable_recovery(vault) -> list[int]:
    """Remove every recovery slot (and its bytes)."""
    doomed = [s.index for s in vault.slots if isinstance(s, Keyslot) and s.is_recovery]
    if not doomed:
        raise NoRecoveryKey(vault.path)
    vault.replace_slots([], doomed)
    return doomed
