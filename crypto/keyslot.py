"""Keyslots: the vault's master key wrapped under a key derived from what the user holds.

Three kinds of slot (see SECURITY.md):

* ``passphrase``: Argon2id(passphrase) wraps the master key;
* ``passphrase+keyfile``: Argon2id(passphrase) and the keyfile's hash are
  combined by keyed BLAKE2b into the wrapping key, so neither alone opens it;
* ``recovery``: Argon2id(recovery key), the 160-bit key of recovery.py.

A keyslot is stored in the clear (``memvault keyslot list`` shows it without
a passphrase) as JSON plus a checksum. Its KDF parameters, salt and kind are
also part of the wrapped key's associated data, so editing them makes the
slot fail to open rather than silently weakening it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .aead import DecryptionError, open_sealed, seal
from .checksum import ChecksumError, with_checksum, without_checksum
from .context import Kind, associated_data
from .kdf import SALT_SIZE, KdfParams, derive_key
from .secret import wipe

PASSPHRASE = "passphrase"
KEYFILE = "passphrase+keyfile"
RECOVERY = "recovery"
KINDS = (PASSPHRASE, KEYFILE, RECOVERY)

KEYFILE_HASH_SIZE = 32
CHECK_SIZE = 16


class SlotChecksumError(Exception):
    """A keyslot's stored bytes do not match their checksum."""


def keyfile_hash(content: bytes | bytearray) -> bytes:
    """What a keyfile contributes: its BLAKE2b-256 hash (any file, any size)."""
    return hashlib.blake2b(
        content, digest_size=KEYFILE_HASH_SIZE, person=b"memvault.keyfile"
    ).digest()


def _combine(kek: bytearray, keyfile: bytes) -> bytearray:
    """The wrapping key of a passphrase+keyfile slot: both factors, keyed BLAKE2b."""
    mixed = hashlib.blake2b(keyfile, key=bytes(kek), digest_size=32, person=b"memvault.2fa")
    return bytearray(mixed.digest())


