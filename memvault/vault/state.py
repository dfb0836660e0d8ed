"""The vault's sealed state: the record accumulator, the journal position, the
generation (how many commits the vault has had: rollback.py) and the head of
the audit trail (audit.py).

Sealed under the master key (kind STATE) and rewritten in the same
transaction as every change (on a mount, in the journal entry that closes a
burst of changes: Writer.write), so that what LMDB says was applied, and
whether a journaled session was left open, can be neither read nor changed
without the key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .accumulator import ENCODED_SIZE, Accumulator
from .journal import NO_BOOT

_TAIL = struct.Struct(">Q16s")  # last journal sequence number applied, boot id of an open session
_GENERATION = struct.Struct(">Q")
_AUDIT_HEAD = struct.Struct(">Q32s")  # the audit trail's last entry: number and hash
_ACC_SIZE = ENCODED_SIZE


@dataclass
class VaultState:
    acc: Accumulator
    journal_seq: int = 0
    journal_boot: bytes = NO_BOOT
    generation: int = 0
    """Grows by one with every commit; a state written before it existed reads as 0."""
    audit_seq: int = 0
    audit_link: bytes = bytes(32)
    """The audit trail's last entry (audit.py); none in a state written before it."""

    @property
    def session_open(self) -> bool:
        """A journaled session (a mount) was open when this state was written."""
        return self.journal_boot != NO_BOOT

    def encode(self) -> bytes:
        tail = _TAIL.pack(self.journal_seq, self.journal_boot)
        head = _AUDIT_HEAD.pack(self.audit_seq, self.audit_link)
        return self.acc.encode() + tail + _GENERATION.pack(self.generation) + head

    @classmethod
    def decode(cls, key: bytearray, data: bytes | bytearray) -> VaultState:
        data = bytes(data)
        base = _ACC_SIZE + _TAIL.size
        if len(data) not in (
            base,
            base + _GENERATION.size,
            base + _GENERATION.size + _AUDIT_HEAD.size,
        ):
            raise ValueError("vault state of an unknown size")
        seq, boot = _TAIL.unpack_from(data, _ACC_SIZE)
        state = cls(Accumulator.decode(key, data[:_ACC_SIZE]), seq, boot)
        if len(data) > base:
            state.generation = _GENERATION.unpack_from(data, base)[0]
        if len(data) > base + _GENERATION.size:
            state.audit_seq, state.audit_link = _AUDIT_HEAD.unpack_from(
                data, base + _GENERATION.size
            )
        return state
