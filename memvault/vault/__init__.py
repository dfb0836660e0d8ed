"""The vault: encrypted records in one LMDB file, addressed by record id.

Everything below the public surface here is the vault's own business: the
LMDB store and its journal, the record format, sealing, the path tree,
loading and housekeeping.
"""

from .core import MAX_MEMORY_SIZE, Vault, VaultInfo, read_info

__all__ = ["MAX_MEMORY_SIZE", "Vault", "VaultInfo", "read_info"]
