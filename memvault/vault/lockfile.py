"""The writer's lock: an flock on ``<vault>-lock`` holding the writer's pid.

LMDB runs without its own lock file (see store.py): a vault allows exactly
one writer process, and this lock says who it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ..errors import VaultInUse


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + "-lock")


def acquire(path: Path, *, exclusive: bool) -> int:
    """flock ``<vault>-lock``; the exclusive holder writes its pid into it."""
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        raise VaultInUse(path, f" (pid {holder})" if holder.isdigit() else "") from None
    if exclusive:  # who holds it, for messages; best effort (the disk may be full)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def try_exclusive(fd: int) -> bool:
    """Upgrade a shared lock to exclusive if nobody else holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def downgrade(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_SH)


def writer_pid(path: Path) -> int | None:
    """The pid of the process holding the vault open for writing, if any."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)
    return None