@dataclass(frozen=True)
class Keyslot:
    index: int
    kdf: KdfParams
    salt: bytes
    wrapped_key: bytes
    kind: str = PASSPHRASE
    created_ns: int = 0
    """0 for slots written before slots kept their creation time."""
    keyfile_check: bytes = b""
    """For passphrase+keyfile slots: a salted hash of the keyfile, so that a
    missing or wrong keyfile is named as such before any Argon2id runs (it
    says nothing about the passphrase)."""

    @property
    def needs_keyfile(self) -> bool:
        return self.kind == KEYFILE

    @property
    def is_recovery(self) -> bool:
        return self.kind == RECOVERY

    def _legacy(self) -> bool:
        """A passphrase slot is bound as before kinds existed, so that a vault
        with passphrase slots only stays readable by an older memvault (its
        creation time is shown, not authenticated)."""
        return self.kind == PASSPHRASE

    def binding(self) -> str:
        """What the authenticated header commits to for this slot."""
        base = f"{self.index}:{self.kdf.describe()}:{self.salt.hex()}"
        if self._legacy():
            return base
        return f"{base}:{self.kind}:{self.keyfile_check.hex()}"

    def _ad(self, version: int, vault_id: bytes) -> bytes:
        doc = {"i": self.index, "kdf": self.kdf.as_dict(), "salt": self.salt.hex()}
        if not self._legacy():
            doc["kind"] = self.kind
        binding = json.dumps(doc, sort_keys=True).encode()
        return associated_data(version, vault_id, Kind.KEYSLOT, binding)

    def keyfile_matches(self, keyfile: bytes) -> bool:
        return hmac.compare_digest(self.keyfile_check, _check(self.salt, keyfile))

    @classmethod
    def create(
        cls,
        index: int,
        master_key: bytearray,
        passphrase: bytearray,
        kdf: KdfParams,
        version: int,
        vault_id: bytes,
        *,
        kind: str = PASSPHRASE,
        keyfile: bytes | None = None,
    ) -> Keyslot:
        """A new slot (fresh salt); ``keyfile`` is the keyfile's hash, for a
        passphrase+keyfile slot only."""
        if kind not in KINDS or (kind == KEYFILE) != (keyfile is not None):
            raise ValueError("a passphrase+keyfile slot, and only one, takes a keyfile")
        salt = os.urandom(SALT_SIZE)
        check = _check(salt, keyfile) if keyfile is not None else b""
        slot = cls(index, kdf, salt, b"", kind, time.time_ns(), check)
        kek = slot._kek(passphrase, keyfile)
        try:
            wrapped = seal(kek, master_key, slot._ad(version, vault_id))
        finally:
            wipe(kek)
        return cls(index, kdf, salt, wrapped, kind, slot.created_ns, check)

    def _kek(self, passphrase: bytearray, keyfile: bytes | None) -> bytearray:
        kek = derive_key(passphrase, self.salt, self.kdf)
        if not self.needs_keyfile:
            return kek
        if keyfile is None:
            wipe(kek)
            raise DecryptionError("this slot needs a keyfile")
        try:
            return _combine(kek, keyfile)
        finally:
            wipe(kek)

    def unwrap(
        self, passphrase: bytearray, version: int, vault_id: bytes, keyfile: bytes | None = None
    ) -> bytearray:
        """Return the master key, or raise DecryptionError (a wrong secret or tampering)."""
        return self.unwrap_for(passphrase, (version,), vault_id, keyfile)[0]

    def unwrap_for(
        self,
        passphrase: bytearray,
        versions: Sequence[int],
        vault_id: bytes,
        keyfile: bytes | None = None,
    ) -> tuple[bytearray, int]:
        """The master key and which of ``versions`` (format versions, tried in
        order with one key derivation) it was wrapped for; DecryptionError if
        none: a header whose version was changed is told from a wrong secret."""
        kek = self._kek(passphrase, keyfile)
        try:
            for version in versions:
                try:
                    return open_sealed(kek, self.wrapped_key, self._ad(version, vault_id)), version
                except DecryptionError:
                    continue
            raise DecryptionError("authentication failed")
        finally:
            wipe(kek)

    def encode(self) -> bytes:
        doc = {
            "index": self.index,
            "kdf": "argon2id",
            "params": self.kdf.as_dict(),
            "salt": self.salt.hex(),
            "wrapped_key": self.wrapped_key.hex(),
        }
        if self.created_ns:
            doc.update(kind=self.kind, created_ns=self.created_ns)
        if self.keyfile_check:
            doc["keyfile_check"] = self.keyfile_check.hex()
        return with_checksum(json.dumps(doc, sort_keys=True).encode())

    @classmethod
    def decode(cls, stored: bytes) -> Keyslot:
        try:
            doc = json.loads(without_checksum(stored))
            if doc["kdf"] != "argon2id":
                raise ValueError("unknown KDF")
            salt = bytes.fromhex(doc["salt"])
            if len(salt) != SALT_SIZE:
                raise ValueError("bad salt")
            kind = doc.get("kind", PASSPHRASE)
            if kind not in KINDS:
                raise ValueError("unknown kind of keyslot")
            check = bytes.fromhex(doc.get("keyfile_check", ""))
            if (kind == KEYFILE) != (len(check) == CHECK_SIZE):
                raise ValueError("bad keyfile check")
            return cls(
                int(doc["index"]),
                KdfParams.from_dict(doc["params"]),
                salt,
                bytes.fromhex(doc["wrapped_key"]),
                kind,
                int(doc.get("created_ns", 0)),
                check,
            )
        except (ChecksumError, ValueError, KeyError, TypeError) as exc:
            raise SlotChecksumError(str(exc)) from exc


def _check(salt: bytes, keyfile: bytes) -> bytes:
    return hashlib.blake2b(
        keyfile, key=salt, digest_size=CHECK_SIZE, person=b"memvault.kfcheck"
    ).digest()


__all__ = [
    "KEYFILE",
    "PASSPHRASE",
    "RECOVERY",
    "DecryptionError",
    "Keyslot",
    "SlotChecksumError",
    "keyfile_hash",
]
