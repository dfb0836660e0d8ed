"""The control channel of a mount daemon, server side: answers requests in
the daemon's trio loop, one per connection (control.py has the wire format).

Only the daemon's own user gets an answer: the socket is 0600 in a 0700
directory, and the peer's uid (SO_PEERCRED) is checked besides, so a socket
reached through a looser directory is still refused.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import trio

from ..errors import EXIT_USAGE, MemvaultError
from ..vault.audit import current_caller, process_caller
from .control import MAX_MESSAGE, PROTOCOL, decode, encode, short_path

log = logging.getLogger("memvault.fs")

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

REQUEST_TIMEOUT_S = 10.0
"""A client has this long to send its request (answers take what they take)."""


class ControlServer:
    """Listens at ``path`` and answers each request with ``handlers[op]``."""

    def __init__(self, path: Path, handlers: dict[str, Handler], log_file: Path) -> None:
        self.path = path
        self._handlers = handlers
        self._log_file = log_file
        self._accepting = trio.CancelScope()
        self._refusal: str | None = None
        self._refusal_spares: frozenset[str] = frozenset()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.path.unlink(missing_ok=True)  # left by a daemon that was killed
            with short_path(self.path) as where:
                await listener.bind(where)
            os.chmod(self.path, 0o600)
            listener.listen(16)
            task_status.started()
            async with trio.open_nursery() as answering:
                with self._accepting:
                    while True:
                        conn, _ = await listener.accept()
                        answering.start_soon(self._answer, trio.SocketStream(conn))
        finally:
            listener.close()
            self.path.unlink(missing_ok=True)

    def refuse(self, sentence: str, *, but: frozenset[str] = frozenset()) -> None:
        """From now on every new request is answered with this error, except ``but``."""
        self._refusal = sentence
        self._refusal_spares = but

    def stop(self) -> None:
        """Accept no more connections; answers already underway are finished."""
        self._accepting.cancel()

    async def _answer(self, stream: trio.SocketStream) -> None:
        async with stream:
            reply = await self._reply(stream)
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await stream.send_all(encode(reply))

    async def _reply(self, stream: trio.SocketStream) -> dict[str, Any]:
        pid, uid = peer_credentials(stream.socket)
        if uid != os.getuid():
            return _error("This vault's daemon answers only its own user.", 1)
        current_caller.set(process_caller(pid, uid, kind="cli"))  # for the audit trail
        try:
            with trio.fail_after(REQUEST_TIMEOUT_S):
                request = decode(await _read_request(stream))
        except (trio.TooSlowError, ValueError, OSError, trio.BrokenResourceError):
            return _error("The request to the daemon was not one JSON object.", EXIT_USAGE)
        op = request.get("op")
        handler = self._handlers.get(op) if isinstance(op, str) else None
        if request.get("v") != PROTOCOL or handler is None:
            return _error(
                f"The daemon does not know the request {op!r} (protocol {PROTOCOL}); "
                "lock the vault and unlock it with this memvault.",
                EXIT_USAGE,
            )
        if self._refusal is not None and op not in self._refusal_spares:
            return _error(self._refusal, 1)
        request["peer"] = [pid, uid]  # from the kernel, whatever the request said
        try:
            return {"ok": True, "result": await handler(request)}
        except MemvaultError as exc:
            return _error(str(exc), exc.exit_code)
        except Exception as exc:  # a bug: the type in the log, never a memory's name
            log.exception("control request %s failed with %s", op, type(exc).__name__)
            return _error(
                f"The daemon failed to {op} ({type(exc).__name__}); see {self._log_file}.", 1
            )


def _error(sentence: str, exit_code: int) -> dict[str, Any]:
    return {"ok": False, "error": sentence, "exit_code": exit_code}


async def _read_request(stream: trio.SocketStream) -> bytes:
    """Until the client's end of stream (it shuts down writing after its line)."""
    chunks, size = [], 0
    while chunk := await stream.receive_some(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_MESSAGE:
            raise ValueError("request too large")
    return b"".join(chunks)


def peer_credentials(sock) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", creds)
    return pid, uid
