"""Giving memory back to the system after loading a large index.

Loading allocates and frees hundreds of megabytes in small pieces
(decrypted values, per-record vectors). glibc keeps freed pieces inside its
heap, where a few live objects pin them, and the daemon would carry them
for its whole life: ``trim`` returns them (116 MB at 20,000 memories).
``drop_mapped`` does the same for the pages of the vault file read through
LMDB's map.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
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
