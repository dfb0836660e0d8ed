"""memvault's cryptography: key derivation, keyslots, AEAD and key wrapping.

This package knows nothing about LMDB, paths or memories; the Vault uses it.
The key hierarchy and what every ciphertext is bound to are described in
SECURITY.md beside this file.
"""

from .aead import OVERHEAD, DecryptionError, open_sealed, seal
from .checksum import ChecksumError, with_checksum, without_checksum
from .context import Binding, Kind, associated_data
from .kdf import DEFAULT_KDF, KdfParams, derive_key
from .keyslot import Keyslot, SlotChecksumError
from .secret import new_key, wipe

__all__ = [
    "DEFAULT_KDF",
    "Binding",
    "OVERHEAD",
    "ChecksumError",
    "DecryptionError",
    "KdfParams",
    "Keyslot",
    "Kind",
    "SlotChecksumError",
    "associated_data",
    "derive_key",
    "new_key",
    "open_sealed",
    "seal",
    "wipe",
    "with_checksum",
    "without_checksum",
]
