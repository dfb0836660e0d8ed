"""Associated data: what binds each ciphertext to the one place it belongs.

Every AEAD message in a vault carries, as associated data, the format version,
the vault id, the kind of object, the object's id and (for record bodies) a
generation counter. A ciphertext copied to another record, another kind,
another vault or an older generation fails to authenticate.
"""

from __future__ import annotations

import enum
import struct

_PREFIX = b"memvault"


class Kind(enum.IntEnum):
    """What a ciphertext holds; each kind has its own associated-data domain."""

    KEYSLOT = 1  # master key wrapped by a passphrase-derived key
    HEADER = 2  # authenticated copy of the vault header and keyslot parameters
    STATE = 3  # record accumulator (detects removed, added or rolled-back records)
    DATA_KEY = 4  # a record's data key wrapped by the master key
    META = 5  # a record's metadata (path, times, mode, generations)
    BODY = 6  # a record's content
    VECTOR = 7  # embedding vectors of a record's chunks
    INDEX = 8  # persisted search index structures
    SNAPSHOT = 10  # sealed snapshot of the unlocked index (ids, keys, metadata)
    GENERATION = 11  # a record's generation, apart from its metadata (damage accounting)
    CHUNK = 12  # one 64 KiB chunk of a large file's content
    SIGNING = 13  # the vault's Ed25519 signing key (signed copies)
    AUDIT = 14  # an entry of the audit trail
    AUDIT_PATH = 15  # a memory's path in the audit trail, under the memory's data key
    SYNC = 16  # a sync group's keys and this device's view of it (sync/)


class Binding:
    """Associated data for every ciphertext of one vault (prefixes precomputed)."""

    def __init__(self, version: int, vault_id: bytes) -> None:
        if len(vault_id) != 16:
            raise ValueError("vault ids are 16 bytes")
        self._prefixes = {
            kind: _PREFIX + struct.pack(">HB", version, int(kind)) + vault_id for kind in Kind
        }

    def __call__(self, kind: Kind, object_id: bytes = b"", generation: int = 0) -> bytes:
        return b"".join(
            (
                self._prefixes[kind],
                len(object_id).to_bytes(1, "big"),
                object_id,
                generation.to_bytes(8, "big"),
            )
        )


def associated_data(
    version: int, vault_id: bytes, kind: Kind, object_id: bytes = b"", generation: int = 0
) -> bytes:
    """Encode the binding for one ciphertext (fixed layout, length-prefixed id)."""
    return Binding(version, vault_id)(kind, object_id, generation)
