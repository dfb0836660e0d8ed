"""Unkeyed BLAKE2b checksums for the few values stored in the clear.

The vault header and keyslots must be readable without the passphrase
(``memvault status``), so they cannot be encrypted. A checksum turns accidental
damage into a precise error ("keyslot 0 is damaged") instead of a misleading
"wrong passphrase"; deliberate tampering is caught by the keyed checks that
follow (the keyslot's AEAD and the authenticated header).
"""

from __future__ import annotations

import hashlib
import hmac

CHECKSUM_SIZE = 16


class ChecksumError(Exception):
    """The stored value does not match its checksum."""


def with_checksum(data: bytes) -> bytes:
    return data + hashlib.blake2b(data, digest_size=CHECKSUM_SIZE).digest()


def without_checksum(stored: bytes) -> bytes:
    """Return the data part of a checksummed value, or raise ChecksumError."""
    data, tag = stored[:-CHECKSUM_SIZE], stored[-CHECKSUM_SIZE:]
    expected = hashlib.blake2b(data, digest_size=CHECKSUM_SIZE).digest()
    if len(stored) < CHECKSUM_SIZE or not hmac.compare_digest(tag, expected):
        raise ChecksumError("checksum mismatch")
    return data
