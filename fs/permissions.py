"""POSIX access checks made by the mount itself, where the kernel leaves them to it.

With ``default_permissions`` the kernel checks every access against the
attributes it caches; but a create, unlink or rename in a directory drops
that directory's cached attributes, so each such change first waits for a
GETATTR of the directory (one round trip in five when creating a small
file). The kernel asks for that option only with ``unlock --allow-other``.
Without it, the kernel lets no one but the user who mounted reach the mount
(root included), and the modes only guard that user from their own
mistakes (a note made read-only): the handlers check them here, from
metadata already in memory, as gocryptfs leaves them to the disk beneath.

Root passes every check here; the kernel itself still refuses an exec of a
file with no x bit at all, and checks the sticky bit. Where this differs
from the kernel's checks: the x bit is checked on every directory above an
entry, not only on those a path walk passes (a shell inside a directory
whose parent lost its x bit can no longer open what is in it); and the
attributes of a name the kernel still caches (stat, chmod, chown, times,
truncate) are not gated by its directories' x bits.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable

import pyfuse3

from ..vault.records import Meta

R, W, X = os.R_OK, os.W_OK, os.X_OK
ROOT_UID = 0
NOW_SLACK_NS = 1_000_000_000
"""A time set within this of now is taken for utimensat's UTIME_NOW: pyfuse3
hands both over as times."""


def caller_groups(pid: int) -> frozenset[int]:
    """The supplementary groups of a process (empty if it is gone or unseen)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("Groups:"):
                    return frozenset(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return frozenset()


class Requester:
    """Who asks (not root), as the checks need them: uid, gid, and the
    supplementary groups, read from /proc once, and only if a check needs them."""

    __slots__ = ("uid", "gid", "_pid", "_groups")

    def __init__(self, ctx) -> None:
        self.uid, self.gid, self._pid = ctx.uid, ctx.gid, ctx.pid
        self._groups: frozenset[int] | None = None

    def in_group(self, gid: int) -> bool:
        if gid == self.gid:
            return True
        if self._groups is None:
            self._groups = caller_groups(self._pid)
        return gid in self._groups


def root_permitted(meta: Meta, want: int) -> bool:
    """Root may do anything but execute a file with no x bit."""
    return not want & X or meta.is_dir or bool(meta.mode & 0o111)


def permitted(meta: Meta, who: Requester, want: int) -> bool:
    """Whether the caller may read, write or search/execute (``want``: R|W|X) an
    entry: the owner's bits, else the group's, else the others' (generic_permission)."""
    if who.uid == meta.uid:
        bits = meta.mode >> 6
    elif who.in_group(meta.gid):
        bits = meta.mode >> 3
    else:
        bits = meta.mode
    return bits & want == want


def require(meta: Meta, who: Requester, want: int) -> None:
    if not permitted(meta, who, want):
        raise pyfuse3.FUSEError(errno.EACCES)


def require_search(directories: Iterable[Meta], who: Requester) -> None:
    """The x bit of every directory above an entry."""
    for meta in directories:
        require(meta, who, X)


def require_owner(meta: Meta, who: Requester) -> None:
    """chmod: the owner's (EPERM)."""
    if who.uid != meta.uid:
        raise pyfuse3.FUSEError(errno.EPERM)


def require_chown(meta: Meta, who: Requester, uid: int | None, gid: int | None) -> None:
    """Only root gives an entry away; its owner may set the owner to themselves
    and the group to one of their own (EPERM)."""
    require_owner(meta, who)
    if uid is not None and uid != meta.uid:
        raise pyfuse3.FUSEError(errno.EPERM)
    if gid is not None and gid != meta.gid and not who.in_group(gid):
        raise pyfuse3.FUSEError(errno.EPERM)


def require_times(meta: Meta, who: Requester, times_ns: Iterable[int]) -> None:
    """utimensat: its owner sets any time; others set now if they may write
    (EACCES), and nothing else (EPERM)."""
    if who.uid == meta.uid:
        return
    now = time.time_ns()
    if any(abs(t - now) > NOW_SLACK_NS for t in times_ns):
        raise pyfuse3.FUSEError(errno.EPERM)
    require(meta, who, W)


def require_setattr(meta: Meta, who: Requester, attr, fields, *, by_path: bool) -> None:
    """What chmod, chown, utimensat and truncate need (EPERM or EACCES); an
    ftruncate (not ``by_path``) was checked when its file was opened."""
    if fields.update_mode:
        require_owner(meta, who)
    if fields.update_uid or fields.update_gid:
        uid = attr.st_uid if fields.update_uid else None
        require_chown(meta, who, uid, attr.st_gid if fields.update_gid else None)
    times = []
    if fields.update_atime:
        times.append(attr.st_atime_ns)
    if fields.update_mtime:
        times.append(attr.st_mtime_ns)
    if times:
        require_times(meta, who, times)
    if fields.update_size and by_path:
        require(meta, who, W)
