"""Open files: one shared buffer per open inode, committed on close.

All handles of an inode share its buffer, so a write through one is read
through another at once. The buffer is loaded on first read or write and
committed to the vault when a handle is flushed (close) or fsynced; the
kernel's close() returns only after that commit, so nothing closed is lost
if the daemon dies.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field


@dataclass
class OpenFile:
    record_id: bytes
    data: bytearray | None = None  # None until first needed
    dirty: bool = False
    handles: set[int] = field(default_factory=set)
    unlinked: bool = False  # shredded while open: reads go on, nothing is saved
    committing: bytearray | None = None  # the buffer a commit is encrypting, not copied
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards the two above

    def writable(self) -> bytearray:
        """The buffer to change in place (call with ``lock`` held).

        A commit encrypts the buffer itself rather than a copy of it (a copy
        of a 256 MiB file costs 256 MiB more), so a change arriving meanwhile
        goes to a copy instead of resizing the buffer under the encryption.
        """
        assert self.data is not None
        if self.data is self.committing:
            self.data = bytearray(self.data)
        return self.data


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

    def detach(self, record_id: bytes) -> None:
        """The record was shredded: its open handles keep their data, nothing is saved."""
        state = self._by_record.pop(record_id, None)
        if state is not None:
            state.unlinked = True
            state.dirty = False
