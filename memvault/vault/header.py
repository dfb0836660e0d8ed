"""The vault header: the few facts readable without the passphrase.

Stored in the clear with a checksum (``memvault status`` shows it while the
vault is locked). An authenticated copy, sealed under the master key together
with every keyslot's KDF parameters, is checked at unlock so that a changed
version, id or KDF parameter is detected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..crypto import ChecksumError, with_checksum, without_checksum

MAGIC = "memvault"
FORMAT_VERSION = 3
"""The format of vaults created now: 3 stores large files in 256 KiB chunks."""
READABLE_VERSIONS = (2, 3)
"""Formats opened and written as they are: 2 differs only in its 64 KiB chunks."""


class HeaderError(Exception):
    """The stored header is damaged or not a memvault header."""


@dataclass(frozen=True)
class Header:
    version: int
    vault_id: bytes
    created_ns: int

    def encode(self) -> bytes:
        doc = {
            "magic": MAGIC,
            "version": self.version,
            "vault_id": self.vault_id.hex(),
            "created_ns": self.created_ns,
        }
        return with_checksum(json.dumps(doc, sort_keys=True).encode())

    @classmethod
    def decode(cls, stored: bytes) -> Header:
        try:
            doc = json.loads(without_checksum(stored))
            if doc.get("magic") != MAGIC:
                raise HeaderError("not a memvault header")
            vault_id = bytes.fromhex(doc["vault_id"])
            if len(vault_id) != 16:
                raise HeaderError("bad vault id")
            return cls(int(doc["version"]), vault_id, int(doc["created_ns"]))
        except ChecksumError as exc:
            raise HeaderError("the header's checksum does not match") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise HeaderError(f"unreadable header: {exc}") from exc
