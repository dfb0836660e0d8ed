"""What an unlocked vault found damaged, and how to say so."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import _Write


@dataclass
class Damage:
    records: dict[bytes, str] = field(default_factory=dict)
    """Records that cannot be read, by stored id: what is wrong with each."""
    paths: dict[bytes, str] = field(default_factory=dict)
    """Their paths, where something still names them (an old index snapshot)."""
    misfiled: dict[bytes, tuple[bytes, bytes, bytes]] = field(default_factory=dict)
    """Records stored under a damaged id: stored id -> (true id, wrapped key, value)."""
    recreated: list[_Write] = field(default_factory=list)
    """Directories standing in (in memory) for damaged ones, so their children stay reachable."""
    unverified: bool = False
    """Some record's generation is unreadable: the integrity sum cannot be checked."""
    unexplained: bool = False
    """The integrity sum does not match what could be read: damage cannot be told
    from removed or rolled-back records (repair then needs explicit acceptance)."""

    def __bool__(self) -> bool:
        return bool(self.records)

    def mark(self, record_id: bytes, reason: str, path: str | None = None) -> None:
        self.records[record_id] = reason
        if path is not None:
            self.paths[record_id] = path

    def name(self, record_id: bytes) -> str:
        return self.paths.get(record_id) or "record " + record_id.hex()[:12]

    def describe(self, limit: int = 5) -> str:
        """The damaged records, for a message: paths where known, else record ids."""
        shown = [
            f"{self.name(rid)} ({reason})" for rid, reason in list(self.records.items())[:limit]
        ]
        more = len(self.records) - len(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        if self.unexplained:
            text += (
                "; and what can be read does not add up to the vault's integrity sum, so "
                "records may also be missing or rolled back"
            )
        return text

    def clear(self) -> None:
        self.records.clear()
        self.paths.clear()
        self.misfiled.clear()
        self.recreated = []
        self.unverified = self.unexplained = False
