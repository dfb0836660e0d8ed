"""Every database and key name in the vault file, in one place.

The file is one LMDB environment with eight named databases. Keys are
random record ids (``ID_SIZE`` bytes), keyed hashes of them (chunks), or the
fixed names below; values are sealed, except the header, keyslots and the
clear markers named here.
"""

from __future__ import annotations

META = "meta"
"""The header (clear, checksummed) and its authentication under the master key."""
SLOTS = "slots"
"""Keyslots (clear KDF parameters, sealed master key), by slot index."""
STATE = "state"
"""Vault-level sealed values: state, index snapshot, root attributes, model pin."""
KEYS = "keys"
"""Each record's data key, wrapped by the master key, by record id."""
RECORDS = "records"
"""Each record's sealed generation, metadata and body, by record id."""
DERIVED = "derived"
"""Each record's sealed chunk vectors, by record id."""
CHUNKS = "chunks"
"""The sealed chunks of files larger than one, by a keyed hash of (record, index)."""
AUDIT = "audit"
"""The audit trail's sealed entries, by sequence number (audit.py)."""

DB_NAMES = (META, SLOTS, STATE, KEYS, RECORDS, DERIVED, CHUNKS, AUDIT)
"""In this order: journal entries name a database by its index here."""
ADDED_LATER = frozenset({CHUNKS, AUDIT})
"""Databases a vault made before them lacks until it is first opened for writing."""

# Keys in META
HEADER_KEY = b"header"
HEADER_AUTH_KEY = b"header-auth"

# Keys in STATE
STATE_KEY = b"accumulator"
"""The sealed VaultState (integrity sum, journal position), rewritten by every write."""
SNAPSHOT_KEY = b"snapshot"
ROOT_KEY = b"root"
MODEL_KEY = b"embedding-model"
SEARCH_INDEX_KEY = b"search-index"
"""The search index as it was at the last lock: deleted with the first change after."""
COMPACTION_OWED_KEY = b"compaction-owed"
"""In the clear while shredded or replaced bytes await compaction."""
SIGNING_KEY = b"signing-key"
"""The vault's Ed25519 signing key, sealed (signing.py): made by the first signed copy."""
AUDIT_CHECKPOINT_KEY = b"audit-checkpoint"
"""Where the kept audit trail begins, and its retention (audit.Checkpoint), sealed."""
SYNC_KEY = b"sync"
"""This device's sync state (sync/state.py), sealed: group key, device key, what it has seen."""
SHARES_KEY = b"shares"
"""The same for every team space this vault is in, in one sealed value."""
SETTLED_KEY = b"settled"
"""A no-op value the store rewrites so both LMDB meta pages describe the same data."""

# Record ids
ID_SIZE = 16
ROOT_ID = b"root"
"""Stands for the root directory (it has no record; its attributes are under ROOT_KEY)."""
STRUCTURE_ID = b"structure"
"""Stands for damage to LMDB's own pages in a vault's list of damaged records."""
