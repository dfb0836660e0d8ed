"""Inode numbers for the life of a mount.

Inodes are keyed by record id, which a record keeps across renames, so a
renamed file keeps its inode and the kernel's caches stay coherent. The root
directory has no record; it is pyfuse3.ROOT_INODE.
"""

from __future__ import annotations

import pyfuse3

ROOT = pyfuse3.ROOT_INODE


class InodeTable:
    def __init__(self) -> None:
        self._by_record: dict[bytes, int] = {}
        self._by_inode: dict[int, bytes] = {}
        self._next = ROOT + 1

    def inode(self, record_id: bytes) -> int:
        """The inode of a record, allocating one on first sight."""
        inode = self._by_record.get(record_id)
        if inode is None:
            inode = self._next
            self._next += 1
            self._by_record[record_id] = inode
            self._by_inode[inode] = record_id
        return inode

    def known(self, record_id: bytes) -> int | None:
        """The inode of a record if one was issued (read from any thread)."""
        return self._by_record.get(record_id)

    def record(self, inode: int) -> bytes | None:
        """The record of an inode (None for the root); KeyError if never issued."""
        if inode == ROOT:
            return None
        return self._by_inode[inode]
