"""Open files: one shared state per open inode.

Every write() is committed to the vault (journaled) before it returns, so
there is nothing to save at close: the kernel is told not to send FLUSH,
and a killed daemon loses no write that returned. What a state keeps is the
plaintext of the chunks used last (reads and partial writes of a chunk need
not decrypt it again). A file unlinked while open stays a record without
a name (an orphan) until its last handle closes, so its handles go on
reading and writing it as any other. Small files also leave their plaintext
in RecentBodies at their last close: reopened unchanged, they are not
decrypted again.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

CACHED_CHUNKS = 8
"""Chunks kept decrypted per open file: 2 MiB at most (256 KiB chunks)."""
RECENT_BYTES = 8 << 20
"""Plaintext of recently used small files kept across opens (see RecentBodies)."""


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
        """A new handle on a record."""
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


class RecentBodies:
    """The plaintext of small files used lately, by record id and body generation,
    and whether the kernel's page cache holds it too.

    A file is opened, read or appended to and closed again and again (an
    agent's notes, `grep -r`); its open state goes with its last close, so
    each open would decrypt it again. Kept here, a later open whose file still
    has the same content (the same body generation) decrypts nothing. Any
    change to a record drops its entry (a vault listener: a shred leaves no
    plaintext behind here), and RECENT_BYTES bound them all. Listeners run in
    the writer's thread: a lock keeps the dictionary whole.
    """

    def __init__(self, limit: int = RECENT_BYTES) -> None:
        self._limit = limit
        self._size = 0
        self._bodies: OrderedDict[bytes, tuple[int, bytes, bool]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, record_id: bytes, body_gen: int) -> bytes | None:
        with self._lock:
            found = self._bodies.get(record_id)
            if found is None or found[0] != body_gen:
                return None
            self._bodies.move_to_end(record_id)
            return found[1]

    def put(self, record_id: bytes, body_gen: int, content: bytes, *, cached: bool = False) -> None:
        """``cached``: the kernel's pages hold this content already."""
        with self._lock:
            self._pop(record_id)
            if len(content) > self._limit:
                return
            self._bodies[record_id] = (body_gen, content, cached)
            self._size += len(content)
            while self._size > self._limit:
                self._size -= len(self._bodies.popitem(last=False)[1][1])

    def cached(self, record_id: bytes, body_gen: int) -> bool:
        """Whether the kernel was given (or read) this content whole."""
        with self._lock:
            found = self._bodies.get(record_id)
            return found is not None and found[0] == body_gen and found[2]

    def to_hand_over(self, record_id: bytes, body_gen: int) -> bytes | None:
        """This content, if the kernel's pages do not hold it yet; from now on they do."""
        with self._lock:
            found = self._bodies.get(record_id)
            if found is None or found[0] != body_gen or found[2]:
                return None
            self._bodies[record_id] = (body_gen, found[1], True)
            return found[1]

    def mark_cached(self, record_id: bytes, body_gen: int) -> None:
        """The kernel read this content whole (its pages hold it now)."""
        with self._lock:
            found = self._bodies.get(record_id)
            if found is not None and found[0] == body_gen:
                self._bodies[record_id] = (body_gen, found[1], True)

    def forget(self, record_id: bytes) -> None:
        with self._lock:
            self._pop(record_id)

    def _pop(self, record_id: bytes) -> None:
        old = self._bodies.pop(record_id, None)
        if old is not None:
            self._size -= len(old[1])

    def on_change(self, kind: str, record_id: bytes, path: str, data: bytes | None) -> None:
        """A vault listener: new content or a shred; a move keeps the content."""
        if kind != "move":
            self.forget(record_id)
