"""The path tree of an unlocked vault: every live record by path and by id.

Paths live inside each record's sealed metadata, so unlocking decrypts all
metadata once and builds this tree in memory; it is never stored in clear.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import paths
from ..crypto import wipe
from ..errors import MemoryNotFound, NotADirectory
from .records import FILE, Meta


@dataclass
class Entry:
    """One live record as the unlocked vault knows it."""

    record_id: bytes
    meta: Meta
    data_key: bytearray


class PathTree:
    """Entries by path and by id. An orphan (a file unlinked while open) has
    an id but no path: it is reached by id only, until it is shredded."""

    def __init__(self) -> None:
        self.by_path: dict[str, Entry] = {}
        self.by_id: dict[bytes, Entry] = {}
        self._children: dict[str, dict[str, Entry]] = {paths.ROOT: {}}
        self._subdirs: dict[str, int] = {}  # directory -> how many directories it holds

    def __len__(self) -> int:
        return len(self.by_id)

    def files(self) -> int:
        return sum(1 for e in self.by_id.values() if e.meta.type == FILE and not e.meta.orphan)

    def named(self) -> list[Entry]:
        """Every entry that has a path (no orphans)."""
        return list(self.by_path.values())

    def orphans(self) -> list[Entry]:
        return [e for e in self.by_id.values() if e.meta.orphan]

    def add(self, entry: Entry) -> None:
        self.by_id[entry.record_id] = entry
        if entry.meta.orphan:
            return
        path = entry.meta.path
        self.by_path[path] = entry
        self._children.setdefault(paths.parent(path), {})[paths.basename(path)] = entry
        if entry.meta.is_dir:
            self._children.setdefault(path, {})
            parent = paths.parent(path)
            self._subdirs[parent] = self._subdirs.get(parent, 0) + 1

    def replace(self, entry: Entry) -> None:
        """Put a file's new version where its old one is (same id, same path)."""
        self.by_id[entry.record_id] = entry
        path = entry.meta.path
        self.by_path[path] = entry
        self._children[paths.parent(path)][paths.basename(path)] = entry

    def remove(self, entry: Entry) -> None:
        del self.by_id[entry.record_id]
        if entry.meta.orphan:
            return
        path = entry.meta.path
        del self.by_path[path]
        self._children.get(paths.parent(path), {}).pop(paths.basename(path), None)
        if entry.meta.is_dir:
            if not self._children.get(path):
                self._children.pop(path, None)
            parent = paths.parent(path)
            self._subdirs[parent] -= 1

    def link_count(self, entry: Entry | None) -> int:
        """st_nlink: 2 plus its subdirectories for a directory (None: the root),
        1 for a file or symlink, 0 for an orphan."""
        if entry is None:
            return 2 + self._subdirs.get(paths.ROOT, 0)
        if entry.meta.orphan:
            return 0
        if entry.meta.is_dir:
            return 2 + self._subdirs.get(entry.meta.path, 0)
        return 1

    def at(self, norm: str) -> Entry:
        """The entry at a normalised path (MemoryNotFound if none)."""
        entry = self.by_path.get(norm)
        if entry is None:
            raise MemoryNotFound(norm)
        return entry

    def of(self, record_id: bytes) -> Entry:
        """The entry of a record id (MemoryNotFound once it is gone)."""
        entry = self.by_id.get(record_id)
        if entry is None:
            raise MemoryNotFound(record_id.hex())
        return entry

    def children(self, norm: str) -> dict[str, Entry]:
        """The entries of a directory by name (empty for a file or a missing path)."""
        return self._children.get(norm, {})

    def require_dir(self, norm: str) -> None:
        if norm != paths.ROOT and not self.at(norm).meta.is_dir:
            raise NotADirectory(norm)

    def subtree(self, norm: str) -> list[Entry]:
        """Every entry strictly below the directory ``norm`` (none for a file)."""
        found = []
        stack = [norm]
        while stack:
            for child in self._children.get(stack.pop(), {}).values():
                found.append(child)
                if child.meta.is_dir:
                    stack.append(child.meta.path)
        return found

    def missing_parents(self) -> tuple[set[str], bool]:
        """Directories that entries lie below but that have no record; whether one is a file."""
        missing: set[str] = set()
        below_file = False
        for path in self.by_path:
            parent = paths.parent(path)
            found = self.by_path.get(parent)
            if found is None and parent != paths.ROOT:
                missing.add(parent)
                missing.update(a for a in paths.ancestors(parent) if a not in self.by_path)
            elif found is not None and not found.meta.is_dir:
                below_file = True
        return missing, below_file

    def clear(self) -> None:
        """Forget every entry, wiping its data key."""
        for entry in self.by_id.values():
            wipe(entry.data_key)
        self.by_path.clear()
        self.by_id.clear()
        self._children.clear()
        self._subdirs.clear()
