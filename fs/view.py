"""A scoped view: one directory of an unlocked vault, at a mountpoint of its own.

pyfuse3 serves one FUSE session per process, so the vault's daemon cannot
answer a second mountpoint itself. A view is a small process that passes
every request through to the vault's mount: the daemon stays the only writer
and does every check and all the cryptography. The view never reaches above
its directory: each name is resolved one component at a time from a
descriptor of that directory, without following symlinks. Its `search/`
asks the vault's `search/` with the scope set to the view's directory and
shows the results as paths of the view. A read-only view is mounted `ro`
(the kernel answers EROFS). The view ends when the vault is locked (its
daemon gone) or when it is unmounted (`memvault lock VIEW`).

Usage (started by `memvault unlock --subtree`):
    python -m memvault.fs.view VAULT_MOUNT SUBTREE MOUNTPOINT DAEMON_PID [--read-only]
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyfuse3
import trio

from .. import paths, search
from . import readers
from .runtime import MountError, mount_device, pid_alive

FS_NAME = "memvault-view"
TIMEOUT = 1.0  # the vault's mount changes underneath: attributes are kept briefly
SEARCH_NAME = b"search"
SEARCH_INODE = 2
RESULT_FH = 1 << 62
"""Handles of open search results; those of files (their descriptors) stay far below."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _errors(handler):
    """An OSError from the vault's mount becomes the same errno for the caller."""

    @functools.wraps(handler)
    async def wrapper(*args, **kwargs):
        try:
            return await handler(*args, **kwargs)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None

    return wrapper


