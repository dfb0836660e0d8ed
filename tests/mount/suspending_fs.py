"""A tiny pyfuse3 file system whose LOOKUP of "wait" suspends until a STATFS
arrives, served the way the vault's mount serves (fs/readers.py
installed). Run by tests/mount/test_fuse_readers.py; prints, once unmounted,
which lock pyfuse3's readers used, how often it changed hands, and how many
requests they read at once or after a wait in trio (readers.DeviceWatch)."""

from __future__ import annotations

import errno
import gc
import json
import stat
import sys

import pyfuse3
import trio

from memvault.fs import readers


class SuspendingFS(pyfuse3.Operations):
    def __init__(self) -> None:
        super().__init__()
        self.go = trio.Event()

    async def getattr(self, inode, ctx=None):
        if inode != pyfuse3.ROOT_INODE:
            raise pyfuse3.FUSEError(errno.ENOENT)
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino, attrs.st_mode, attrs.st_nlink = inode, stat.S_IFDIR | 0o755, 2
        return attrs

    async def lookup(self, parent_inode, name, ctx=None):
        if name == b"wait":
            await self.go.wait()  # a handler suspended, as one waiting on a thread is
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def statfs(self, ctx):
        self.go.set()
        return pyfuse3.StatvfsData()


def main(mountpoint: str) -> None:
    installed = readers.install()
    pyfuse3.init(SuspendingFS(), mountpoint, {"fsname=suspendingfs"})
    try:
        trio.run(pyfuse3.main, 2, 8)
    finally:
        pyfuse3.close(unmount=True)
    locks = [o for o in gc.get_objects() if isinstance(o, readers.TakeTurns)]
    watch = pyfuse3.trio.lowlevel.watch
    report = {"installed": installed, "handovers": [lock.handovers for lock in locks]}
    print(json.dumps({**report, "at_once": watch.at_once, "waited": watch.waited}))


if __name__ == "__main__":
    main(sys.argv[1])
