"""Serving a vault on a mountpoint with pyfuse3 + trio until it is locked.

The daemon's trio loop runs the FUSE request tasks, the control socket
(`memvault status|compact|reindex|lock` and key changes, control_server.py) and the stop
signals. Locking, however it is asked for (`memvault lock`, SIGTERM, SIGINT,
SIGHUP, `fusermount -u`), goes the same way: the FUSE loop ends, the mount
is detached, then the vault is closed (pending shreds compacted, keys
wiped), and only then does a waiting `lock` get its answer.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from .. import audit_requests, keys, signing
from ..crypto import wipe
from ..errors import UsageError
from ..search import SearchService, open_search
from ..sync.service import SyncServices
from ..vault import Vault
from ..vault.audit import Caller, current_caller, name_process
from . import readers
from .collector import collect_at_lulls
from .control_server import ControlServer
from .operations import VaultOperations
from .runtime import MountRecord

log = logging.getLogger("memvault.fs")

FS_NAME = "memvault"
READER_TASKS = 8
MAX_TASKS = 64
EMBED_WORKERS = min(2, os.cpu_count() or 1)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
NOTED_BY_CLI = frozenset({"export", "import"})
READ_AHEAD_KB = 1024
"""The mount's readahead: a large file is read in 1 MiB requests (the most the
kernel sends at once, as its writes already are), not 128 KiB ones."""


def mount_options(allow_other: bool) -> set[str]:
    """The kernel checks modes itself (default_permissions) only for a mount
    other users reach; the owner's own are checked by the handlers, which
    saves a round trip per change in a directory (see permissions.py)."""
    options = {f"fsname={FS_NAME}", f"subtype={FS_NAME}", "noatime"}
    if allow_other:
        options |= {"allow_other", "default_permissions"}
    return options


def serve(
    vault: Vault,
    mountpoint: Path,
    *,
    allow_other: bool = False,
    xattrs: bool = False,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Mount ``vault`` and serve it until it is locked.

    Always unmounts and closes the vault (pending shreds compacted, keys
    wiped) before returning; an error closing it is raised.
    """
    # One onnxruntime thread per run: a query runs on its own (normal
    # priority) thread, the background workers on theirs, at idle priority.
    search = open_search(vault, threads=1, workers=EMBED_WORKERS)
    ops = VaultOperations(
        vault,
        search=search,
        mountpoint=str(mountpoint),
        xattrs=xattrs,
        check_access=not allow_other,
    )
    record = MountRecord(str(vault.path), str(mountpoint), os.getpid(), time.time())
    syncing = SyncServices(vault, on_applied=ops.forget_paths)
    daemon = _Daemon(vault, search, syncing, record)
    readers.install(after_reply=vault.catch_up)
    pyfuse3.init(ops, str(mountpoint), mount_options(allow_other))
    try:
        record.save()
        search.start()
        syncing.start()
        threading.Thread(target=search.index_all, name="indexer", daemon=True).start()
        threading.Thread(target=raise_readahead, args=(mountpoint,), daemon=True).start()
        trio.run(daemon.run, on_ready)
    finally:
        daemon.unmount()
        daemon.close_vault()
    if daemon.close_error is not None:
        raise daemon.close_error


def raise_readahead(mountpoint: Path) -> None:
    """(A thread.) Raise the mount's readahead to READ_AHEAD_KB once the kernel has
    set it up (a stat of the mount is answered only after FUSE's INIT, which
    may lower it): 8 times fewer round trips for a large file, read at twice
    the speed here. The setting is in sysfs, which only root may write: for
    anyone else the kernel's 128 KiB stay, and nothing else changes."""
    try:
        dev = os.stat(mountpoint).st_dev
        setting = Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb")
        if int(setting.read_text()) < READ_AHEAD_KB:
            setting.write_text(f"{READ_AHEAD_KB}\n")
    except (OSError, ValueError) as exc:
        log.debug("readahead left as the kernel set it: %s", type(exc).__name__)


