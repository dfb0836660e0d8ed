"""The floor under issue 3's latency goal: trivial filesystems, one in-memory file.

60 s entry/attribute timeouts, keep_cache, handlers that do nothing, each in
its own daemon process:

- the same filesystem in C on libfuse's single-threaded loop (compiled here
  with gcc and libfuse3-dev), to show what the kernel round trips cost;
- pyfuse3 + trio with the usual open/flush/release handlers (what memvault
  needs to learn about close(), for close-to-commit durability), with
  pyfuse3's default of one idle worker task and with eight (as memvault);
- pyfuse3 + trio ``zero-message``: open and flush answer ENOSYS, so the
  kernel stops sending OPEN, FLUSH and RELEASE altogether.

For each: the median of 1,000 cached open+read+close, and whether
``open(O_TRUNC)`` still truncates (libfuse always asks the kernel for atomic
O_TRUNC, which leaves truncation to OPEN; pyfuse3 cannot turn that off).

Usage: scripts/bench fuse_floor (on an idle machine: this measures wake-up latency)
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


C_SOURCE = r"""
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <errno.h>
#include <string.h>
static const char *content = "hello, floor\n";
static void fill(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_nlink = 1;
    st->st_mode = ino == 1 ? S_IFDIR | 0755 : S_IFREG | 0644;
    st->st_size = ino == 1 ? 0 : strlen(content);
}
static void do_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct fuse_entry_param e;
    if (parent != 1 || strcmp(name, "f")) { fuse_reply_err(req, ENOENT); return; }
    memset(&e, 0, sizeof e);
    e.ino = 2; e.attr_timeout = 60; e.entry_timeout = 60;
    fill(2, &e.attr);
    fuse_reply_entry(req, &e);
}
static void do_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct stat st; fill(ino, &st); fuse_reply_attr(req, &st, 60);
}
static void do_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    fi->keep_cache = 1; fuse_reply_open(req, fi);
}
static void do_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi) {
    size_t len = strlen(content);
    if ((size_t)off >= len) { fuse_reply_buf(req, NULL, 0); return; }
    fuse_reply_buf(req, content + off, off + size > len ? len - off : size);
}
static void do_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    fuse_reply_err(req, 0);
}
static const struct fuse_lowlevel_ops ops = {
    .lookup = do_lookup, .getattr = do_getattr, .open = do_open, .read = do_read,
    .flush = do_ok, .release = do_ok,
};
int main(int argc, char **argv) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts opts;
    if (fuse_parse_cmdline(&args, &opts) != 0 || !opts.mountpoint) return 1;
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se || fuse_set_signal_handlers(se) || fuse_session_mount(se, opts.mountpoint)) return 1;
    int rc = fuse_session_loop(se);
    fuse_session_unmount(se);
    return rc ? 1 : 0;
}
"""


def compile_c(work: Path) -> list[str]:
    source = work / "floor_ll.c"
    source.write_text(C_SOURCE)
    flags = subprocess.run(
        ["pkg-config", "fuse3", "--cflags", "--libs"], check=True, capture_output=True, text=True
    ).stdout.split()
    binary = work / "floor_ll"
    subprocess.run(["gcc", "-O2", str(source), *flags, "-o", str(binary)], check=True)
    return [str(binary), "-f"]


def serve(mountpoint: str, zero_message: bool, min_tasks: int) -> None:
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
            await pyfuse3.main(min_tasks=min_tasks)
        finally:
            pyfuse3.close()

    trio.run(main)


def measure(mountpoint: Path) -> tuple[float, bool | None]:
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
    try:
        with open(path, "wb") as f:  # O_TRUNC, then a shorter write
            f.write(b"xy")
        truncated: bool | None = path.read_bytes() == b"xy"
    except OSError:  # the C filesystem is read-only
        truncated = None
    return statistics.median(times) / 1000, truncated


def run(command: list[str]) -> tuple[float, bool | None]:
    with tempfile.TemporaryDirectory() as tmp:
        daemon = subprocess.Popen([*command, tmp])
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
        serve(sys.argv[4], sys.argv[2] == "zero", int(sys.argv[3]))
        return
    print(f"# FUSE floor ({time.strftime('%Y-%m-%d')})")
    python = [sys.executable, __file__, "--serve"]
    with tempfile.TemporaryDirectory() as work:
        for label, command in (
            ("C libfuse, open+flush", compile_c(Path(work))),
            ("pyfuse3 + trio, open+flush, 1 idle task", [*python, "flush", "1"]),
            ("pyfuse3 + trio, open+flush, 8 idle tasks", [*python, "flush", "8"]),
            ("pyfuse3 + trio, zero-message, 8 idle tasks", [*python, "zero", "8"]),
        ):
            median, truncated = run(command)
            trunc = {True: "truncates", False: "does NOT truncate", None: "not tried (read-only)"}
            print(
                f"- {label}: cached open+read+close median {median:.1f} µs; "
                f"open(O_TRUNC) {trunc[truncated]}"
            )


if __name__ == "__main__":
    main()