class View(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, vault_mount: Path, subtree: str, mountpoint: Path) -> None:
        super().__init__()
        self.vault_mount = vault_mount
        self.subtree = subtree
        self.mountpoint = mountpoint
        self.root_fd = os.open(vault_mount, _DIR)
        for name in subtree.split("/"):
            self.root_fd = _descend(self.root_fd, name)
        self._paths = {pyfuse3.ROOT_INODE: ""}
        self._inodes = {"": pyfuse3.ROOT_INODE}
        self._next = itertools.count(SEARCH_INODE + 1)
        self._dirs: dict[int, list[tuple[bytes, pyfuse3.EntryAttributes]]] = {}
        self._results: dict[int, bytes] = {}  # search result inodes -> their bytes
        self._handles = itertools.count(1)

    # -- names -------------------------------------------------------------------

    def _path(self, inode: int) -> str:
        try:
            return self._paths[inode]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def _inode(self, path: str) -> int:
        inode = self._inodes.get(path)
        if inode is None:
            inode = next(self._next)
            self._inodes[path], self._paths[inode] = inode, path
        return inode

    def _child(self, parent_inode: int, name: bytes) -> str:
        if parent_inode == SEARCH_INODE:
            raise pyfuse3.FUSEError(errno.EROFS)
        return paths.join(self._path(parent_inode), os.fsdecode(name))

    @contextmanager
    def _parent(self, path: str) -> Iterator[tuple[int, str]]:
        """(descriptor of the directory holding ``path``, its last name); the root
        itself is (root's descriptor, ".")."""
        fd = os.dup(self.root_fd)
        try:
            parent = paths.parent(path) if path else ""
            for name in parent.split("/") if parent else ():
                fd = _descend(fd, name)
            yield fd, paths.basename(path) if path else "."
        finally:
            os.close(fd)

    def _attrs(self, path: str, st: os.stat_result) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = self._inode(path)
        attrs.entry_timeout = attrs.attr_timeout = TIMEOUT
        for field in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks"):
            setattr(attrs, field, getattr(st, field))
        attrs.st_blksize = st.st_blksize
        attrs.st_atime_ns, attrs.st_mtime_ns = st.st_atime_ns, st.st_mtime_ns
        attrs.st_ctime_ns = st.st_ctime_ns
        return attrs

    def _stat(self, path: str) -> pyfuse3.EntryAttributes:
        with self._parent(path) as (fd, name):
            return self._attrs(path, os.stat(name, dir_fd=fd, follow_symlinks=False))

    def _virtual(self, inode: int, mode: int, size: int = 0) -> pyfuse3.EntryAttributes:
        attrs = self._stat("")  # owner and times of the view's directory
        attrs.st_ino, attrs.st_mode, attrs.st_size = inode, mode, size
        attrs.st_nlink = 2 if stat.S_ISDIR(mode) else 1
        attrs.entry_timeout = attrs.attr_timeout = 0
        return attrs

    # -- search/ -----------------------------------------------------------------

    def _search(self, name: bytes) -> pyfuse3.EntryAttributes:
        try:
            asked = search.parse(os.fsdecode(name))
            scoped = search.Query(
                asked.text,
                asked.k,
                paths.join(self.subtree, asked.prefix) if asked.prefix else self.subtree,
                asked.as_json,
            )
        except search.QueryError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None
        data = (self.vault_mount / "search" / scoped.file_name()).read_bytes()
        data = self._as_seen_here(data, asked.as_json)
        inode = next(self._next)
        self._results[inode] = data
        return self._virtual(inode, stat.S_IFREG | 0o400, len(data))

    def _as_seen_here(self, data: bytes, as_json: bool) -> bytes:
        """The vault's answer with the view's paths: relative to its directory."""
        inside = f"{self.vault_mount}/{self.subtree}/"
        if not as_json:
            return data.replace(inside.encode(), f"{self.mountpoint}/".encode())
        doc = json.loads(data)
        doc["in"] = doc.get("in", "")[len(self.subtree) + 1 :]
        for result in doc.get("results", []):
            result["path"] = result["path"][len(self.subtree) + 1 :]
            result["location"] = f"{self.mountpoint}/{result['path']}"
        return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode()

    # -- requests ------------------------------------------------------------------

    @_errors
    async def lookup(self, parent_inode, name, ctx=None):
        if parent_inode == pyfuse3.ROOT_INODE and name == SEARCH_NAME:
            return self._virtual(SEARCH_INODE, stat.S_IFDIR | 0o500)
        if parent_inode == SEARCH_INODE:
            return self._search(name)
        return self._stat(self._child(parent_inode, name))

    @_errors
    async def getattr(self, inode, ctx=None):
        if inode == SEARCH_INODE:
            return self._virtual(SEARCH_INODE, stat.S_IFDIR | 0o500)
        if inode in self._results:
            return self._virtual(inode, stat.S_IFREG | 0o400, len(self._results[inode]))
        return self._stat(self._path(inode))

    async def forget(self, inode_list):
        for inode, _ in inode_list:
            self._results.pop(inode, None)

    @_errors
    async def setattr(self, inode, attr, fields, fh, ctx):
        path = self._path(inode)
        with self._parent(path) as (fd, name):
            if fields.update_size:
                target = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                try:
                    os.ftruncate(target, attr.st_size)
                finally:
                    os.close(target)
            if fields.update_mode:
                os.chmod(name, stat.S_IMODE(attr.st_mode), dir_fd=fd)
            if fields.update_uid or fields.update_gid:
                uid = attr.st_uid if fields.update_uid else -1
                gid = attr.st_gid if fields.update_gid else -1
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
            if fields.update_atime or fields.update_mtime:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                atime = attr.st_atime_ns if fields.update_atime else st.st_atime_ns
                mtime = attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns
                os.utime(name, ns=(atime, mtime), dir_fd=fd, follow_symlinks=False)
        return self._stat(path)

    @_errors
    async def readlink(self, inode, ctx):
        path = self._path(inode)
        with self._parent(path) as (fd, name):
            return os.fsencode(os.readlink(name, dir_fd=fd))

    @_errors
    async def opendir(self, inode, ctx):
        fh = next(self._handles)
        if inode == SEARCH_INODE:
            self._dirs[fh] = []
            return fh
        path = self._path(inode)
        with self._parent(path) as (fd, name):
            listing = os.open(name, _DIR, dir_fd=fd)
        entries = []
        try:
            with os.scandir(listing) as found:
                for entry in found:
                    child = paths.join(path, entry.name)
                    st = entry.stat(follow_symlinks=False)
                    entries.append((os.fsencode(entry.name), self._attrs(child, st)))
        finally:
            os.close(listing)
        if not path:
            entries.append((SEARCH_NAME, self._virtual(SEARCH_INODE, stat.S_IFDIR | 0o500)))
        self._dirs[fh] = sorted(entries)
        return fh

    async def readdir(self, fh, start_id, token):
        entries = self._dirs.get(fh, [])
        for index in range(start_id, len(entries)):
            name, attrs = entries[index]
            if not pyfuse3.readdir_reply(token, name, attrs, index + 1):
                break

    async def releasedir(self, fh):
        self._dirs.pop(fh, None)

    @_errors
    async def open(self, inode, flags, ctx):
        if inode in self._results:
            if flags & (os.O_WRONLY | os.O_RDWR):
                raise pyfuse3.FUSEError(errno.EROFS)
            return pyfuse3.FileInfo(fh=RESULT_FH + inode, direct_io=True)
        path = self._path(inode)
        with self._parent(path) as (fd, name):
            opened = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        return pyfuse3.FileInfo(fh=opened)

    @_errors
    async def create(self, parent_inode, name, mode, flags, ctx):
        path = self._child(parent_inode, name)
        with self._parent(path) as (fd, last):
            opened = os.open(
                last, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd
            )
        return pyfuse3.FileInfo(fh=opened), self._attrs(path, os.fstat(opened))

    @_errors
    async def read(self, fh, off, size):
        if fh >= RESULT_FH:
            return self._results.get(fh - RESULT_FH, b"")[off : off + size]
        return os.pread(fh, size, off)

    @_errors
    async def write(self, fh, off, buf):
        return os.pwrite(fh, buf, off)

    async def flush(self, fh):
        raise pyfuse3.FUSEError(errno.ENOSYS)  # each write reached the vault already

    @_errors
    async def fsync(self, fh, datasync):
        if fh < RESULT_FH:
            os.fsync(fh)

    async def release(self, fh):
        if fh < RESULT_FH:
            os.close(fh)

    @_errors
    async def mkdir(self, parent_inode, name, mode, ctx):
        path = self._child(parent_inode, name)
        with self._parent(path) as (fd, last):
            os.mkdir(last, mode, dir_fd=fd)
        return self._stat(path)

    @_errors
    async def symlink(self, parent_inode, name, target, ctx):
        path = self._child(parent_inode, name)
        with self._parent(path) as (fd, last):
            os.symlink(os.fsdecode(target), last, dir_fd=fd)
        return self._stat(path)

    @_errors
    async def unlink(self, parent_inode, name, ctx):
        self._remove(self._child(parent_inode, name), os.unlink)

    @_errors
    async def rmdir(self, parent_inode, name, ctx):
        self._remove(self._child(parent_inode, name), os.rmdir)

    def _remove(self, path: str, remove) -> None:
        with self._parent(path) as (fd, last):
            remove(last, dir_fd=fd)
        self._gone(path)

    @_errors
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)
        old = self._child(parent_inode_old, name_old)
        new = self._child(parent_inode_new, name_new)
        with self._parent(old) as (src, old_name), self._parent(new) as (dst, new_name):
            os.rename(old_name, new_name, src_dir_fd=src, dst_dir_fd=dst)
        self._gone(new)
        for path in [p for p in self._inodes if p == old or p.startswith(old + "/")]:
            inode = self._inodes.pop(path)
            moved = new + path[len(old) :]
            self._inodes[moved], self._paths[inode] = inode, moved

    def _gone(self, path: str) -> None:
        for gone in [p for p in self._inodes if p == path or p.startswith(path + "/")]:
            self._paths.pop(self._inodes.pop(gone), None)

    async def statfs(self, ctx):
        st = os.statvfs(self.root_fd)
        out = pyfuse3.StatvfsData()
        for field in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail"):
            setattr(out, field, getattr(st, field))
        for field in ("f_files", "f_ffree", "f_favail", "f_namemax"):
            setattr(out, field, getattr(st, field))
        return out


