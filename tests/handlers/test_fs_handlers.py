"""The FUSE handlers called in-process: no kernel, no mount, a real vault.

Each test drives pyfuse3 Operations the way the kernel would (by inode and
name) and checks what the vault then holds: faster and more precise than a
mount for the handlers' own logic; tests/mount/ covers the kernel side.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from types import SimpleNamespace

import pyfuse3
import pytest
import trio

from memvault.fs import operations
from memvault.fs.handles import RecentBodies
from memvault.fs.inodes import ROOT
from memvault.fs.operations import VaultOperations
from memvault.vault.bodies import CHUNK_SIZE

CTX = pyfuse3.RequestContext()  # the caller: this process's uid and gid


@pytest.fixture
def ops(vault):
    return VaultOperations(vault)


def run(fn, *args):
    return trio.run(fn, *args)


def create(ops, parent: int, name: bytes, data: bytes = b"") -> int:
    """create + write + release, as `echo data > name` does; returns the inode."""

    async def go():
        info, attrs = await ops.create(parent, name, stat.S_IFREG | 0o600, os.O_WRONLY, CTX)
        if data:
            await ops.write(info.fh, 0, data)
        await ops.release(info.fh)
        return attrs.st_ino

    return run(go)


def read(ops, inode: int) -> bytes:
    async def go():
        info = await ops.open(inode, os.O_RDONLY, CTX)
        try:
            return await ops.read(info.fh, 0, 1 << 20)
        finally:
            await ops.release(info.fh)

    return run(go)


def errno_of(fn, *args) -> int:
    with pytest.raises(pyfuse3.FUSEError) as caught:
        run(fn, *args)
    return caught.value.errno


def test_create_write_lookup_read(ops, vault):
    inode = create(ops, ROOT, b"a.md", b"hello")
    assert vault.get("a.md") == b"hello"
    attrs = run(ops.lookup, ROOT, b"a.md", CTX)
    assert attrs.st_ino == inode and attrs.st_size == 5
    assert read(ops, inode) == b"hello"
    assert run(ops.lookup, ROOT, b"missing.md", CTX).st_ino == 0  # a negative entry


def test_mkdir_nests_and_rmdir_refuses_a_full_directory(ops, vault):
    d = run(ops.mkdir, ROOT, b"d", stat.S_IFDIR | 0o700, CTX).st_ino
    create(ops, d, b"x.md", b"x")
    assert vault.get("d/x.md") == b"x"
    assert errno_of(ops.rmdir, ROOT, b"d", CTX) == errno.ENOTEMPTY
    assert errno_of(ops.unlink, ROOT, b"d", CTX) == errno.EISDIR
    assert errno_of(ops.rmdir, d, b"x.md", CTX) == errno.ENOTDIR
    run(ops.unlink, d, b"x.md", CTX)
    run(ops.rmdir, ROOT, b"d", CTX)
    assert not vault.exists("d")


def test_rename_keeps_the_inode_and_replaces_the_target(ops, vault):
    a = create(ops, ROOT, b"a.md", b"A")
    create(ops, ROOT, b"b.md", b"B")
    run(ops.rename, ROOT, b"a.md", ROOT, b"b.md", 0, CTX)
    assert vault.get("b.md") == b"A" and not vault.exists("a.md")
    assert run(ops.lookup, ROOT, b"b.md", CTX).st_ino == a
    create(ops, ROOT, b"c.md", b"C")
    assert errno_of(ops.rename, ROOT, b"b.md", ROOT, b"c.md", pyfuse3.RENAME_NOREPLACE, CTX) == (
        errno.EEXIST
    )
    run(ops.rename, ROOT, b"b.md", ROOT, b"c.md", pyfuse3.RENAME_EXCHANGE, CTX)
    assert (vault.get("b.md"), vault.get("c.md")) == (b"C", b"A")


def test_an_open_file_keeps_its_content_after_unlink(ops, vault):
    inode = create(ops, ROOT, b"a.md", b"still here")

    async def go():
        info = await ops.open(inode, os.O_RDONLY, CTX)
        await ops.unlink(ROOT, b"a.md", CTX)
        try:
            return await ops.read(info.fh, 0, 100)
        finally:
            await ops.release(info.fh)

    assert run(go) == b"still here"
    assert not vault.exists("a.md")


def test_setattr_truncates_and_changes_mode(ops, vault):
    inode = create(ops, ROOT, b"a.md", b"0123456789")
    fields = SimpleNamespace(
        update_size=True,
        update_mode=True,
        update_uid=False,
        update_gid=False,
        update_mtime=False,
        update_atime=False,
        update_ctime=False,
    )  # what the kernel asks to change (pyfuse3's SetattrFields is read-only)
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 4
    attr.st_mode = stat.S_IFREG | 0o640
    out = run(ops.setattr, inode, attr, fields, None, CTX)
    assert out.st_size == 4 and stat.S_IMODE(out.st_mode) == 0o640
    assert vault.get("a.md") == b"0123"


def test_user_xattrs_only(vault):
    ops = VaultOperations(vault, xattrs=True)
    inode = create(ops, ROOT, b"a.md", b"x")
    run(ops.setxattr, inode, b"user.topic", b"release", CTX)
    assert run(ops.getxattr, inode, b"user.topic", CTX) == b"release"
    assert run(ops.listxattr, inode, CTX) == [b"user.topic"]
    assert errno_of(ops.setxattr, inode, b"trusted.x", b"1", CTX) == errno.ENOTSUP
    run(ops.removexattr, inode, b"user.topic", CTX)
    assert errno_of(ops.getxattr, inode, b"user.topic", CTX) == pyfuse3.ENOATTR


def test_xattrs_off_by_default_answer_enosys(ops):
    """ENOSYS, not ENOTSUP: the kernel then stops asking (before every write too)."""
    inode = create(ops, ROOT, b"a.md", b"x")
    assert errno_of(ops.getxattr, inode, b"security.capability", CTX) == errno.ENOSYS
    assert errno_of(ops.getxattr, inode, b"user.topic", CTX) == errno.ENOSYS
    assert errno_of(ops.setxattr, inode, b"user.topic", b"v", CTX) == errno.ENOSYS
    assert errno_of(ops.listxattr, inode, CTX) == errno.ENOSYS
    assert errno_of(ops.removexattr, inode, b"user.topic", CTX) == errno.ENOSYS


def test_symlinks_hard_links_and_devices(ops, vault):
    link = run(ops.symlink, ROOT, b"l", b"a.md", CTX).st_ino
    assert run(ops.readlink, link, CTX) == b"a.md"
    assert vault.readlink("l") == "a.md"
    inode = create(ops, ROOT, b"a.md", b"x")
    assert errno_of(ops.link, inode, ROOT, b"b.md", CTX) == errno.ENOTSUP
    assert errno_of(ops.mknod, ROOT, b"fifo", stat.S_IFIFO | 0o600, 0, CTX) == errno.ENOTSUP


def test_bad_names_and_stale_inodes(ops):
    assert errno_of(ops.lookup, ROOT, b"a" * 256, CTX) in (errno.ENAMETOOLONG, errno.EINVAL)
    assert errno_of(ops.getattr, 999_999, CTX) == errno.ENOENT
    inode = create(ops, ROOT, b"gone.md", b"x")
    run(ops.unlink, ROOT, b"gone.md", CTX)
    assert errno_of(ops.getattr, inode, CTX) == errno.ENOENT


# -- review findings: large-file writes and reads through one handle ---------------------


CHUNK = CHUNK_SIZE


def test_a_chunk_kept_before_the_file_grew_reads_at_its_full_length(ops):
    """A chunk read while it was the file's short last one, then the file grows
    past it by a write further out: the gap reads as zeros, nothing shifts."""
    inode = create(ops, ROOT, b"grow.bin")
    short = 36 * 1024  # of the second chunk

    async def go():
        info = await ops.open(inode, os.O_RDWR, CTX)
        try:
            await ops.write(info.fh, 0, b"A" * (CHUNK + short))
            assert len(await ops.read(info.fh, CHUNK, CHUNK)) == short  # kept, short
            await ops.write(info.fh, 2 * CHUNK, b"Z" * CHUNK)
            got = await ops.read(info.fh, CHUNK, 2 * CHUNK)
        finally:
            await ops.release(info.fh)
        return got

    got = run(go)
    assert got == b"A" * short + bytes(CHUNK - short) + b"Z" * CHUNK


def test_a_write_that_fails_to_commit_changes_nothing_kept(tmp_path):
    """A full disk (a real one) refuses a write: what the handle reads, and the
    next write of the same chunk, must not carry the refused bytes."""
    from memvault.vault import Vault

    from ..conftest import FAST_KDF, PASSPHRASE, small_disk

    with small_disk(tmp_path / "tiny", "2m") as disk:
        vault = Vault.create(disk / "memory.vault", PASSPHRASE, kdf=FAST_KDF, compact_delay=None)
        try:
            ops = VaultOperations(vault)
            inode = create(ops, ROOT, b"f.md", b"A" * 60_000)
            filler = disk / "filler"
            with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 4096)

            async def go():
                info = await ops.open(inode, os.O_RDWR, CTX)
                try:
                    assert await ops.read(info.fh, 0, 100_000) == b"A" * 60_000
                    with pytest.raises(pyfuse3.FUSEError) as full:
                        await ops.write(info.fh, 0, b"B" * 10)  # a part of the kept chunk
                    assert full.value.errno == errno.ENOSPC
                    assert await ops.read(info.fh, 0, 100_000) == b"A" * 60_000
                    filler.unlink()
                    await ops.write(info.fh, 59_999, b"C")
                finally:
                    await ops.release(info.fh)

            run(go)
            assert read(ops, inode) == b"A" * 59_999 + b"C"
        finally:
            vault.close()


def test_a_large_read_spans_chunks_at_any_offset(ops):
    """The kernel reads a large file 1 MiB at a time (whole chunks decrypted into
    one buffer); any other offset and length reads the same bytes."""
    data = os.urandom(3 * CHUNK + 1000)
    inode = create(ops, ROOT, b"big.bin", data)

    async def go():
        info = await ops.open(inode, os.O_RDONLY, CTX)
        try:
            return [
                bytes(await ops.read(info.fh, off, size))
                for off, size in (
                    (0, 1 << 20),
                    (CHUNK - 5, CHUNK + 10),
                    (100, 3 * CHUNK),
                    (3 * CHUNK + 999, 50),
                )
            ]
        finally:
            await ops.release(info.fh)

    whole, across, unaligned, tail = run(go)
    assert whole == data
    assert across == data[CHUNK - 5 : 2 * CHUNK + 5]
    assert unaligned == data[100 : 3 * CHUNK + 100]
    assert tail == data[-1:]


def test_truncating_a_large_file_to_nothing_decrypts_nothing(ops, vault, monkeypatch):
    inode = create(ops, ROOT, b"big.bin", os.urandom(2 << 20))
    decrypted = []
    original = vault._bodies.read_all
    monkeypatch.setattr(
        vault._bodies, "read_all", lambda txn, entry: decrypted.append(1) or original(txn, entry)
    )

    async def go():
        info = await ops.open(inode, os.O_WRONLY | os.O_TRUNC, CTX)
        await ops.release(info.fh)

    run(go)
    assert decrypted == [] and read(ops, inode) == b""


def test_fsync_runs_inline_while_the_disk_is_quick_and_in_a_thread_after_a_slow_one(
    ops, vault, monkeypatch
):
    """A thread hop costs about as much as a journal fdatasync, so fsync runs on
    the file system's own thread; once one took longer than SLOW_SYNC_S (a slow
    disk, simulated by a delay after the real flush), the next runs in a worker
    thread so the other requests are served meanwhile; a quick one brings it back."""
    monkeypatch.setattr(operations, "SLOW_SYNC_S", 0.3)  # far above a loaded CI's fdatasync
    inode = create(ops, ROOT, b"a.md", b"hello")
    threads, delays = [], [0.0, 0.6, 0.0, 0.0]
    real = vault.sync_files

    def sync_files():
        real()
        threads.append(threading.current_thread() is threading.main_thread())
        time.sleep(delays[len(threads) - 1])

    monkeypatch.setattr(vault, "sync_files", sync_files)

    async def go():
        info = await ops.open(inode, os.O_RDWR, CTX)
        for _ in delays:
            await ops.fsync(info.fh, True)
        await ops.release(info.fh)

    run(go)
    assert threads == [True, True, False, True]
    assert vault.get("a.md") == b"hello"


def test_a_small_file_reopened_unchanged_is_not_decrypted_again(ops, vault, monkeypatch):
    """Its plaintext is kept across opens by body generation (RecentBodies): a
    change made behind the mount's back is read anew, a shred drops it."""
    decrypted = []
    real = vault.read_chunk

    def read_chunk(record_id, index):
        decrypted.append(record_id)
        return real(record_id, index)

    monkeypatch.setattr(vault, "read_chunk", read_chunk)
    inode = create(ops, ROOT, b"a.md", b"first")
    assert read(ops, inode) == b"first" and read(ops, inode) == b"first"
    assert decrypted == []  # the write kept it

    vault.put("a.md", b"changed behind the mount")  # as a sync or the control socket would
    assert read(ops, inode) == b"changed behind the mount"
    assert read(ops, inode) == b"changed behind the mount"
    assert len(decrypted) == 1

    run(ops.unlink, ROOT, b"a.md", CTX)  # shredded: no plaintext of it stays here
    assert not ops.recent._bodies and ops.recent._size == 0


def test_recent_bodies_stay_within_their_bound():
    recent = RecentBodies(limit=10_000)
    for i in range(100):
        recent.put(bytes([i]), 1, bytes(3_000))
    assert recent._size <= 10_000 and len(recent._bodies) == 3
    assert recent.get(bytes([99]), 1) == bytes(3_000)
    assert recent.get(bytes([99]), 2) is None  # another version: not this content
    assert recent.get(bytes([0]), 1) is None  # the oldest went first
    recent.put(b"big", 1, bytes(20_000))  # larger than the bound: not kept at all
    assert recent.get(b"big", 1) is None and recent._size <= 10_000
