"""The floor under issue 3's latency goal: a trivial pyfuse3 + trio filesystem.

One in-memory file, 60 s entry/attribute timeouts, keep_cache, handlers that
do nothing. Measured in two modes, each in its own daemon process:

- ``open+flush``: the usual open/flush/release handlers (what memvault needs
  to learn about close(), for close-to-commit durability);
- ``zero-message``: open and flush answer ENOSYS, so the kernel stops sending
  OPEN, FLUSH and RELEASE altogether.

For each: the median of 1,000 cached open+read+close, and whether
``open(O_TRUNC)`` still truncates (libfuse always asks the kernel for atomic
O_TRUNC, which leaves truncation to OPEN; pyfuse3 cannot turn that off).

Usage: scripts/bench fuse_floor
"""

from __future__ import annotations

import errno
import os
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONTENT = b"hello, floor\n"


def serve(mountpoint: str, zero_message: bool) -> None:
    import pyfuse3
    import trio

    class Floor(pyfuse3.Operations):
        def __init__(self) -> None:
            super().__init__()
            self.data = bytearray(CONTENT)

        def _attrs(self, inode: int) -> pyfuse3.EntryAttributes:
            attrs = pyfuse3.EntryAttributes()
            attrs.st_ino = inode
            attrs.entry_timeout = attrs.attr_timeout = 60
            attrs.st_mode = stat.S_IFDIR | 0o755 if inode == 1 else stat.S_IFREG | 0o644
            attrs.st_size = 0 if inode == 1 else len(self.data)
            attrs.st_nlink = 1
            return attrs

        async def lookup(self, parent_inode, name, ctx=None):
            if name != b"f":
                raise pyfuse3.FUSEError(errno.ENOENT)
            return self._attrs(2)

        async def getattr(self, inode, ctx=None):
            return self._attrs(inode)

        async def setattr(self, inode, attr, fields, fh, ctx):
            if fields.update_size:
                del self.data[attr.st_size :]
            return self._attrs(inode)

        async def open(self, inode, flags, ctx):
            if zero_message:
                raise pyfuse3.FUSEError(errno.ENOSYS)
            if flags & os.O_TRUNC:
                self.data.clear()
            return pyfuse3.FileInfo(fh=1, keep_cache=True)

        async def read(self, fh, off, size):
            return bytes(self.data[off : off + size])

        async def write(self, fh, off, buf):
            self.data[off : off + len(buf)] = buf
            return len(buf)

        async def flush(self, fh):
            if zero_message:
                raise pyfuse3.FUSEError(errno.ENOSYS)

    async def main() -> None:
        pyfuse3.init(Floor(), mountpoint, {"fsname=floor", "default_permissions"})
        try:
            await pyfuse3.main()
        finally:
            pyfuse3.close()

    trio.run(main)


def measure(mountpoint: Path) -> tuple[float, bool]:
    path = mountpoint / "f"
    for _ in range(20):
        os.close(os.open(path, os.O_RDONLY))
    times = []
    for _ in range(1000):
        start = time.perf_counter_ns()
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)
        times.append(time.perf_counter_ns() - start)
    with open(path, "wb") as f:  # O_TRUNC, then a shorter write
        f.write(b"xy")
    truncated = path.read_bytes() == b"xy"
    return statistics.median(times) / 1000, truncated


def run(zero_message: bool) -> tuple[float, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        daemon = subprocess.Popen(
            [sys.executable, __file__, "--serve", tmp, "1" if zero_message else "0"]
        )
        try:
            deadline = time.monotonic() + 10
            while not os.path.ismount(tmp):
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit("the floor filesystem did not mount")
                time.sleep(0.05)
            return measure(Path(tmp))
        finally:
            subprocess.run(["fusermount3", "-u", tmp], check=False)
            daemon.wait(timeout=10)


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], sys.argv[3] == "1")
        return
    print(f"# pyfuse3 + trio floor ({time.strftime('%Y-%m-%d')})")
    for label, zero in (("open+flush", False), ("zero-message", True)):
        median, truncated = run(zero)
        print(
            f"- {label}: cached open+read+close median {median:.1f} µs; "
            f"open(O_TRUNC) {'truncates' if truncated else 'does NOT truncate'}"
        )


if __name__ == "__main__":
    main()
