"""The CLI's view of a vault that is unlocked and mounted: plain file
operations on the mountpoint, so the daemon stays the only writer.

Everything goes through a descriptor of the mount's root, opened (and proved
to be this vault's live FUSE mount) once, and every name is resolved from it
one component at a time without following symlinks. A lock can therefore
never redirect a write into the bare mountpoint directory, where it would be
plaintext on disk: on the dead connection's descriptor the kernel answers
ENOTCONN, and each write first re-checks that the mountpoint still is the
mount, so a lock is a clear VaultLocked error.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from . import paths
from .errors import MemvaultError, QueryTooLong, TooLarge, VaultLocked, from_errno
from .fs import control
from .fs.runtime import MountError, MountRecord, mount_device, pid_alive
from .vault import MAX_MEMORY_SIZE
from .vault.records import DIRECTORY, FILE, SYMLINK, Meta

if TYPE_CHECKING:
    from .search import Query

_DEAD = {errno.ENOTCONN, errno.ENODEV, errno.ECONNABORTED}  # the mount's connection is gone

TEMP_PREFIX = ".memvault-put-"
CHUNK = 1 << 20

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _meta(path: str, st: os.stat_result) -> Meta:
    kind = DIRECTORY if stat.S_ISDIR(st.st_mode) else SYMLINK if stat.S_ISLNK(st.st_mode) else FILE
    mode = stat.S_IMODE(st.st_mode)
    return Meta(
        path, kind, mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, 0, 0, st.st_uid, st.st_gid
    )


def _scan(fd: int, path: str, found: list[Meta]) -> list[str]:
    """Append the entries of the directory open at ``fd``; return its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            found.append(_meta(paths.join(path, entry.name), st))
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(entry.name)
    return subdirs


def _descend(fd: int, name: str) -> int:
    new = os.open(name, _DIR, dir_fd=fd)
    os.close(fd)
    return new


def _ascend(fd: int) -> int:
    new = os.open("..", _DIR, dir_fd=fd)
    os.close(fd)
    return new


