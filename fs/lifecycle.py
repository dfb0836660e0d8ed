"""Unlocking and locking, as the CLI sees them (light: no pyfuse3, no trio):
what must hold before a mount, which daemon serves a vault, and how it is
asked to lock."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from ..errors import AlreadyUnlocked, CompactionOwed, DaemonFailed, VaultInUse
from ..vault import read_info
from ..vault.store import compaction_owed
from . import control
from .runtime import (
    MountError,
    MountRecord,
    clean_stale,
    is_stale,
    mounted_at,
    pid_alive,
    unmount,
)

STOP_TIMEOUT_S = 600.0


def serving_daemon(vault: Path) -> MountRecord | None:
    """The runtime record of the daemon serving ``vault``, if one is alive."""
    record = MountRecord.load(vault)
    return record if record is not None and record.alive else None


def prepare_mountpoint(vault: Path, mountpoint: Path) -> list[str]:
    """Check (and make) what an unlock needs; return what was cleaned up on the way.

    The vault is not unlocked elsewhere and no other process writes it; the
    mountpoint is an empty directory (created if missing), not a mount. A
    runtime record or mount left by a daemon that died is cleaned up.
    """
    notes = []
    record = MountRecord.load(vault)
    if record is not None and record.alive:
        raise AlreadyUnlocked(vault, record.mountpoint, record.pid)
    if record is not None:
        record.remove()
    if clean_stale(mountpoint):
        notes.append(f"cleaned a stale mount at {mountpoint} left by a daemon that died.")
    if mounted_at(mountpoint) is not None:
        raise MountError(f"{mountpoint} is already a mount point.")
    mountpoint.mkdir(mode=0o700, parents=True, exist_ok=True)
    if any(mountpoint.iterdir()):
        raise MountError(f"{mountpoint} is not empty; unlock mounts on an empty directory.")
    writer = read_info(vault).writer_pid
    if writer is not None:
        raise VaultInUse(vault, f" (pid {writer})")
    return notes


def lock(
    vault: Path, mountpoint: Path | None, default_mountpoint: Path, *, sign: bool = False
) -> tuple[str, dict]:
    """Lock ``vault`` (or whatever is mounted at ``mountpoint``); return what was done,
    and the daemon's answer (with ``sign``: the signature it wrote, signing.py).

    Raises CompactionOwed when shredded or replaced bytes are still in the
    file afterwards, whoever was meant to remove them.
    """
    if mountpoint is not None:
        found = [r for r in MountRecord.all() if Path(r.mountpoint) == mountpoint]
        record = found[0] if found else None
    else:
        record = MountRecord.load(vault)
        mountpoint = Path(record.mountpoint) if record else default_mountpoint
    if record is not None and record.alive:
        answer = stop_daemon(record, sign=sign)
        if mounted_at(mountpoint) is not None and is_stale(mountpoint):
            unmount(mountpoint)
        _check_compacted(Path(record.vault), "its daemon could not compact it")
        return f"Locked {record.vault}; {mountpoint} is unmounted.", answer
    if record is not None:
        record.remove()
    if clean_stale(mountpoint):
        _check_compacted(vault, "its daemon died before compacting")
        done = f"Cleaned a stale mount at {mountpoint} (its daemon had died); the vault is locked."
        return done, {}
    _check_compacted(vault, "an earlier session ended before compacting")
    return f"The vault {vault} is not unlocked.", {}


def stop_daemon(
    record: MountRecord, timeout: float = STOP_TIMEOUT_S, *, sign: bool = False
) -> dict:
    """Ask the daemon to lock and wait until it has exited; return its answer.

    Through its control socket, whose answer comes once the vault is closed
    and carries any error closing it; by SIGTERM if the socket does not
    answer (a daemon stuck before it opened one).
    """
    answer: dict = {}
    try:
        answer = control.ask(record.control_path, "lock", pid=record.pid, sign=sign)
    except control.DaemonUnreachable:
        if sign:
            raise
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM)
    except DaemonFailed:
        _wait_for_exit(record.pid, timeout)
        raise
    _wait_for_exit(record.pid, timeout)
    return answer


def _wait_for_exit(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            raise MountError(f"The daemon (pid {pid}) did not stop within {timeout:.0f} s.")
        time.sleep(0.02)


def _check_compacted(vault: Path, why: str) -> None:
    """A lock succeeds only when no shredded or replaced byte is left in the file."""
    if vault.exists() and compaction_owed(vault):
        raise CompactionOwed(vault, why)
