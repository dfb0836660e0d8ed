"""Mount lifecycle: serve a vault on a mountpoint, find and clean stale mounts,
and the runtime record that tells `lock` and `status` who serves what.

The runtime record (``$XDG_RUNTIME_DIR/memvault/<id>.json``, else
``/tmp/memvault-<uid>/``) holds the vault path, the mountpoint, the daemon's
pid and a few counters. It never holds memory content or names.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import logging
import os
import resource
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyfuse3
import trio

from ..errors import MemvaultError
from ..vault import Vault
from .operations import VaultOperations

log = logging.getLogger("memvault.fs")

FS_NAME = "memvault"
STATUS_INTERVAL_S = 2.0


class MountError(MemvaultError):
    """{0}"""


# -- runtime records ------------------------------------------------------------


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "memvault" if base else Path(f"/tmp/memvault-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@dataclass
class MountRecord:
    vault: str
    mountpoint: str
    pid: int
    started: float
    memories: int = 0
    pending_shreds: int = 0

    @staticmethod
    def path_for(vault: Path) -> Path:
        key = hashlib.sha256(str(vault.resolve()).encode()).hexdigest()[:16]
        return runtime_dir() / f"{key}.json"

    def save(self) -> None:
        target = self.path_for(Path(self.vault))
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)

    @classmethod
    def load(cls, vault: Path) -> MountRecord | None:
        try:
            return cls(**json.loads(cls.path_for(vault).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    @classmethod
    def all(cls) -> list[MountRecord]:
        found = []
        for path in runtime_dir().glob("*.json"):
            try:
                found.append(cls(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return found

    def remove(self) -> None:
        self.path_for(Path(self.vault)).unlink(missing_ok=True)

    @property
    def alive(self) -> bool:
        return pid_alive(self.pid)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it serves nothing.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# -- mount table --------------------------------------------------------------------


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape").encode("latin-1").decode()


def mounted_at(mountpoint: Path) -> str | None:
    """The filesystem type mounted exactly at ``mountpoint``, if any."""
    target = str(mountpoint)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if _unescape(left.split()[4]) == target:
                    return right.split()[0]
    except OSError:
        pass
    return None


def is_stale(mountpoint: Path) -> bool:
    """A FUSE mount whose daemon is gone ("Transport endpoint is not connected")."""
    try:
        os.stat(mountpoint)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def unmount(mountpoint: Path) -> None:
    """Detach a (possibly stale) FUSE mount."""
    for cmd in (["fusermount3", "-u", "-z", str(mountpoint)], ["umount", "-l", str(mountpoint)]):
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 or mounted_at(mountpoint) is None:
            return
    raise MountError(f"Could not unmount {mountpoint}; try `fusermount3 -u -z {mountpoint}`.")


def clean_stale(mountpoint: Path) -> bool:
    """Unmount a stale memvault mount at ``mountpoint``; True if one was cleaned."""
    fstype = mounted_at(mountpoint)
    if fstype is None or not is_stale(mountpoint):
        return False
    if not fstype.startswith("fuse"):
        raise MountError(f"{mountpoint} is a broken {fstype} mount; unmount it first.")
    unmount(mountpoint)
    return True


# -- serving ------------------------------------------------------------------------


def harden_process() -> None:
    """No core dumps and no ptrace by other processes: keys live in this memory."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_DUMPABLE = 4
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:  # pragma: no cover
        log.warning("could not make the process non-dumpable")


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
    ops = VaultOperations(vault)
    record = MountRecord(str(vault.path), str(mountpoint), os.getpid(), time.time())
    pyfuse3.init(ops, str(mountpoint), mount_options(allow_other))
    unmounted = False
    try:
        record.memories = len(vault)
        record.save()
        if on_ready is not None:
            on_ready()
        trio.run(_main, vault, record)
        pyfuse3.close(unmount=True)
        unmounted = True
    finally:
        if not unmounted:
            pyfuse3.close(unmount=True)
        record.remove()
        vault.close()


async def _main(vault: Vault, record: MountRecord) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_handle_signals, vault)
        nursery.start_soon(_publish_status, vault, record)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


async def _handle_signals(vault: Vault) -> None:
    """SIGTERM, SIGINT, SIGHUP: a clean lock. SIGUSR1: compact now (`memvault compact`)."""
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    with trio.open_signal_receiver(*stops, signal.SIGUSR1) as signals:
        async for signum in signals:
            if signum == signal.SIGUSR1:
                await trio.to_thread.run_sync(_compact_logged, vault)
                continue
            log.info("received %s: locking", signal.Signals(signum).name)
            pyfuse3.terminate()
            return


def _compact_logged(vault: Vault) -> None:
    try:
        vault.compact()
    except MemvaultError as exc:
        log.warning("compaction failed: %s", type(exc).__name__)


async def _publish_status(vault: Vault, record: MountRecord) -> None:
    """Keep the runtime record's counters fresh for `memvault status`."""
    while True:
        await trio.sleep(STATUS_INTERVAL_S)
        memories, pending = len(vault), vault.pending_shreds
        if (memories, pending) != (record.memories, record.pending_shreds):
            record.memories, record.pending_shreds = memories, pending
            record.save()
