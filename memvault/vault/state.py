"""The vault's sealed state: the record accumulator and the journal position.

Sealed under the master key (kind STATE) and rewritten in the same
transaction or journal entry as every change, so that what LMDB says was
applied, and whether a journaled session was left open, can be neither read
nor changed without the key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .accumulator import Accumulator
from .journal import NO_BOOT

_TAIL = struct.Struct(">Q16s")  # last journal sequence number applied, boot id of an open session


@dataclass
class VaultState:
    acc: Accumulator
    journal_seq: int = 0
    journal_boot: bytes = NO_BOOT

    @property
    def session_open(self) -> bool:
        """A journaled session (a mount) was open when this state was written."""
        return self.journal_boot != NO_BOOT

    def encode(self) -> bytes:
        return self.acc.encode() + _TAIL.pack(self.journal_seq, self.journal_boot)

    @classmethod
    def decode(cls, key: bytearray, data: bytes | bytearray) -> VaultState:
        data = bytes(data)
        split = len(data) - _TAIL.size
        if split < 0:
            raise ValueError("vault state too short")
        seq, boot = _TAIL.unpack(data[split:])
        return cls(Accumulator.decode(key, data[:split]), seq, boot)
