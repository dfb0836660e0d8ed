"""What this machine last saw of each vault, so that an older copy is noticed.

A vault file is self-consistent at every commit: replaced whole by an older
copy of itself (a backup, a synced file, an attacker's copy), or cut back by
journal entries dropped from the end, it authenticates. What gives it away is
its generation (the sealed state's commit count): this machine writes the
generation it last saw durable, with the vault's id and a MAC under a key
derived from the master key, to ``$XDG_STATE_HOME/memvault/<vault id>.seen``
(else ``~/.local/state/memvault/``), mode 0600, after every journal flush and
at lock. An unlock that finds an older generation is refused, naming both,
unless the rollback is accepted on purpose; then the record follows the
vault. The record holds no secret and no content: a forged one fails its MAC,
and a deleted one only makes the next unlock a first one on this machine.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_DAMAGED, MemvaultError

KEY_INFO = b"memvault.seen"
"""What the MAC key is derived from the master key with (Sealer.derive)."""


class VaultForked(MemvaultError):
    """The vault {0} is not the copy this machine last saw at its generation ({1}): \
another copy of it was changed elsewhere, and what was done here is not in it. If that is \
on purpose, open it with --accept-rollback."""

    exit_code = EXIT_DAMAGED


class VaultRolledBack(MemvaultError):
    """The vault {0} is older than the last one this machine saw (generation {1}, \
seen at generation {2}): it was replaced by an older copy or lost its last changes. \
If that is on purpose (a restored backup), open it with --accept-rollback."""

    exit_code = EXIT_DAMAGED


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "memvault"


def _record_path(vault_id: bytes) -> Path:
    return state_dir() / f"{vault_id.hex()}.seen"


def known_here(vault_id: bytes) -> bool:
    """Whether this machine has a record of the vault (no key needed: for saying
    "first use here" once; a directory this user cannot read says nothing)."""
    try:
        return _record_path(vault_id).exists()
    except OSError:
        return True


def _mac(key: bytes | bytearray, vault_id: bytes, generation: int, digest: bytes) -> str:
    message = vault_id + struct.pack(">Q", generation) + digest
    return hashlib.blake2b(message, key=bytes(key), digest_size=32).hexdigest()


@dataclass(frozen=True)
class Seen:
    generation: int
    digest: bytes  # b"" in a record written before digests were kept


def last_seen(vault_id: bytes, key: bytes | bytearray) -> Seen | None:
    """What this machine last saw of the vault (None: no record, or one that does
    not verify: it was not written with this vault's key)."""
    try:
        doc = json.loads(_record_path(vault_id).read_text())
        generation = int(doc["generation"])
        digest = bytes.fromhex(doc.get("digest", ""))
        if hmac.compare_digest(str(doc["mac"]), _mac(key, vault_id, generation, digest)):
            return Seen(generation, digest)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def differs(seen: Seen | None, generation: int, digest: bytes) -> bool:
    """Whether the vault differs from what this machine saw: older (VaultRolledBack)
    or another copy at the same generation (VaultForked). Raises nothing itself."""
    if seen is None:
        return False
    if generation < seen.generation:
        return True
    return generation == seen.generation and bool(seen.digest) and seen.digest != digest


def refuse(path, seen: Seen, generation: int) -> MemvaultError:
    if generation < seen.generation:
        return VaultRolledBack(path, generation, seen.generation)
    return VaultForked(path, generation)


def remember(vault_id: bytes, key: bytes | bytearray, generation: int, digest: bytes) -> None:
    """Record ``generation`` and its state digest as the last seen (atomically; best
    effort: a read-only home only loses the check, never the vault)."""
    path = _record_path(vault_id)
    doc = {"vault_id": vault_id.hex(), "generation": generation, "digest": digest.hex()}
    doc["mac"] = _mac(key, vault_id, generation, digest)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with open(fd, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError:
        pass
