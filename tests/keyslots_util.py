"""Reading keyslots straight from a vault file, and scanning files for a slot's bytes."""

from __future__ import annotations

import re
from pathlib import Path

from memvault.crypto import Keyslot

from . import rawvault
from .conftest import files_under

RECOVERY_KEY = re.compile(r"^([0-9A-HJKMNP-TV-Z]{5}-){7}[0-9A-HJKMNP-TV-Z]{5}$")


def stored_slots(vault: Path) -> dict[int, tuple[bytes, Keyslot]]:
    """Every keyslot of a closed (or daemon-held, compacted) vault: index -> (stored, decoded)."""
    with rawvault.raw(vault) as (txn, dbs):
        return {k[0]: (bytes(v), Keyslot.decode(bytes(v))) for k, v in txn.cursor(dbs["slots"])}


def slot_needles(stored: bytes, slot: Keyslot) -> list[bytes]:
    """The forms a slot's secret-bearing bytes could be found in: its wrapped key raw and
    as stored (hex), its salt as stored, and the whole stored value."""
    return [slot.wrapped_key, slot.wrapped_key.hex().encode(), slot.salt.hex().encode(), stored]


def assert_no_byte_of(needles: list[bytes], *roots: Path) -> None:
    files = files_under(*roots)
    assert files, "nothing to scan"
    for path in files:
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"{needle[:24]!r}... found in {path}"


def edit_slot_params(vault: Path, index: int, **params: int) -> None:
    """Change a slot's KDF parameters and recompute its checksum (an edit, not rot)."""
    with rawvault.raw(vault, write=True) as (txn, dbs):
        key = bytes([index])
        stored = bytes(txn.get(key, db=dbs["slots"]))
        edited = rawvault.edit_json(stored, lambda d: d["params"].update(params))
        txn.put(key, edited, db=dbs["slots"])


def found_in(needle: bytes, *roots: Path) -> bool:
    """Whether any file holds ``needle`` (so that a scan for it is not vacuous)."""
    return any(needle in path.read_bytes() for path in files_under(*roots))
