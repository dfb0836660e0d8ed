"""A keyed set-hash over (record id, generation) of every live record.

Each record contributes ``BLAKE2b_k(id || gen)``; the XOR of all contributions
and the record count are sealed under the master key and updated in the same
transaction as every change, in O(1). At unlock the vault recomputes it: a
record deleted, duplicated, or replaced by an older copy of itself from
outside memvault changes the result. Without the key nobody can compute a
contribution, so nobody can forge a matching state.
"""

from __future__ import annotations

import hashlib
import struct

SIZE = 32
_STATE = struct.Struct(">32sQ")
_GEN = struct.Struct(">Q")
ENCODED_SIZE = _STATE.size


class Accumulator:
    def __init__(
        self,
        key: bytearray,
        value: bytes = bytes(SIZE),
        count: int = 0,
        keyed: hashlib.blake2b | None = None,
    ) -> None:
        self._key = key
        self._keyed = keyed or hashlib.blake2b(key=key, digest_size=SIZE)  # keyed once
        self.value = int.from_bytes(value, "big")
        self.count = count

    def term(self, record_id: bytes, gen: int) -> int:
        mac = self._keyed.copy()
        mac.update(record_id)
        mac.update(_GEN.pack(gen))
        return int.from_bytes(mac.digest(), "big")

    def copy(self) -> Accumulator:
        clone = Accumulator.__new__(Accumulator)  # one per write(): no __init__
        clone._key, clone._keyed = self._key, self._keyed
        clone.value, clone.count = self.value, self.count
        return clone

    def add(self, record_id: bytes, gen: int) -> None:
        self.value ^= self.term(record_id, gen)
        self.count += 1

    def remove(self, record_id: bytes, gen: int) -> None:
        self.value ^= self.term(record_id, gen)
        self.count -= 1

    def state(self) -> tuple[bytes, int]:
        return self.value.to_bytes(SIZE, "big"), self.count

    def encode(self) -> bytes:
        return _STATE.pack(self.value.to_bytes(SIZE, "big"), self.count)

    @classmethod
    def decode(cls, key: bytearray, data: bytes | bytearray) -> Accumulator:
        value, count = _STATE.unpack(bytes(data))
        return cls(key, value, count)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Accumulator)
            and self.value == other.value
            and self.count == other.count
        )

    __hash__ = None  # type: ignore[assignment]
