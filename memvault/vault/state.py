"""The vault's sealed state: the record accumulator, the journal position and
the generation (how many commits the vault has had: rollback.py).

Sealed under the master key (kind STATE) and rewritten in the same
transaction or journal entry as every change, so that what LMDB says was
applied, and whether a journaled session was left open, can be neither read
nor changed without the key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .accumulator import ENCODED_SIZE, Accumulator
from .journal import NO_BOOT

_TAIL = struct.Struct(">Q16s")  # last journal sequence number applied, boot id of an open session
_GENERATION = struct.Struct(">Q")
_ACC_SIZE = ENCODED_SIZE


@dataclass
class VaultState:
    acc: Accumulator
    journal_seq: int = 0
    journal_boot: bytes = NO_BOOT
    generation: int = 0
    """Grows by one with every commit; a state written before it existed reads as 0."""

    @property
    def session_open(self) -> bool:
        """A journaled session (a mount) was open when this state was written."""
        return self.journal_boot != NO_BOOT

    def encode(self) -> bytes:
        tail = _TAIL.pack(self.journal_seq, self.journal_boot)
        return self.acc.encode() + tail + _GENERATION.pack(self.generation)

    @classmethod
    def decode(cls, key: bytearray, data: bytes | bytearray) -> VaultState:
        data = bytes(data)
        if len(data) not in (_ACC_SIZE + _TAIL.size, _ACC_SIZE + _TAIL.size + _GENERATION.size):
            raise ValueError("vault state of an unknown size")
        seq, boot = _TAIL.unpack_from(data, _ACC_SIZE)
        rest = data[_ACC_SIZE + _TAIL.size :]
        generation = _GENERATION.unpack(rest)[0] if rest else 0
        return cls(Accumulator.decode(key, data[:_ACC_SIZE]), seq, boot, generation)
