"""Hardening for every long-running process that holds keys or plaintext
(the mount daemon, `unlock --foreground`, `ingest`): one helper, not copies."""

from __future__ import annotations

import ctypes
import logging
import resource

log = logging.getLogger("memvault")

PR_SET_DUMPABLE = 4


def harden_process() -> None:
    """No core dumps and no ptrace or /proc/PID/{mem,environ} by other
    processes of the same user: keys and decrypted memories live in this memory."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:  # pragma: no cover
        log.warning("could not make the process non-dumpable")
