"""The one place that turns exceptions into errno values for the kernel."""

from __future__ import annotations

import errno
import logging

import pyfuse3
import pytest
import trio

from memvault.errors import DiskFull, MemoryNotFound
from memvault.fs.errors import fuse_errors


@fuse_errors
async def raising(exc: BaseException):
    raise exc


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (MemoryNotFound("secret-name.md"), errno.ENOENT),
        (DiskFull("/v"), errno.ENOSPC),
        (PermissionError(errno.EACCES, "denied"), errno.EACCES),
        (pyfuse3.FUSEError(errno.EXDEV), errno.EXDEV),
        (KeyError("secret-name.md"), errno.EIO),
        (ZeroDivisionError("a bug"), errno.EIO),
    ],
)
def test_exceptions_become_errno(exc, code, caplog):
    caplog.set_level(logging.ERROR, logger="memvault.fs")
    with pytest.raises(pyfuse3.FUSEError) as caught:
        trio.run(raising, exc)
    assert caught.value.errno == code
    if code == errno.EIO:
        assert f"unexpected {type(exc).__name__} in raising" in caplog.text
    assert "secret-name" not in caplog.text, "a log line must not carry names or content"


def test_base_exceptions_pass_through():
    # trio's Cancelled and KeyboardInterrupt are BaseExceptions: never turned into EIO.
    with pytest.raises(KeyboardInterrupt):
        trio.run(raising, KeyboardInterrupt())
