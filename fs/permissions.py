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

The kernel still checks an exec's x bit and the sticky bit itself. Not
checked: a stat() of a name the kernel still caches (its directories' x
bits): it shows attributes, never content, and only to their owner.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable

import pyfuse3

from ..vault.records import Meta

R, W, X = os.R_OK, os.W_OK, os.X_OK
ROOT_UID = 0


def caller_groups(pid: int) -> frozenset[int]:
    """The supplementary groups of a process (empty if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("Groups:"):
                    return frozenset(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return frozenset()


def permitted(meta: Meta, ctx, want: int) -> bool:
    """Whether the caller may read, write or search/execute (``want``: R|W|X) an
    entry, as the kernel's generic_permission decides (root passes all but
    the exec of a file with no x bit)."""
    if ctx.uid == ROOT_UID:
        return not want & X or meta.is_dir or bool(meta.mode & 0o111)
    if ctx.uid == meta.uid:
        bits = meta.mode >> 6
    elif ctx.gid == meta.gid or meta.gid in caller_groups(ctx.pid):
        bits = meta.mode >> 3
    else:
        bits = meta.mode
    return bits & want == want


def require(meta: Meta, ctx, want: int) -> None:
    if not permitted(meta, ctx, want):
        raise pyfuse3.FUSEError(errno.EACCES)


def require_search(directories: Iterable[Meta], ctx) -> None:
    """The x bit of every directory a path walk passes through."""
    for meta in directories:
        require(meta, ctx, X)


def require_owner(meta: Meta, ctx) -> None:
    """chmod, and setting times other than now: the owner's or root's (EPERM)."""
    if ctx.uid not in (ROOT_UID, meta.uid):
        raise pyfuse3.FUSEError(errno.EPERM)


def require_chown(meta: Meta, ctx, uid: int | None, gid: int | None) -> None:
    """A new owner only by root; a new group by root, or by the owner to a
    group of their own (EPERM)."""
    if ctx.uid == ROOT_UID:
        return
    if uid is not None and uid != meta.uid:
        raise pyfuse3.FUSEError(errno.EPERM)
    if gid is None or gid == meta.gid:
        return
    if ctx.uid != meta.uid or (gid != ctx.gid and gid not in caller_groups(ctx.pid)):
        raise pyfuse3.FUSEError(errno.EPERM)