class MountedVault:
    """The vault's :class:`~memvault.api.Memories`, served through its mount."""

    def __init__(self, record: MountRecord) -> None:
        self.record = record
        self.root = mountpoint = Path(record.mountpoint)
        self.daemon_pid = record.pid
        try:
            self._fd = os.open(mountpoint, _DIR)
        except OSError:
            raise VaultLocked(mountpoint) from None
        self._dev = os.fstat(self._fd).st_dev
        if not self._is_live():
            os.close(self._fd)
            raise VaultLocked(mountpoint)

    # -- proving the mount ---------------------------------------------------------

    def _is_live(self) -> bool:
        """The mountpoint is still this descriptor's FUSE mount, served by the daemon."""
        try:
            here = os.stat(self.root, follow_symlinks=False)
            parent = os.stat(self.root.parent)
        except OSError:
            return False
        entry = mount_device(self.root)
        return (
            here.st_dev == self._dev != parent.st_dev
            and entry is not None
            and entry[0] == self._dev
            and entry[1].startswith("fuse")
            and pid_alive(self.daemon_pid)
        )

    def _check_live(self) -> None:
        if not self._is_live():
            raise VaultLocked(self.root)

    def _error(self, exc: OSError, path: str) -> MemvaultError:
        if exc.errno in _DEAD or not self._is_live():
            return VaultLocked(self.root)
        if exc.errno == errno.EFBIG:
            return TooLarge(path, f"more than {MAX_MEMORY_SIZE}", MAX_MEMORY_SIZE)
        return from_errno(exc.errno, path)

    @contextmanager
    def _dir(self, directory: str, *, create: bool = False) -> Iterator[int]:
        """A descriptor of ``directory``, reached from the root one name at a time."""
        fd = os.dup(self._fd)
        try:
            for name in directory.split("/") if directory else ():
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                fd = _descend(fd, name)
            yield fd
        finally:
            os.close(fd)

    # -- the Vault API -------------------------------------------------------------

    def put(
        self, path: str, data: bytes, *, mode: int | None = None, mtime_ns: int | None = None
    ) -> Meta:
        """Atomic: written to a temporary sibling, then renamed over the target, so a
        failure or Ctrl-C leaves the old memory as it was (and no temporary behind)."""
        norm = paths.normalize(path)
        if len(data) > MAX_MEMORY_SIZE:
            raise TooLarge(norm, len(data), MAX_MEMORY_SIZE)
        self._check_live()
        try:
            with self._dir(paths.parent(norm), create=True) as parent:
                name = paths.basename(norm)
                _write_atomically(parent, name, data, mode, mtime_ns)
                return _meta(norm, os.stat(name, dir_fd=parent, follow_symlinks=False))
        except OSError as exc:
            raise self._error(exc, norm) from None

    def append(self, path: str, data: bytes) -> Meta:
        """Add ``data`` at the end of a memory, created if missing (missing parents
        too): written with O_APPEND, so an append never overwrites another's."""
        norm = paths.normalize(path)
        self._check_live()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            with self._dir(paths.parent(norm), create=True) as parent:
                name = paths.basename(norm)
                with open(os.open(name, flags, 0o666, dir_fd=parent), "wb") as f:
                    f.write(data)
                return _meta(norm, os.stat(name, dir_fd=parent, follow_symlinks=False))
        except OSError as exc:
            raise self._error(exc, norm) from None

    def exists(self, path: str) -> bool:
        norm = paths.normalize(path, allow_root=True)
        try:
            with self._dir(paths.parent(norm)) as parent:
                os.stat(paths.basename(norm), dir_fd=parent, follow_symlinks=False)
                return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._error(exc, norm) from None

    def get(self, path: str) -> bytes:
        norm = paths.normalize(path)
        try:
            with self._dir(paths.parent(norm)) as parent:
                fd = os.open(paths.basename(norm), os.O_RDONLY | os.O_CLOEXEC, dir_fd=parent)
                with open(fd, "rb") as f:
                    return f.read()
        except OSError as exc:
            raise self._error(exc, norm) from None

    def list(self, directory: str = "") -> list[tuple[str, Meta]]:
        norm = paths.normalize(directory, allow_root=True)
        found: list[Meta] = []
        try:
            with self._dir(norm) as fd:
                _scan(fd, norm, found)
        except OSError as exc:
            raise self._error(exc, norm) from None
        return sorted((paths.basename(m.path), m) for m in found)

    def walk(self, directory: str = "") -> list[Meta]:
        """Everything below ``directory``; iterative, so any legal depth works."""
        norm = paths.normalize(directory, allow_root=True)
        found: list[Meta] = []
        try:
            with self._dir(norm) as top:
                fd = os.dup(top)
                try:
                    stack = [(norm, _scan(fd, norm, found))]
                    while stack:
                        path, pending = stack[-1]
                        if pending:
                            name = pending.pop()
                            fd = _descend(fd, name)
                            child = paths.join(path, name)
                            stack.append((child, _scan(fd, child, found)))
                        else:
                            stack.pop()
                            if stack:
                                fd = _ascend(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise self._error(exc, norm) from None
        return sorted(found, key=lambda m: m.path)

    def delete(self, path: str, *, recursive: bool = False) -> int:
        norm = paths.normalize(path)
        self._check_live()
        try:
            with self._dir(paths.parent(norm)) as parent:
                name = paths.basename(norm)
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=parent)
                    return 1
                count = 1 + len(self.walk(norm))
                if recursive:
                    _remove_tree(parent, name)
                else:
                    os.rmdir(name, dir_fd=parent)
                return count
        except OSError as exc:
            raise self._error(exc, norm) from None

    def rename(self, old: str, new: str) -> None:
        src, dst = paths.normalize(old), paths.normalize(new)
        self._check_live()
        try:
            with (
                self._dir(paths.parent(src)) as source,
                self._dir(paths.parent(dst), create=True) as target,
            ):
                os.rename(
                    paths.basename(src), paths.basename(dst), src_dir_fd=source, dst_dir_fd=target
                )
        except OSError as exc:
            raise self._error(exc, src) from None

    def search(self, query: Query) -> bytes:
        """The daemon's answer to ``query``: the file search/<query> (whose name is
        bound by the name limit, so a long query is QueryTooLong)."""
        name = query.file_name()
        size = len(name.encode())
        if size > paths.MAX_NAME_BYTES:
            raise QueryTooLong(size, paths.MAX_NAME_BYTES)
        try:
            return (self.root / "search" / name).read_bytes()
        except OSError as exc:
            raise MountError(f"The search through {self.root} failed: {exc.strerror}.") from None

    def note(self, op: str, detail: str = "") -> None:
        control.ask(
            self.record.control_path, "note", pid=self.daemon_pid, op_name=op, detail=detail
        )

    def compact(self) -> tuple[int, int]:
        """Asked of the daemon, which answers once the compaction is done."""
        self._check_live()
        done = control.ask(self.record.control_path, "compact", pid=self.daemon_pid)
        return done["before"], done["after"]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> MountedVault:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write_atomically(
    parent: int, name: str, data: bytes, mode: int | None = None, mtime_ns: int | None = None
) -> None:
    # A dot-name with a random suffix: never collides (O_EXCL), and neither the
    # search index (.md/.txt only) nor ingest takes it for a memory meanwhile.
    temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:  # from the open on: a Ctrl-C right after it still removes the temporary
        f = open(os.open(temp, flags, 0o666, dir_fd=parent), "wb")  # noqa: SIM115
        with f:
            with suppress(FileNotFoundError):  # a replaced memory keeps its mode
                old = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISREG(old.st_mode):
                    os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            view = memoryview(data)
            for start in range(0, len(view), CHUNK):  # Ctrl-C is seen between chunks
                f.write(view[start : start + CHUNK])
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            if mtime_ns is not None:
                f.flush()  # the last write would set the time again
                os.utime(f.fileno(), ns=(mtime_ns, mtime_ns))
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException as exc:
        # Until removed it is a real memory in the vault: removing it shreds it
        # (unless the name was someone else's: O_EXCL refused it).
        if not isinstance(exc, FileExistsError):
            with suppress(OSError):
                os.unlink(temp, dir_fd=parent)
        raise


def _remove_tree(parent: int, name: str) -> None:
    """rm -r of ``name`` in the directory ``parent``: iterative, through descriptors."""
    fd = os.open(name, _DIR, dir_fd=parent)
    stack = [name]
    try:
        while stack:
            subdir = None
            with os.scandir(fd) as entries:
                listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            for child, is_dir in listed:
                if not is_dir:
                    os.unlink(child, dir_fd=fd)
                elif subdir is None:
                    subdir = child
            if subdir is not None:
                fd = _descend(fd, subdir)
                stack.append(subdir)
            else:
                fd = _ascend(fd)
                os.rmdir(stack.pop(), dir_fd=fd)
                if stack:  # a directory handle lists its entries as they were when opened
                    fd = _descend(fd, ".")
    finally:
        os.close(fd)
