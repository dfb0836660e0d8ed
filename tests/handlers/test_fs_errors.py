"""The one place that turns exceptions into errno values for the kernel."""

from __future__ import annotations

import errno
import logging

import pyfuse3
import pytest
import trio

from memvault.activity import Activity
from memvault.errors import DiskFull, MemoryNotFound
from memvault.fs.operations import request


class Handlers:
    """What the decorator needs of VaultOperations: the mount's activity, and the
    vault's work left for after a reply."""

    def __init__(self) -> None:
        self.activity = Activity()
        self.caught_up = 0

    def catch_up(self) -> None:
        self.caught_up += 1

    @request
    async def raising(self, exc: BaseException):
        raise exc


def raising(exc: BaseException):
    return Handlers().raising(exc)


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


def test_every_request_marks_the_mount_busy():
    handlers = Handlers()
    assert handlers.activity.idle_for() > 1e9, "never touched: idle"
    with pytest.raises(pyfuse3.FUSEError):
        trio.run(handlers.raising, MemoryNotFound("x"))
    assert handlers.activity.idle_for() < 1.0


def test_every_request_first_finishes_what_the_last_one_left_for_after_its_reply():
    handlers = Handlers()
    for expected in (1, 2):
        with pytest.raises(pyfuse3.FUSEError):
            trio.run(handlers.raising, MemoryNotFound("x"))
        assert handlers.caught_up == expected