class _Daemon:
    """One mount's life: serving, answering control requests, locking once."""

    def __init__(
        self, vault: Vault, search: SearchService, syncing: SyncServices, record: MountRecord
    ) -> None:
        self.vault = vault
        self.search = search
        self.syncing = syncing
        self.record = record
        self.control = ControlServer(
            record.control_path,
            {
                "status": self._status,
                "compact": self._compact,
                "reindex": self._reindex,
                "keys": self._keys,
                "lock": self._lock,
                "backup": self._backup,
                "sync": self._sync,
                "audit": self._audit,
                "caller": self._caller,
                "note": self._note,
            },
            MountRecord.log_for(vault.path),
        )
        self.close_error: Exception | None = None
        self._lock_caller: Caller | None = None  # who asked to lock (audit.py)
        self._mounted = True
        self._closed = False
        self._locked = trio.Event()
        self._stopping = False

    async def run(self, on_ready: Callable[[], None] | None) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.control.serve)
            signals = trio.CancelScope()
            nursery.start_soon(self._stop_on_signals, signals)
            collecting = trio.CancelScope()
            nursery.start_soon(self._collect_at_lulls, collecting)
            if on_ready is not None:
                on_ready()
            try:
                # Idle reader tasks kept waiting on /dev/fuse: with fewer than
                # two, pyfuse3 starts (and ends) a task for every request.
                await pyfuse3.main(min_tasks=READER_TASKS, max_tasks=MAX_TASKS)
                self._stopping = True  # the session is closing: never terminate it again
                # A second `lock` waits for this one's end like the first.
                self.control.refuse("The vault is being locked.", but=frozenset({"lock"}))
                self.unmount()
                await trio.to_thread.run_sync(self.close_vault)
            finally:
                self._locked.set()
                self.control.stop()
                signals.cancel()
                collecting.cancel()

    def _terminate(self, why: str) -> None:
        if not self._stopping:
            self._stopping = True
            log.info("%s: locking", why)
            pyfuse3.terminate()

    async def _collect_at_lulls(self, scope: trio.CancelScope) -> None:
        with scope:
            # New records' keys made ahead for the next burst of creates.
            await collect_at_lulls(self.vault.activity, self.vault.prepare_records)

    async def _stop_on_signals(self, scope: trio.CancelScope) -> None:
        with scope, trio.open_signal_receiver(*STOP_SIGNALS) as received:
            async for signum in received:
                self._terminate(f"received {signal.Signals(signum).name}")

    def unmount(self) -> None:
        self.syncing.stop()  # its kernel notices need the FUSE session: it goes first
        if self._mounted:
            self._mounted = False
            pyfuse3.close(unmount=True)

    def close_vault(self) -> None:
        """Stop indexing, forget the runtime record, close the vault (once)."""
        if self._closed:
            return
        self._closed = True
        if self._lock_caller is not None:  # this thread's context: the lock is theirs
            current_caller.set(self._lock_caller)
        try:
            self.syncing.stop()
            self.search.stop()
            self.record.remove()
            self.vault.close()
        except Exception as exc:
            self.close_error = exc
            log.error("closing the vault failed: %s", type(exc).__name__)

    # -- control requests ------------------------------------------------------------

    async def _status(self, request: dict[str, Any]) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            return {
                "memories": len(self.vault),
                "pending_shreds": self.vault.pending_shreds,
                "journaled_changes": self.vault.journaled_changes,
                "housekeeping": self.vault.housekeeping,
                "search_index": self.search.state(),
                "releasing_memory": self.search.releasing_memory(),
                "file_size": os.stat(self.vault.path).st_size,
                "signing_key": self._fingerprint(),
            }

        return await trio.to_thread.run_sync(read)

    async def _compact(self, request: dict[str, Any]) -> dict[str, Any]:
        before, after = await trio.to_thread.run_sync(self.vault.compact)
        return {"before": before, "after": after}

    async def _reindex(self, request: dict[str, Any]) -> dict[str, Any]:
        model = await trio.to_thread.run_sync(self.search.reindex)
        return {"memories": len(self.vault), "model": model}

    async def _audit(self, request: dict[str, Any]) -> dict[str, Any]:
        """The audit trail (audit.py): its events since a time, its chain checked, or
        pruned to a retention."""
        return await trio.to_thread.run_sync(audit_requests.serve, self.vault, request)

    async def _caller(self, request: dict[str, Any]) -> dict[str, Any]:
        """An MCP server names the agent it speaks for: its requests are audited so."""
        pid, uid = request["peer"]
        name = str(request.get("name") or "")[:200]
        if name:
            name_process(pid, uid, name)
        return {}

    async def _note(self, request: dict[str, Any]) -> dict[str, Any]:
        """The CLI's export or import through the mount, for the audit trail."""
        op = request.get("op_name")
        if op not in NOTED_BY_CLI:
            raise UsageError(f"The daemon does not record {op!r} events.")
        self.vault.note(op, str(request.get("detail") or "")[:500])
        return {}

    async def _keys(self, request: dict[str, Any]) -> dict[str, Any]:
        """A key change (memvault/keys.py): the secret is checked against the vault's
        own keyslots, Argon2id runs in a worker thread while the mount goes on."""
        return await trio.to_thread.run_sync(keys.serve, self.vault, request)

    def _fingerprint(self) -> str | None:
        seed = self.vault.signing_seed()
        if seed is None:
            return None
        try:
            return signing.fingerprint_of(seed)
        finally:
            wipe(seed)

    async def _lock(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answered once the vault is closed: the caller then finds it locked
        (and, asked to sign, the file signed as it was left)."""
        self._lock_caller = current_caller.get()
        seed = None
        if request.get("sign"):
            seed = await trio.to_thread.run_sync(lambda: self.vault.signing_seed(create=True))
        self._terminate("asked to lock")
        await self._locked.wait()
        if self.close_error is not None:
            raise self.close_error
        if seed is None:
            return {}
        vault = self.vault
        return await trio.to_thread.run_sync(
            signing.sign_and_wipe, vault.path, seed, vault.header.vault_id, vault.generation
        )

    async def _sync(self, request: dict[str, Any]) -> dict[str, Any]:
        """A sync, its status, or watching on or off: answered by the sync thread."""
        return await trio.to_thread.run_sync(self.syncing.serve, request)

    async def _backup(self, request: dict[str, Any]) -> dict[str, Any]:
        """A consistent copy of the vault as committed now (requests wait for it)."""
        dest = Path(str(request.get("dest")))
        return await trio.to_thread.run_sync(
            lambda: signing.backup(self.vault, dest, sign=bool(request.get("sign")))
        )
