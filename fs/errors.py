"""The one place where exceptions become errno values for the kernel.

A MemvaultError carries its own errno; an OSError keeps its errno; anything
else is a bug: it becomes EIO and a log line (exception type and traceback,
never the message, which may contain a file name), never a dead mount.
"""

from __future__ import annotations

import errno
import logging
import traceback

import pyfuse3

from ..errors import MemvaultError

log = logging.getLogger("memvault.fs")


def as_fuse_error(exc: Exception, handler_name: str) -> pyfuse3.FUSEError:
    """The errno answer for an exception raised while handling a request."""
    if isinstance(exc, pyfuse3.FUSEError):
        return exc
    if isinstance(exc, MemvaultError):
        return pyfuse3.FUSEError(exc.errno)
    if isinstance(exc, OSError):
        return pyfuse3.FUSEError(exc.errno or errno.EIO)
    log.error(
        "unexpected %s in %s (answered EIO):\n%s",
        type(exc).__name__,
        handler_name,
        "".join(traceback.format_tb(exc.__traceback__)),
    )
    return pyfuse3.FUSEError(errno.EIO)
