"""Access checks the handlers make where the kernel leaves them to the mount
(mounted without default_permissions: see fs/permissions.py), called
in-process as the kernel would, for a user who is not root."""

from __future__ import annotations

import errno
import os
import stat
import time
from types import SimpleNamespace

import pyfuse3
import pytest
import trio

from memvault.fs.inodes import ROOT
from memvault.fs.operations import FMODE_EXEC, VaultOperations

ROOT_CTX = pyfuse3.RequestContext()  # uid and gid 0
UID, GID = 4242, 4343
USER = SimpleNamespace(uid=UID, gid=GID, pid=os.getpid(), umask=0o022)
"""The caller the kernel names in a request (pyfuse3's RequestContext cannot be
made with another uid)."""


def run(fn, *args):
    return trio.run(fn, *args)


def errno_of(fn, *args) -> int:
    with pytest.raises(pyfuse3.FUSEError) as caught:
        run(fn, *args)
    return caught.value.errno


def fields(**asked: bool) -> SimpleNamespace:
    names = ("size", "mode", "uid", "gid", "mtime", "atime", "ctime")
    return SimpleNamespace(**{f"update_{n}": asked.get(n, False) for n in names})


def attrs(**values: int) -> pyfuse3.EntryAttributes:
    out = pyfuse3.EntryAttributes()
    for name, value in values.items():
        setattr(out, f"st_{name}", value)
    return out


def chmod(ops, inode: int, mode: int, ctx=USER):
    return run(ops.setattr, inode, attrs(mode=mode), fields(mode=True), None, ctx)


@pytest.fixture
def ops(vault):
    """A mount of the user's own: its root directory is theirs."""
    ops = VaultOperations(vault, check_access=True)
    run(ops.setattr, ROOT, attrs(uid=UID, gid=GID), fields(uid=True, gid=True), None, ROOT_CTX)
    return ops


def create(ops, parent: int, name: bytes, data: bytes = b"", mode: int = 0o644) -> int:
    async def go():
        info, entry = await ops.create(parent, name, stat.S_IFREG | mode, os.O_WRONLY, USER)
        if data:
            await ops.write(info.fh, 0, data)
        await ops.release(info.fh)
        return entry.st_ino

    return run(go)


def opens(ops, inode: int, flags: int, ctx=USER) -> bool:
    async def go():
        info = await ops.open(inode, flags, ctx)
        await ops.release(info.fh)

    try:
        run(go)
    except pyfuse3.FUSEError as exc:
        assert exc.errno == errno.EACCES
        return False
    return True


def mkdir(ops, parent: int, name: bytes, mode: int = 0o755) -> int:
    return run(ops.mkdir, parent, name, stat.S_IFDIR | mode, USER).st_ino


def test_the_owner_gets_what_the_file_modes_say(ops, vault):
    inode = create(ops, ROOT, b"note.md", b"kept")
    chmod(ops, inode, 0o444)
    assert opens(ops, inode, os.O_RDONLY)
    assert not opens(ops, inode, os.O_WRONLY)
    assert not opens(ops, inode, os.O_RDWR)
    assert not opens(ops, inode, os.O_RDONLY | os.O_TRUNC)
    truncate = (attrs(size=0), fields(size=True), None, USER)
    assert errno_of(ops.setattr, inode, *truncate) == errno.EACCES
    assert vault.get("note.md") == b"kept", "a refused truncate truncated nothing"
    chmod(ops, inode, 0o200)
    assert opens(ops, inode, os.O_WRONLY) and not opens(ops, inode, os.O_RDONLY)
    run(ops.setattr, inode, *truncate)
    assert vault.get("note.md") == b""
    chmod(ops, inode, 0o000)
    assert run(ops.access, inode, os.F_OK, USER)
    for mode in (os.R_OK, os.W_OK, os.X_OK):
        assert errno_of(ops.access, inode, mode, USER) == errno.EACCES
    chmod(ops, inode, 0o750)
    assert run(ops.access, inode, os.R_OK | os.W_OK | os.X_OK, USER)


