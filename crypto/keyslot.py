"""Keyslots: the vault's master key wrapped under a passphrase-derived key.

A keyslot is stored in the clear (``memvault status`` shows it without a
passphrase) as JSON plus a checksum. Its KDF parameters and salt are also part
of the wrapped key's associated data, so editing them makes the slot fail to
open rather than silently weakening it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .aead import DecryptionError, open_sealed, seal
from .checksum import ChecksumError, with_checksum, without_checksum
from .context import Kind, associated_data
from .kdf import SALT_SIZE, KdfParams, derive_key
from .secret import wipe


class SlotChecksumError(Exception):
    """A keyslot's stored bytes do not match their checksum."""


@dataclass(frozen=True)
class Keyslot:
    index: int
    kdf: KdfParams
    salt: bytes
    wrapped_key: bytes

    def _ad(self, version: int, vault_id: bytes) -> bytes:
        binding = json.dumps(
            {"i": self.index, "kdf": self.kdf.as_dict(), "salt": self.salt.hex()},
            sort_keys=True,
        ).encode()
        return associated_data(version, vault_id, Kind.KEYSLOT, binding)

    @classmethod
    def create(
        cls,
        index: int,
        master_key: bytearray,
        passphrase: bytearray,
        kdf: KdfParams,
        version: int,
        vault_id: bytes,
    ) -> Keyslot:
        salt = os.urandom(SALT_SIZE)
        slot = cls(index, kdf, salt, b"")
        kek = derive_key(passphrase, salt, kdf)
        try:
            wrapped = seal(kek, master_key, slot._ad(version, vault_id))
        finally:
            wipe(kek)
        return cls(index, kdf, salt, wrapped)

    def unwrap(self, passphrase: bytearray, version: int, vault_id: bytes) -> bytearray:
        """Return the master key, or raise DecryptionError (wrong passphrase or tampering)."""
        kek = derive_key(passphrase, self.salt, self.kdf)
        try:
            return open_sealed(kek, self.wrapped_key, self._ad(version, vault_id))
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
            return cls(
                int(doc["index"]),
                KdfParams.from_dict(doc["params"]),
                salt,
                bytes.fromhex(doc["wrapped_key"]),
            )
        except (ChecksumError, ValueError, KeyError, TypeError) as exc:
            raise SlotChecksumError(str(exc)) from exc


__all__ = ["DecryptionError", "Keyslot", "SlotChecksumError"]
