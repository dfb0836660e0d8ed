"""The control channel of a mount daemon, client side (no pyfuse3, no trio).

`memvault status`, `compact`, `reindex`, `lock` and the key changes
(`passwd`, `keyslot`, `2fa`, `recovery`: op ``keys``, memvault/keys.py) ask
the daemon that serves an unlocked vault and wait for its answer: one JSON request per connection
on a Unix socket in the user's runtime directory (``<id>.sock`` beside the
runtime record; the directory is 0700, the socket 0600, and the daemon
refuses a peer of another uid). The answer is the operation's result, or the
sentence and exit status of the error it met, so a failure inside the daemon
reaches the CLI as it would have in process.

Wire format, one line each way, then the daemon closes the connection::

    {"v": 1, "op": "compact"}
    {"ok": true, "result": {"before": 61440, "after": 36864}}
    {"ok": false, "error": "The disk holding ... is full; ...", "exit_code": 1}
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from ..errors import EXIT_FAILED, DaemonFailed, MemvaultError

PROTOCOL = 1
MAX_MESSAGE = 1 << 20
"""No request is near this; a bigger one is refused, not buffered."""
MAX_ANSWER = 256 << 20
"""An answer may carry a long audit trail; anything bigger is refused."""
MAX_SOCKET_PATH = 100
"""sun_path holds 108 bytes; a longer path is reached through /proc/self/fd."""


class DaemonUnreachable(MemvaultError):
    """The daemon serving the vault (pid {0}) does not answer on its control socket ({1})."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One message; ValueError for anything that is not a JSON object."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    return message


def ask(path: Path, op: str, *, pid: int, timeout: float | None = None, **args: Any) -> dict:
    """Send ``op`` to the daemon listening at ``path``; return its result, or raise
    the error it answered with. Blocks until the operation is done (``timeout``
    None: a compaction or re-index of a big vault takes what it takes)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        try:
            with short_path(path) as where:
                sock.connect(where)
        except OSError as exc:
            raise DaemonUnreachable(pid, exc.strerror or type(exc).__name__) from None
        sock.settimeout(timeout)
        try:
            sock.sendall(encode({"v": PROTOCOL, "op": op, **args}))
            sock.shutdown(socket.SHUT_WR)
            answer = _read_all(sock)
        except (BrokenPipeError, ConnectionResetError):
            answer = b""  # the daemon went away mid-request
    if not answer:
        raise DaemonFailed(f"The daemon (pid {pid}) stopped before answering.")
    try:
        reply = decode(answer)
    except ValueError:
        raise DaemonFailed(f"The daemon (pid {pid}) gave an answer that is not JSON.") from None
    if reply.get("ok"):
        return reply.get("result") or {}
    exit_code = reply.get("exit_code")
    raise DaemonFailed(
        str(reply.get("error") or "The daemon failed."),
        exit_code if isinstance(exit_code, int) and exit_code > 0 else EXIT_FAILED,
    )


def _read_all(sock: socket.socket) -> bytes:
    chunks, size = [], 0
    while chunk := sock.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER:
            raise DaemonFailed("The daemon's answer is too large.")
    return b"".join(chunks)


class short_path:
    """A name for ``path`` that fits in sun_path: itself when short, else the
    same file reached through a descriptor of its directory (Linux)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> str:
        if len(os.fsencode(self._path)) <= MAX_SOCKET_PATH:
            return str(self._path)
        self._fd = os.open(self._path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return f"/proc/self/fd/{self._fd}/{self._path.name}"

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
