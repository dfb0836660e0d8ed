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
ENCODED_SIZE = _STATE.size


class Accumulator:
    def __init__(self, key: bytearray, value: bytes = bytes(SIZE), count: int = 0) -> None:
        self._key = key
        self.value = int.from_bytes(value, "big")
        self.count = count

    def term(self, record_id: bytes, gen: int) -> int:
        digest = hashlib.blake2b(
            record_id + struct.pack(">Q", gen), key=self._key, digest_size=SIZE
        ).digest()
        return int.from_bytes(digest, "big")

    def copy(self) -> Accumulator:
        clone = Accumulator(self._key)
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
