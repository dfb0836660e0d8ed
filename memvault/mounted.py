"""The CLI's view of a vault that is unlocked and mounted: plain file
operations on the mountpoint, so the daemon stays the only writer."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
from pathlib import Path

from . import paths
from .errors import (
    BadPath,
    DirectoryNotEmpty,
    DiskFull,
    IsADirectory,
    MemoryNotFound,
    MemvaultError,
    NotADirectory,
)
from .records import DIRECTORY, FILE, SYMLINK, Meta
from .vault import MAX_MEMORY_SIZE

_ERRORS = {
    errno.ENOENT: MemoryNotFound,
    errno.EISDIR: IsADirectory,
    errno.ENOTDIR: NotADirectory,
    errno.ENOTEMPTY: DirectoryNotEmpty,
}


def _translate(exc: OSError, path: str) -> MemvaultError:
    if exc.errno in _ERRORS:
        return _ERRORS[exc.errno](path)
    if exc.errno == errno.ENOSPC:
        return DiskFull(path)
    if exc.errno == errno.EFBIG:
        return MemvaultError(f"{path} is larger than a memory may be ({MAX_MEMORY_SIZE} bytes)")
    if exc.errno == errno.EINVAL:
        return BadPath(path, "refused by the filesystem")
    return MemvaultError(f"{path}: {os.strerror(exc.errno or errno.EIO)}")


def _meta(path: str, st: os.stat_result) -> Meta:
    kind = DIRECTORY if stat.S_ISDIR(st.st_mode) else SYMLINK if stat.S_ISLNK(st.st_mode) else FILE
    return Meta(path, kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns,
                st.st_ctime_ns, 0, 0, st.st_uid, st.st_gid)  # fmt: skip


class MountedVault:
    """The subset of the Vault API the CLI uses, served through the mount."""

    def __init__(self, mountpoint: Path, daemon_pid: int) -> None:
        self.root = mountpoint
        self.daemon_pid = daemon_pid
        self.damaged: dict = {}

    def _fs(self, path: str, *, allow_root: bool = False) -> tuple[str, Path]:
        norm = paths.normalize(path, allow_root=allow_root)
        return norm, self.root / norm

    def put(self, path: str, data: bytes) -> Meta:
        norm, target = self._fs(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
            return _meta(norm, target.stat())
        except OSError as exc:
            raise _translate(exc, norm) from None

    def get(self, path: str) -> bytes:
        norm, target = self._fs(path)
        try:
            return target.read_bytes()
        except OSError as exc:
            raise _translate(exc, norm) from None

    def list(self, directory: str = "") -> list[tuple[str, Meta]]:
        norm, target = self._fs(directory, allow_root=True)
        try:
            return sorted(
                (e.name, _meta(paths.join(norm, e.name), e.stat(follow_symlinks=False)))
                for e in os.scandir(target)
            )
        except OSError as exc:
            raise _translate(exc, norm) from None

    def walk(self) -> list[Meta]:
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                found.append(_meta(str(full.relative_to(self.root)), full.lstat()))
        return sorted(found, key=lambda m: m.path)

    def delete(self, path: str, *, recursive: bool = False) -> int:
        norm, target = self._fs(path)
        try:
            if target.is_dir() and not target.is_symlink():
                count = 1 + sum(len(d) + len(f) for _, d, f in os.walk(target))
                if recursive:
                    shutil.rmtree(target)
                else:
                    target.rmdir()
                return count
            target.unlink()
            return 1
        except OSError as exc:
            raise _translate(exc, norm) from None

    def rename(self, old: str, new: str) -> None:
        src, source = self._fs(old)
        dst, target = self._fs(new)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source, target)
        except OSError as exc:
            raise _translate(exc, src) from None

    def compact(self) -> None:
        os.kill(self.daemon_pid, signal.SIGUSR1)  # the daemon compacts in the background

    def __enter__(self) -> MountedVault:
        return self

    def __exit__(self, *exc) -> None:
        return None