def test_an_exec_asks_for_x_alone(ops):
    """execve opens with FMODE_EXEC: x is what counts, r is not needed."""
    program = create(ops, ROOT, b"tool", b"#!/bin/sh\n")
    chmod(ops, program, 0o100)
    assert opens(ops, program, os.O_RDONLY | FMODE_EXEC)
    assert not opens(ops, program, os.O_RDONLY)
    chmod(ops, program, 0o655)  # x for the others, not for the owner
    assert not opens(ops, program, os.O_RDONLY | FMODE_EXEC)


def test_a_directory_needs_w_and_x_to_change_and_r_to_list(ops, vault):
    d = mkdir(ops, ROOT, b"d")
    inode = create(ops, d, b"a.md", b"a")
    chmod(ops, d, 0o500)  # r-x: readable, not writable
    new_file = (d, b"b.md", stat.S_IFREG | 0o644, os.O_WRONLY, USER)
    assert errno_of(ops.create, *new_file) == errno.EACCES
    assert errno_of(ops.mkdir, d, b"sub", stat.S_IFDIR | 0o755, USER) == errno.EACCES
    assert errno_of(ops.symlink, d, b"l", b"a.md", USER) == errno.EACCES
    assert errno_of(ops.unlink, d, b"a.md", USER) == errno.EACCES
    assert errno_of(ops.rename, d, b"a.md", ROOT, b"a.md", 0, USER) == errno.EACCES
    assert vault.exists("d/a.md") and not vault.exists("a.md")
    run(ops.releasedir, run(ops.opendir, d, USER))
    assert run(ops.lookup, d, b"a.md", USER).st_ino == inode
    chmod(ops, d, 0o300)  # -wx: changes, no listing
    assert errno_of(ops.opendir, d, USER) == errno.EACCES
    run(ops.rename, d, b"a.md", d, b"c.md", 0, USER)
    assert vault.exists("d/c.md")


def test_a_directory_without_x_hides_everything_below_it(ops, vault):
    d = mkdir(ops, ROOT, b"d")
    sub = mkdir(ops, d, b"sub")
    inode = create(ops, sub, b"deep.md", b"deep")
    chmod(ops, d, 0o600)  # rw-: no search
    assert errno_of(ops.lookup, d, b"sub", USER) == errno.EACCES
    # Names the kernel still caches reach the handlers by inode: the path above
    # them is checked there.
    assert not opens(ops, inode, os.O_RDONLY)
    assert errno_of(ops.opendir, sub, USER) == errno.EACCES
    assert errno_of(ops.unlink, sub, b"deep.md", USER) == errno.EACCES
    assert errno_of(ops.access, inode, os.F_OK, USER) == errno.EACCES
    chmod(ops, d, 0o700)
    assert opens(ops, inode, os.O_RDONLY)


def test_moving_a_directory_elsewhere_needs_w_on_it(ops, vault):
    a, b = mkdir(ops, ROOT, b"a"), mkdir(ops, ROOT, b"b")
    moved = mkdir(ops, a, b"moved")
    chmod(ops, moved, 0o500)
    assert errno_of(ops.rename, a, b"moved", b, b"moved", 0, USER) == errno.EACCES
    run(ops.rename, a, b"moved", a, b"renamed", 0, USER)  # its ".." stays: allowed
    chmod(ops, moved, 0o700)
    run(ops.rename, a, b"renamed", b, b"moved", 0, USER)
    assert vault.exists("b/moved")
    other = mkdir(ops, a, b"other", mode=0o500)  # exchanged with b/moved: its ".." changes
    exchange = (b, b"moved", a, b"other", pyfuse3.RENAME_EXCHANGE, USER)
    assert errno_of(ops.rename, *exchange) == errno.EACCES
    chmod(ops, other, 0o700)
    run(ops.rename, *exchange)
    assert run(ops.lookup, b, b"moved", USER).st_ino == other


