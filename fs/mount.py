"""Serving a vault on a mountpoint with pyfuse3 + trio until it is locked."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import pyfuse3
import trio

from ..errors import MemvaultError
from ..search import SearchService, open_search
from ..vault import Vault
from .operations import VaultOperations
from .runtime import MountRecord

log = logging.getLogger("memvault.fs")

FS_NAME = "memvault"
STATUS_INTERVAL_S = 2.0
READER_TASKS = 8
MAX_TASKS = 64


# -- serving ------------------------------------------------------------------------


def mount_options(allow_other: bool) -> set[str]:
    options = set(pyfuse3.default_options)  # default_permissions
    options |= {f"fsname={FS_NAME}", f"subtype={FS_NAME}", "noatime"}
    if allow_other:
        options.add("allow_other")
    return options


def serve(
    vault: Vault,
    mountpoint: Path,
    *,
    allow_other: bool = False,
    on_ready=None,
) -> None:
    """Mount ``vault`` and serve it until SIGTERM/SIGINT/SIGHUP or `fusermount -u`.

    Always unmounts and closes the vault (pending shreds compacted, keys
    wiped) before returning.
    """
    # Two non-spinning threads: a query embeds in ~6 ms instead of ~9 ms.
    search = open_search(vault, threads=2)
    ops = VaultOperations(vault, search=search, mountpoint=str(mountpoint))
    record = MountRecord(str(vault.path), str(mountpoint), os.getpid(), time.time())
    pyfuse3.init(ops, str(mountpoint), mount_options(allow_other))
    unmounted = False
    try:
        record.memories = len(vault)
        record.save()
        search.start()
        threading.Thread(target=search.index_all, name="indexer", daemon=True).start()
        if on_ready is not None:
            on_ready()
        trio.run(_main, vault, record, search)
        pyfuse3.close(unmount=True)
        unmounted = True
    finally:
        if not unmounted:
            pyfuse3.close(unmount=True)
        search.stop()
        record.remove()
        vault.close()


async def _main(vault: Vault, record: MountRecord, search: SearchService) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_handle_signals, vault, search)
        nursery.start_soon(_publish_status, vault, record, search)
        # Idle reader tasks kept waiting on /dev/fuse: with fewer than two,
        # pyfuse3 starts (and ends) a task for every request.
        await pyfuse3.main(min_tasks=READER_TASKS, max_tasks=MAX_TASKS)
        nursery.cancel_scope.cancel()


async def _handle_signals(vault: Vault, search: SearchService) -> None:
    """SIGTERM, SIGINT, SIGHUP: a clean lock. SIGUSR1: compact now (`memvault
    compact`). SIGUSR2: re-embed with the installed model (`memvault reindex`)."""
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    with trio.open_signal_receiver(*stops, signal.SIGUSR1, signal.SIGUSR2) as signals:
        async for signum in signals:
            if signum == signal.SIGUSR1:
                await trio.to_thread.run_sync(_compact_logged, vault)
                continue
            if signum == signal.SIGUSR2:
                await trio.to_thread.run_sync(_reindex_logged, search)
                continue
            log.info("received %s: locking", signal.Signals(signum).name)
            pyfuse3.terminate()
            return


def _reindex_logged(search: SearchService) -> None:
    try:
        search.reindex()
        log.info("re-indexed with the installed embedding model")
    except Exception as exc:
        log.warning("re-indexing failed: %s", type(exc).__name__)


def _compact_logged(vault: Vault) -> None:
    try:
        vault.compact()
    except MemvaultError as exc:
        log.warning("compaction failed: %s", type(exc).__name__)


async def _publish_status(vault: Vault, record: MountRecord, search: SearchService) -> None:
    """Keep the runtime record's counters fresh for `memvault status`."""
    while True:
        await trio.sleep(STATUS_INTERVAL_S)
        now = (len(vault), vault.pending_shreds, search.state())
        if now != (record.memories, record.pending_shreds, record.search_index):
            record.memories, record.pending_shreds, record.search_index = now
            record.save()
