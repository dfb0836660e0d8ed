"""What was imported from where, kept inside the vault (so encrypted like the rest).

One small JSON memory: per source key, its fingerprint (size and mtime, or
a Cursor conversation's shape), the memory it became, that memory's digest
and its message count. A source whose fingerprint is unchanged is not even
parsed; one whose rendering has the same digest is not written again.
"""

from __future__ import annotations

import json

from ..api import Memories
from ..errors import MemoryNotFound

STATE_PATH = ".memvault/ingest-state.json"


class IngestState:
    def __init__(self, entries: dict[str, dict] | None = None) -> None:
        self.entries: dict[str, dict] = entries or {}
        self.changed = False
        self._by_dest = {e.get("dest"): (k, e.get("digest")) for k, e in self.entries.items()}

    @classmethod
    def load(cls, vault: Memories) -> IngestState:
        try:
            data = json.loads(vault.get(STATE_PATH))
        except MemoryNotFound:
            return cls()
        except ValueError:  # unreadable: start over (imports are idempotent anyway)
            return cls()
        return cls(data.get("sources", {}))

    def get(self, key: str) -> dict:
        return self.entries.get(key, {})

    def set(self, key: str, **entry) -> None:
        if self.entries.get(key) != entry:
            self.entries[key] = entry
            self._by_dest[entry.get("dest")] = (key, entry.get("digest"))
            self.changed = True

    def owner_of(self, destination: str, digest: str) -> str | None:
        """Another source already stored exactly this memory at this path."""
        key, stored = self._by_dest.get(destination, (None, None))
        return key if stored == digest else None

    def save(self, vault: Memories) -> None:
        if self.changed:
            data = json.dumps({"version": 1, "sources": self.entries}, indent=0, sort_keys=True)
            vault.put(STATE_PATH, data.encode())
            self.changed = False
