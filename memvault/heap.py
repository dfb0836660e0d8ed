"""Giving memory back to the system after loading a large index.

Loading allocates and frees hundreds of megabytes in small pieces
(decrypted values, per-record vectors). glibc keeps freed pieces inside its
heap, where a few live objects pin them, and the daemon would carry them
for its whole life: ``trim`` returns them (116 MB at 20,000 memories).
``drop_mapped`` does the same for the pages of the vault file read through
LMDB's map. Searches and embeddings do the same on a smaller scale (45 MB
of freed activations and temporaries after 200 searches at 20,000
memories): their owner releases both once a burst has paused (``Debounced``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def trim() -> None:
    """Release free heap pages (glibc's malloc_trim; nothing elsewhere)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


class Debounced:
    """``action`` run once no ``poke`` came for ``delay`` seconds, in a thread of
    its own: each poke costs a deadline set under a lock."""

    def __init__(self, delay: float, action: Callable[[], None]) -> None:
        self._delay, self._action = delay, action
        self._due: float | None = None
        self._running = False
        self._stopped = False
        self._armed = threading.Condition()
        self._thread: threading.Thread | None = None

    def poke(self) -> None:
        with self._armed:
            if self._stopped:
                return
            already = self._due is not None
            self._due = time.monotonic() + self._delay
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="debounced", daemon=True)
                self._thread.start()
            elif not already:
                self._armed.notify()

    @property
    def pending(self) -> bool:
        """Poked and not run since, or running: a benchmark waits for this before
        timing anything, as it waits for the other background work."""
        with self._armed:
            return self._due is not None or self._running

    def stop(self) -> None:
        """Cancel a pending run, and wait for one already running (its action
        may use what the caller is about to close)."""
        with self._armed:
            self._stopped, self._due = True, None
            self._armed.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._armed:
                while not self._stopped and (self._due is None or self._due > time.monotonic()):
                    self._armed.wait(None if self._due is None else self._due - time.monotonic())
                if self._stopped:
                    return
                self._due, self._running = None, True
            try:
                self._action()
            finally:
                with self._armed:
                    self._running = False


MADV_DONTNEED = 4


def drop_mapped(path: str | os.PathLike) -> None:
    """Take this process's read-only shared mappings of ``path`` out of its
    resident set: LMDB maps the vault file, and reading every record at
    unlock leaves the whole file counted against the daemon, though the
    pages belong to the page cache. They are read back from it when next
    touched (Linux; nothing elsewhere)."""
    libc, real = _libc(), os.path.realpath(path)
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return
    for line in maps:
        fields = line.split(maxsplit=5)
        if libc is None or len(fields) < 6 or fields[5] != real or fields[1] != "r--s":
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_DONTNEED)