def test_chmod_chown_and_times_follow_posix(ops, vault):
    mine = create(ops, ROOT, b"mine.md", b"x")
    theirs = create(ops, ROOT, b"theirs.md", b"x", mode=0o646)
    run(ops.setattr, theirs, attrs(uid=7, gid=7), fields(uid=True, gid=True), None, ROOT_CTX)
    assert errno_of(ops.setattr, theirs, attrs(mode=0o777), fields(mode=True), None, USER) == (
        errno.EPERM
    )
    chmod(ops, mine, 0o600)
    give = (attrs(uid=7), fields(uid=True), None, USER)
    assert errno_of(ops.setattr, mine, *give) == errno.EPERM
    other_group = (attrs(gid=7), fields(gid=True), None, USER)
    assert errno_of(ops.setattr, mine, *other_group) == errno.EPERM
    run(ops.setattr, mine, attrs(gid=GID, uid=UID), fields(uid=True, gid=True), None, USER)
    unchanged = (attrs(uid=7, gid=7), fields(uid=True, gid=True), None, USER)
    assert errno_of(ops.setattr, theirs, *unchanged) == errno.EPERM  # not theirs to chown
    both = fields(mtime=True, atime=True)
    then = (attrs(mtime_ns=10**18, atime_ns=10**18), both, None, USER)
    now = time.time_ns()
    touch = (attrs(mtime_ns=now, atime_ns=now), both, None, USER)  # UTIME_NOW, as pyfuse3 passes it
    assert errno_of(ops.setattr, theirs, *then) == errno.EPERM  # o+w, yet not the owner
    run(ops.setattr, theirs, *touch)  # o+w: may set now
    chmod(ops, theirs, 0o644, ROOT_CTX)
    assert errno_of(ops.setattr, theirs, *touch) == errno.EACCES
    assert run(ops.setattr, mine, *then).st_mtime_ns == 10**18
    run(ops.setattr, mine, attrs(uid=7), fields(uid=True), None, ROOT_CTX)  # root may


def test_root_passes_every_check_but_exec_without_an_x_bit(ops, vault):
    d = mkdir(ops, ROOT, b"d")
    inode = create(ops, d, b"a.md", b"a", mode=0o000)
    chmod(ops, d, 0o000)
    run(ops.create, d, b"b.md", stat.S_IFREG | 0o600, os.O_WRONLY, ROOT_CTX)
    info = run(ops.open, inode, os.O_RDWR, ROOT_CTX)
    run(ops.release, info.fh)
    assert run(ops.access, inode, os.R_OK | os.W_OK, ROOT_CTX)
    assert not run(ops.access, inode, os.X_OK, ROOT_CTX)  # pyfuse3 answers EACCES
    chmod(ops, inode, 0o010)
    assert run(ops.access, inode, os.X_OK, ROOT_CTX)


def test_extended_attributes_need_r_to_read_and_w_to_write_but_not_to_list(vault):
    ops = VaultOperations(vault, xattrs=True, check_access=True)
    run(ops.setattr, ROOT, attrs(uid=UID, gid=GID), fields(uid=True, gid=True), None, ROOT_CTX)
    inode = create(ops, ROOT, b"a.md", b"x")
    run(ops.setxattr, inode, b"user.topic", b"v", USER)
    chmod(ops, inode, 0o000)
    assert run(ops.listxattr, inode, USER) == [b"user.topic"]
    assert errno_of(ops.getxattr, inode, b"user.topic", USER) == errno.EACCES
    assert errno_of(ops.setxattr, inode, b"user.topic", b"w", USER) == errno.EACCES
    assert errno_of(ops.removexattr, inode, b"user.topic", USER) == errno.EACCES


def test_with_default_permissions_the_handlers_leave_checks_to_the_kernel(vault):
    ops = VaultOperations(vault)  # what `unlock --allow-other` serves
    inode = create(ops, ROOT, b"note.md", b"x", mode=0o000)
    assert opens(ops, inode, os.O_RDWR)
