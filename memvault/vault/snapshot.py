"""A sealed snapshot of the unlocked index, so that unlocking a large vault
does not decrypt every record's key and metadata one by one.

Written when a vault that changed is closed; deleted in the same transaction
as the first change of the next session (so it never outlives a shredded
record's key for longer than that record's own bytes, which compaction then
removes). At unlock it is used only if its accumulator equals the vault's
sealed state *and* the records it lists are exactly those stored in the
file (ids and the nonce each stored value starts with); otherwise the vault
falls back to decrypting every record, which checks everything.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

_ENTRY = struct.Struct(">16s24sQ32sI")


class SnapshotFormatError(Exception):
    """The decrypted snapshot does not have the expected structure."""


Row = tuple[bytes, bytes, int, bytearray, bytes]
"""(record id, stored value's first 24 bytes, generation, data key, encoded meta)."""


def encode(state: bytes, rows: Iterable[Row]) -> bytearray:
    """``state``, then one row per record.

    The first 24 bytes of a stored record are the random nonce of its sealed
    generation, new at every change: equal prefixes mean the very same value.
    """
    out = bytearray(struct.pack(">I", len(state)))
    out += state
    for record_id, stamp, gen, data_key, meta in rows:
        out += _ENTRY.pack(record_id, stamp, gen, bytes(data_key), len(meta))
        out += meta
    return out


def decode(data: bytearray) -> tuple[bytes, Iterator[Row]]:
    """Split a snapshot into its state and an iterator over its records."""
    view = memoryview(data)
    if len(view) < 4:
        raise SnapshotFormatError("snapshot too short")
    (state_len,) = struct.unpack_from(">I", view)
    state = bytes(view[4 : 4 + state_len])

    def entries() -> Iterator[Row]:
        at = 4 + state_len
        while at < len(view):
            if at + _ENTRY.size > len(view):
                raise SnapshotFormatError("snapshot entry truncated")
            record_id, stamp, gen, data_key, meta_len = _ENTRY.unpack_from(view, at)
            at += _ENTRY.size
            if at + meta_len > len(view):
                raise SnapshotFormatError("snapshot metadata truncated")
            yield record_id, stamp, gen, bytearray(data_key), bytes(view[at : at + meta_len])
            at += meta_len

    return state, entries()
