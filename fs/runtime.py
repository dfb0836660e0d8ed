"""Runtime state of mounts, kept light (no pyfuse3 import) for the CLI:
the runtime record that tells `lock` and `status` who serves what, and
finding and cleaning stale mounts.

The runtime record (``$XDG_RUNTIME_DIR/memvault/<id>.json``, else
``/tmp/memvault-<uid>/``) holds the vault path, the mountpoint and the
daemon's pid; beside it are the daemon's control socket (``<id>.sock``,
control.py) and log (``<id>.log``). None of them holds memory content or
names: what the daemon knows (counts, progress) it tells over the socket.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import MemvaultError
from ..locations import record_path, runtime_dir


class MountError(MemvaultError):
    """{0}"""


# -- runtime records ------------------------------------------------------------


@dataclass
class MountRecord:
    vault: str
    mountpoint: str
    pid: int
    started: float

    @staticmethod
    def path_for(vault: Path) -> Path:
        return record_path(vault)

    @staticmethod
    def log_for(vault: Path) -> Path:
        return MountRecord.path_for(vault).with_suffix(".log")

    @property
    def control_path(self) -> Path:
        return self.path_for(Path(self.vault)).with_suffix(".sock")

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


def mount_device(mountpoint: Path) -> tuple[int, str] | None:
    """The device number and filesystem type of the topmost mount exactly at
    ``mountpoint`` (the st_dev every file of that mount reports), if any."""
    target = os.path.realpath(mountpoint)
    found = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if _unescape(fields[4]) == target:
                    major, minor = fields[2].split(":")
                    found = (os.makedev(int(major), int(minor)), right.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return found


def is_stale(mountpoint: Path) -> bool:
    """A FUSE mount whose daemon is gone ("Transport endpoint is not connected")."""
    try:
        os.statvfs(mountpoint)  # not stat(): the kernel may answer that from its cache
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
