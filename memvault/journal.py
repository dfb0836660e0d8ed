"""The journal: changes that are committed but not yet in LMDB.

A mounted vault must not lose a closed file if its daemon is killed, but an
fsync per close would make every small file cost a disk flush. So each change
is appended to ``<vault>-journal`` with one write() (it is then in the
kernel's page cache and survives the death of the process), applied to the
in-memory overlay, and moved into LMDB in batches: one commit and one fsync
per batch, after which the journal is emptied. fsync() on a file, lock and
close flush at once; an unlock replays what a killed daemon left.

Entries hold exactly what the LMDB commit would have held (random record ids
and sealed values), each with a sequence number and a BLAKE2b MAC keyed from
the master key: a torn tail (power cut) is ignored, a forged, reordered or
replayed entry is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_HEAD = struct.Struct(">IQ")  # payload length, sequence number
_OP = struct.Struct(">BBHI")  # database index, op, key length, value length
_MAC_SIZE = 32
_IOV_MAX = os.sysconf("SC_IOV_MAX")
PUT, DELETE = 1, 2


class JournalError(Exception):
    """The journal holds an entry that fails its MAC (not a torn tail)."""


@dataclass(frozen=True)
class Op:
    db: int
    kind: int
    key: bytes
    value: bytes = b""


def journal_path(vault: Path) -> Path:
    return vault.with_name(vault.name + "-journal")


def _encode(ops: list[Op]) -> list[bytes]:
    """The payload as parts, not joined: a 256 MiB value is not copied."""
    parts = []
    for op in ops:
        parts.append(_OP.pack(op.db, op.kind, len(op.key), len(op.value)))
        parts.append(op.key)
        parts.append(op.value)
    return parts


def _decode(payload: bytes) -> list[Op]:
    ops, at = [], 0
    while at < len(payload):
        db, kind, key_len, value_len = _OP.unpack_from(payload, at)
        at += _OP.size
        key = payload[at : at + key_len]
        at += key_len
        value = payload[at : at + value_len]
        at += value_len
        ops.append(Op(db, kind, key, value))
    return ops


class Journal:
    def __init__(self, path: Path, key: bytearray, *, readonly: bool = False) -> None:
        self.path = path
        self._key = key
        flags = os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT | os.O_APPEND
        self._fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
        self.size = os.fstat(self._fd).st_size

    def _mac(self, *parts: bytes) -> bytes:
        mac = hashlib.blake2b(key=self._key, digest_size=_MAC_SIZE)
        for part in parts:
            mac.update(part)
        return mac.digest()

    def append(self, seq: int, ops: list[Op]) -> None:
        """Append one entry with a single writev(); on any failure, leave no partial entry."""
        parts = _encode(ops)
        head = _HEAD.pack(sum(map(len, parts)), seq)
        entry = [head, *parts, self._mac(head, *parts)]
        if len(entry) > _IOV_MAX:
            entry = [b"".join(entry)]  # many small values: one copy is cheap
        size = sum(map(len, entry))
        try:
            written = os.writev(self._fd, entry)
            if written != size:
                raise OSError(28, "short write to the journal")
        except OSError:
            os.ftruncate(self._fd, self.size)
            raise
        self.size += size

    def entries(self) -> Iterator[tuple[int, list[Op]]]:
        """Valid entries in order; stops at a torn tail, raises on a forged entry."""
        data = os.pread(self._fd, self.size, 0)
        at = 0
        while at + _HEAD.size <= len(data):
            length, seq = _HEAD.unpack_from(data, at)
            end = at + _HEAD.size + length + _MAC_SIZE
            if end > len(data):
                return  # torn tail: never acknowledged to anyone after a power cut
            head = data[at : at + _HEAD.size]
            payload = data[at + _HEAD.size : end - _MAC_SIZE]
            if not hmac.compare_digest(data[end - _MAC_SIZE : end], self._mac(head, payload)):
                if end == len(data):
                    return  # a torn last entry whose length field survived
                raise JournalError("a journal entry fails its MAC")
            yield seq, _decode(payload)
            at = end

    def reset(self) -> None:
        """Empty the journal (after its entries are durable in LMDB)."""
        os.ftruncate(self._fd, 0)
        self.size = 0

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
