"""The result cache behind the mount's read-only ``search/`` directory.

Looking up ``search/<query>`` runs the query (the language is memvault.search's);
the rendered result is kept here for a few seconds so that ``stat`` reports
its true size and ``read`` returns the same bytes; a result is looked up
again at every open, and the kernel drops its pages then (no keep_cache), so
no stale page is served. Any change to the vault makes every
kept result stale at once (a shredded memory must never be served from it,
nor an edited one with its old text). Each name keeps one inode for the
mount's life, and the most recent names are what ``ls search/`` lists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

RESULT_TTL_S = 5.0
MAX_RECENT = 64


@dataclass
class CachedResult:
    inode: int
    data: bytes
    made: float
    version: int  # of the vault it was computed from

    def fresh(self, version: int) -> bool:
        return version == self.version and time.monotonic() - self.made < RESULT_TTL_S


class ResultCache:
    """Recent queries by file name, each with a stable inode for the mount's life."""

    def __init__(self, first_inode: int) -> None:
        self._by_name: dict[str, CachedResult] = {}
        self._by_inode: dict[int, str] = {}
        self._next = first_inode
        self.version = 0  # bumped by every change of the vault (any thread)

    def invalidate(self, *event) -> None:
        """A vault listener: every result kept so far is stale."""
        self.version += 1

    def current(self, name: str) -> CachedResult | None:
        """The result kept for ``name`` if the vault has not changed since (and it is recent)."""
        entry = self._by_name.get(name)
        return entry if entry is not None and entry.fresh(self.version) else None

    def get(self, name: str) -> CachedResult | None:
        return self._by_name.get(name)

    def name_of(self, inode: int) -> str | None:
        return self._by_inode.get(inode)

    def store(self, name: str, data: bytes, version: int) -> CachedResult:
        """Keep ``data``, computed from the vault at ``version`` (read before the query ran)."""
        entry = self._by_name.get(name)
        if entry is None:
            entry = CachedResult(self._next, data, time.monotonic(), version)
            self._by_inode[self._next] = name
            self._next += 1
        else:
            entry.data, entry.made, entry.version = data, time.monotonic(), version
        self._by_name.pop(name, None)
        self._by_name[name] = entry  # most recent last
        while len(self._by_name) > MAX_RECENT:
            old_name = next(iter(self._by_name))
            del self._by_inode[self._by_name.pop(old_name).inode]
        return entry

    def names(self) -> list[str]:
        return list(self._by_name)
