"""Detaching the mount daemon from the terminal.

`unlock` asks the passphrase in the foreground, then forks: the child opens
the vault, mounts and serves; the parent waits on a pipe until the mount is
ready (or the child reports an error) and returns. The daemon logs to a file
in the runtime directory (no memory content is ever logged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from ..errors import DaemonFailed, MemvaultError
from ..hardening import harden_process
from ..vault import Vault
from ..vault.keyslots import PASSPHRASE_ONLY, Factors
from .mount import serve
from .runtime import MountError, MountRecord

log = logging.getLogger("memvault")

READY = b"ready"
EXIT_SEP = "\x1f"
"""Between the exit status and the sentence of an error opening the vault."""


def start(
    vault: Path,
    mountpoint: Path,
    passphrase: bytearray,
    *,
    allow_other: bool,
    xattrs: bool = False,
    accept_journal_loss: bool = False,
    accept_rollback: bool = False,
    factors: Factors = PASSPHRASE_ONLY,
) -> int:
    """Fork the daemon; return its pid once the mount is ready, or raise its error.

    ``factors``: the keyfile's hash, or that ``passphrase`` is a recovery key."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon: never returns
        os.close(read_fd)
        options = {
            "journal": True,
            "accept_journal_loss": accept_journal_loss,
            "accept_rollback": accept_rollback,
            "factors": factors,
        }
        served = {"allow_other": allow_other, "xattrs": xattrs}
        _run_daemon(vault, mountpoint, passphrase, served, write_fd, options)
    os.close(write_fd)
    for i in range(len(passphrase)):
        passphrase[i] = 0
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    message = b"".join(chunks)
    if message == READY:
        return pid
    os.waitpid(pid, 0)
    text = message.decode(errors="replace")
    code, sep, sentence = text.partition(EXIT_SEP)
    if sep and code.isdigit():
        raise DaemonFailed(sentence, int(code))
    raise MountError(text or "The mount daemon exited unexpectedly.")


def _run_daemon(vault_path, mountpoint, passphrase, served, report_fd, options) -> None:
    code = 1
    reporter = _Reporter(report_fd)
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        log_fd = os.open(
            MountRecord.log_for(vault_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(log_fd, 2)
        logging.basicConfig(
            stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s: %(message)s"
        )
        harden_process()
        try:
            vault = Vault.open(vault_path, passphrase, **options)
        except MemvaultError as exc:  # its exit status too: a wrong passphrase is still 4
            reporter.send(f"{exc.exit_code}{EXIT_SEP}{exc}".encode())
            return
        try:
            serve(vault, mountpoint, **served, on_ready=lambda: reporter.send(READY))
            code = 0
        except MemvaultError as exc:
            log.error("stopped: %s", type(exc).__name__)
            reporter.send(str(exc).encode())
        except BaseException as exc:
            log.error("daemon failed: %s", type(exc).__name__)
            hint = (
                f"The mount failed ({type(exc).__name__}); see {MountRecord.log_for(vault_path)}."
            )
            reporter.send(hint.encode())
    finally:
        reporter.send(b"")
        os._exit(code)


class _Reporter:
    """The pipe back to the waiting `unlock`: one message, then closed for good.

    After close the fd number may be reused by another file (the vault!), so
    nothing may be written to it again.
    """

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def send(self, message: bytes) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._fd, message)
            os.close(self._fd)
            self._fd = None
