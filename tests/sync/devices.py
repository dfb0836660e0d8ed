"""Devices for the sync tests: each its own vault, syncing in this process through
the real rclone command and a real server (servers.py)."""

from __future__ import annotations

from pathlib import Path

from memvault.sync import group
from memvault.sync.engine import Report, Sync
from memvault.sync.remote import RcloneRemote
from memvault.sync.state import SyncState, load
from memvault.vault import Vault
from memvault.vault.records import DIRECTORY, FILE
from tests.conftest import FAST_KDF, PASSPHRASE

from .servers import Server

SYNC_PASSPHRASE = bytearray(b"correct horse battery staple")


class Device:
    def __init__(self, tmp: Path, name: str, server: Server) -> None:
        self.name = name
        self.home = tmp / name
        self.home.mkdir()
        self.path = self.home / "memory.vault"
        self.server = server
        self.vault = Vault.create(self.path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None)
        self._remote = RcloneRemote(
            server.remote, config=str(server.config), scratch=self.home / "scratch"
        )

    def remote(self) -> RcloneRemote:
        return self._remote

    def start_group(self) -> Report:
        state = group.start(
            self.vault,
            self.remote(),
            bytearray(SYNC_PASSPHRASE),
            name=self.name,
            kdf=FAST_KDF,
            config=str(self.server.config),
        )
        return Sync(self.vault, state, self.remote()).run()

    def join(self) -> Report:
        opened = group.open_group(self.remote(), bytearray(SYNC_PASSPHRASE))
        state = group.join(
            self.vault, self.remote(), opened, name=self.name, config=str(self.server.config)
        )
        return Sync(self.vault, state, self.remote()).run()

    def state(self) -> SyncState:
        state = load(self.vault)
        assert state is not None
        return state

    def sync(self, *, compact: bool = False) -> Report:
        return Sync(self.vault, self.state(), self.remote()).run(compact=compact)

    def tree(self) -> dict[str, bytes | None]:
        """Every file with its content, every directory as None."""
        out: dict[str, bytes | None] = {}
        for record_id, meta in self.vault.walk_records():
            if meta.type == FILE:
                out[meta.path] = self.vault.get_record(record_id)
            elif meta.type == DIRECTORY:
                out[meta.path] = None
        return out

    def close(self) -> None:
        self._remote.close()
        self.vault.close()
