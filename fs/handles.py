"""Open files: one shared state per open inode.

Every write() is committed to the vault (journaled) before it returns, so
there is nothing to save at close: the kernel is told not to send FLUSH,
and a killed daemon loses no write that returned. What a state keeps is the
plaintext of the chunks used last (reads and partial writes of a chunk need
not decrypt it again). A file unlinked while open stays a record without
a name (an orphan) until its last handle closes, so its handles go on
reading and writing it as any other.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

CACHED_CHUNKS = 32
"""Chunks (64 KiB each) kept decrypted per open file: 2 MiB at most."""


@dataclass
class OpenFile:
    record_id: bytes
    handles: set[int] = field(default_factory=set)
    _chunks: OrderedDict[int, bytearray] = field(default_factory=OrderedDict)
    stale: bool = False  # changed behind the mount (a sync): drop the chunks at the next request

    def chunk(self, index: int) -> bytearray | None:
        if self.stale:  # set by another thread after its change: cleared here, in the mount's
            self.stale = False
            self._chunks.clear()
        found = self._chunks.get(index)
        if found is not None:
            self._chunks.move_to_end(index)
        return found

    def remember(self, index: int, content: bytearray) -> None:
        self._chunks[index] = content
        self._chunks.move_to_end(index)
        while len(self._chunks) > CACHED_CHUNKS:
            self._chunks.popitem(last=False)

    def forget_chunks(self) -> None:
        """After a truncation: what was cached may be longer than the file now."""
        self._chunks.clear()


class OpenFiles:
    def __init__(self) -> None:
        self._by_record: dict[bytes, OpenFile] = {}
        self._by_handle: dict[int, OpenFile] = {}
        self._ids = itertools.count(1)

    def open(self, record_id: bytes) -> tuple[int, OpenFile]:
        state = self._by_record.get(record_id)
        if state is None:
            state = self._by_record[record_id] = OpenFile(record_id)
        fh = next(self._ids)
        state.handles.add(fh)
        self._by_handle[fh] = state
        return fh, state

    def get(self, fh: int) -> OpenFile:
        return self._by_handle[fh]

    def of_record(self, record_id: bytes) -> OpenFile | None:
        return self._by_record.get(record_id)

    def close(self, fh: int) -> OpenFile:
        """Forget a handle; the inode's state goes with its last handle."""
        state = self._by_handle.pop(fh)
        state.handles.discard(fh)
        if not state.handles and self._by_record.get(state.record_id) is state:
            del self._by_record[state.record_id]
        return state
