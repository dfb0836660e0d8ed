"""What the CLI and ingest need from a vault, declared: the in-process
:class:`~memvault.vault.Vault` and :class:`~memvault.mounted.MountedVault`
(the same calls through a live mount, so its daemon stays the only writer)
both provide it. Paths are vault paths: relative, ``/``-separated."""

from __future__ import annotations

from typing import Protocol

from .vault.records import Meta


class Memories(Protocol):
    def put(
        self, path: str, data: bytes, *, mode: int | None = None, mtime_ns: int | None = None
    ) -> Meta:
        """Store ``data`` at ``path`` (missing parents created); atomic. Without
        ``mode`` a replaced memory keeps its own (a new one gets the default); without
        ``mtime_ns`` the time is now."""

    def exists(self, path: str) -> bool:
        """Whether anything is at ``path``."""

    def get(self, path: str) -> bytes:
        """The content of the memory at ``path``."""

    def list(self, directory: str = "") -> list[tuple[str, Meta]]:
        """The entries of ``directory``, by name."""

    def walk(self) -> list[Meta]:
        """Every entry of the vault, by path."""

    def delete(self, path: str, *, recursive: bool = False) -> int:
        """Crypto-shred ``path`` (a tree with ``recursive``); return how many records."""

    def rename(self, old: str, new: str) -> None:
        """Move ``old`` to ``new``, replacing a file there."""

    def compact(self) -> tuple[int, int]:
        """Rewrite the file so no shredded byte remains; its size before and after."""

    def note(self, op: str, detail: str = "") -> None:
        """Record a vault-level event (an export, an import) in the audit trail."""

    def close(self) -> None: ...

    def __enter__(self) -> Memories: ...

    def __exit__(self, *exc: object) -> None: ...
