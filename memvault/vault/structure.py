"""Checking an LMDB file's structure before this process maps it.

LMDB trusts its pages: a flipped byte in a branch page can make it read out
of bounds and kill the process. Before a file is opened in-process, a forked
child walks every database and touches every byte; if it crashes, hangs or
errors, the vault is reported as damaged instead.
"""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Collection
from pathlib import Path

import lmdb

from ..errors import NotAVault, VaultCorrupted, VaultInUse

CHECK_TIMEOUT_S = 120.0
MAX_DBS = 16

_CHECK_OK, _CHECK_NOT_LMDB, _CHECK_LMDB_ERROR, _CHECK_OPEN_HERE = 0, 3, 4, 5


def check_structure(
    path: Path, timeout: float = CHECK_TIMEOUT_S, *, databases: Collection[str] | None = None
) -> None:
    """Raise VaultCorrupted/NotAVault unless LMDB can read the whole file safely.

    ``databases``: only those are walked (and the list of their names), which
    is enough for a reader of a few keys in them (`status`): every byte of a
    large vault read just to show its header took as long as reading the
    vault, and filled the page cache with it.
    """
    if not path.is_file():
        raise NotAVault(path)
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's code
        code = _CHECK_LMDB_ERROR
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            _walk(path, databases)
            code = _CHECK_OK
        except lmdb.InvalidError:
            code = _CHECK_NOT_LMDB
        except lmdb.Error as exc:
            code = _CHECK_OPEN_HERE if "already open" in str(exc) else _CHECK_LMDB_ERROR
        except BaseException:
            code = _CHECK_LMDB_ERROR
        finally:
            os._exit(code)
    status = _wait_child(pid, timeout)
    if status is None:
        raise VaultCorrupted(path, "reading its storage structure did not finish")
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise VaultCorrupted(path, f"its storage structure is broken (reading it raised {name})")
    code = os.WEXITSTATUS(status)
    if code == _CHECK_NOT_LMDB:
        raise NotAVault(path)
    if code == _CHECK_OPEN_HERE:
        raise VaultInUse(path, f" (pid {os.getpid()}, this process)")
    if code != _CHECK_OK:
        raise VaultCorrupted(path, "its storage structure cannot be read")


def _walk(path: Path, databases: Collection[str] | None = None) -> None:
    """Read every page reachable from the file's roots, or from those of
    ``databases`` (run in a forked child)."""
    env = lmdb.open(
        str(path), subdir=False, lock=False, readonly=True, max_dbs=MAX_DBS, readahead=False
    )
    with env.begin(buffers=True) as txn:
        names = [bytes(k) for k, _ in txn.cursor()]
        if databases is not None:
            names = [name for name in names if name.decode(errors="replace") in databases]
        for name in names:
            db = env.open_db(name, txn=txn, create=False)
            for key, value in txn.cursor(db):
                # A value is contiguous in the map: if its first and last bytes
                # can be read, so can everything between them.
                if len(key):
                    key[0], key[-1]
                if len(value):
                    value[0], value[-1]
    env.close()


def _wait_child(pid: int, timeout: float) -> int | None:
    """waitpid with a timeout (pidfd: no polling); kill the child and return None on expiry."""
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None
    return os.waitpid(pid, 0)[1]