def is_view(mountpoint: Path) -> bool:
    found = mount_device(mountpoint)
    return found is not None and found[1] == f"fuse.{FS_NAME}"


def start(vault_mount: Path, subtree: str, mountpoint: Path, daemon_pid: int, read_only: bool):
    """Start a view's process, detached; return once it is mounted (or raise MountError)."""
    mountpoint.mkdir(mode=0o700, parents=True, exist_ok=True)
    if any(mountpoint.iterdir()) or os.path.ismount(mountpoint):
        raise MountError(f"{mountpoint} is not an empty directory; choose another mountpoint.")
    args = [str(vault_mount), subtree, str(mountpoint), str(daemon_pid)]
    process = subprocess.Popen(
        [sys.executable, "-m", "memvault.fs.view", *args, *(["--read-only"] * read_only)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not is_view(mountpoint):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            why = process.stderr.read().decode(errors="replace").strip().splitlines()
            raise MountError(
                f"The view could not be mounted: {why[-1] if why else 'no reason given'}."
            )
        time.sleep(0.05)
    process.stderr.close()
    return process.pid


def unmount(mountpoint: Path) -> None:
    done = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True, text=True)
    if done.returncode != 0:
        raise MountError(f"{mountpoint} could not be unmounted: {done.stderr.strip()}")


def _descend(fd: int, name: str) -> int:
    new = os.open(name, _DIR, dir_fd=fd)
    os.close(fd)
    return new


async def _serve(daemon_pid: int) -> None:
    """Serve until unmounted, or until the vault's daemon is gone (locked)."""
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while pid_alive(daemon_pid):
                await trio.sleep(0.5)
            pyfuse3.terminate()

        nursery.start_soon(watch)
        await pyfuse3.main(min_tasks=2, max_tasks=16)
        nursery.cancel_scope.cancel()


def main(argv: list[str]) -> int:
    vault_mount, subtree, mountpoint, daemon_pid, *rest = argv
    view = View(Path(vault_mount), subtree, Path(mountpoint))
    options = set(pyfuse3.default_options) | {f"fsname={FS_NAME}", f"subtype={FS_NAME}"}
    if "--read-only" in rest:
        options.add("ro")
    readers.install()
    pyfuse3.init(view, mountpoint, options)
    try:
        trio.run(_serve, int(daemon_pid))
    finally:
        pyfuse3.close(unmount=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
