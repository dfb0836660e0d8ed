"""Where a sync group's objects live: any rclone remote (S3, SFTP, WebDAV, ...).

The one seam between sync and storage is ``Remote``: list every object, get
some, put some, delete some. ``RcloneRemote`` drives one long-lived
``rclone rcd`` (rclone's remote-control server, on 127.0.0.1 with a random
user and password) with the user's own configuration: each request then
reuses rclone's open connection, milliseconds where a new ``rclone``
process per batch cost half a second over SSH; that is what lets a mounted
vault sync every few seconds. Uploads first go to a name of their own under
``incoming/`` and are then moved to their final name, so a reader never
finds a half-written object under a real name (an upload cut short leaves
only ``incoming/`` debris). Transient failures (a refused connection, a
timeout, a server killed mid-transfer) are retried a few times with a
pause; what still fails is RemoteUnavailable, and the caller has changed
nothing.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..errors import RemoteUnavailable, UsageError
from ..locations import runtime_dir

INCOMING = "incoming"
PR_SET_PDEATHSIG = 1
STALE_UPLOAD_S = 3600.0
"""An upload batch still in incoming/ after this long was cut short (any device's)."""
ATTEMPTS = 4
PAUSES = (0.5, 1.5, 3.0)
ONE_BY_ONE = 16
"""Batches up to this many objects go one request per object; larger ones as
one transfer (rclone then lists and copies in parallel)."""
RCD_FLAGS = (
    "--low-level-retries",
    "2",
    "--contimeout",
    "10s",
    "--timeout",
    "60s",
    "--log-level",
    "ERROR",
)
TRANSFER = {"IgnoreChecksum": True, "NoTraverse": True}
"""Every object is sealed (a changed byte fails its check when opened), so
rclone's own checksum after each upload (an MD5 computed by the server: a
round trip and a read) adds nothing; sizes are still compared."""


class Remote(Protocol):
    """The storage a sync group lives in (names are relative, ``/``-separated)."""

    spec: str

    def list(self) -> dict[str, int]:
        """Every object and its size (``incoming/`` included)."""

    def get_many(self, names: Iterable[str]) -> dict[str, bytes]:
        """The objects that exist among ``names``."""

    def put_many(self, objects: Mapping[str, bytes]) -> None:
        """Store objects; each appears whole under its name, in the order given."""

    def delete_many(self, names: Iterable[str]) -> None:
        """Remove objects (those already gone are no error)."""


def check_spec(spec: str) -> str:
    """``REMOTE:PATH`` as rclone names it (a local directory also works)."""
    spec = spec.strip()
    if not spec or spec.endswith(":") and len(spec) == 1:
        raise UsageError("Name the sync remote as REMOTE:PATH (an rclone remote and a path).")
    return spec.rstrip("/") if not spec.endswith(":") else spec


class RcloneRemote:
    """A Remote through one ``rclone rcd`` started on first use and stopped by
    ``close()`` (or when the process exits)."""

    def __init__(self, spec: str, *, config: str | None = None, scratch: Path | None = None):
        self.spec = check_spec(spec)
        self.config = config
        self.scratch = scratch  # where downloads and uploads are staged (ciphertext only)
        if shutil.which("rclone") is None:
            raise UsageError("rclone is not installed: install it (apt install rclone) to sync.")
        self._rcd: subprocess.Popen | None = None
        self._url = ""
        self._auth = ""
        self._lock = threading.Lock()

    def __enter__(self) -> RcloneRemote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._rcd is not None:
                _stop(self._rcd)
                self._rcd = None

    # -- the rcd process ---------------------------------------------------------------

    def _start(self) -> None:
        port = _free_port()
        password = secrets.token_hex(16)
        cmd = ["rclone", "rcd", *RCD_FLAGS, "--rc-addr", f"127.0.0.1:{port}"]
        cmd += ["--rc-user", "memvault", "--rc-pass", password]
        if self.config:
            cmd += ["--config", self.config]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + 15
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc)
                raise RemoteUnavailable(self.spec, "rclone's remote control did not start")
            time.sleep(0.02)
        self._rcd = proc
        self._url = f"http://127.0.0.1:{port}/"
        self._auth = "Basic " + base64.b64encode(f"memvault:{password}".encode()).decode()

    def _request(self, command: str, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._rcd is None or self._rcd.poll() is not None:
                self._start()
            url, auth = self._url, self._auth
        request = urllib.request.Request(
            url + command,
            data=json.dumps(params).encode(),
            headers={"Content-Type": "application/json", "Authorization": auth},
        )
        with urllib.request.urlopen(request, timeout=300) as answer:
            return json.loads(answer.read() or b"{}")

    def _call(self, command: str, missing_ok: bool = False, **params: Any) -> dict[str, Any] | None:
        """rclone's answer; None if ``missing_ok`` and the object or directory is not
        there; retried with pauses, then RemoteUnavailable."""
        last = "rclone failed"
        for attempt in range(ATTEMPTS):
            try:
                return self._request(command, params)
            except urllib.error.HTTPError as exc:
                last = _reason(exc)
                if exc.code == 404 and missing_ok:
                    return None
                if exc.code in (400, 401, 403):
                    break  # a bad request never gets better
            except (OSError, ValueError) as exc:  # rcd gone or cut off: started again
                last = str(exc) or type(exc).__name__
            if attempt < len(PAUSES):
                time.sleep(PAUSES[attempt])
        raise RemoteUnavailable(self.spec, last[:300])

    # -- the Remote operations --------------------------------------------------------

    def _fs(self, name: str = "") -> str:
        if not name:
            return self.spec
        sep = "" if self.spec.endswith(":") else "/"
        return f"{self.spec}{sep}{name}"

    def _staging(self) -> tempfile.TemporaryDirectory:
        if self.scratch is not None:
            self.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix="sync-", dir=self.scratch)

    def list(self) -> dict[str, int]:
        opt = {"recurse": True, "filesOnly": True, "noModTime": True, "noMimeType": True}
        answer = self._call("operations/list", missing_ok=True, fs=self.spec, remote="", opt=opt)
        if answer is None:
            return {}
        try:
            return {item["Path"]: int(item["Size"]) for item in answer.get("list") or []}
        except (KeyError, TypeError, ValueError):
            raise RemoteUnavailable(self.spec, "rclone listed something unreadable") from None

    def get_many(self, names: Iterable[str]) -> dict[str, bytes]:
        names = sorted(set(names))
        if not names:
            return {}
        with self._staging() as tmp:
            down = Path(tmp, "objects")
            down.mkdir()
            if len(names) <= ONE_BY_ONE:
                for name in names:
                    self._call(
                        "operations/copyfile",
                        missing_ok=True,
                        srcFs=self.spec,
                        srcRemote=name,
                        dstFs=str(down),
                        dstRemote=name,
                        _config=TRANSFER,
                    )
            else:
                wanted = Path(tmp, ".wanted")
                wanted.write_text("".join(f"{n}\n" for n in names))
                self._call(
                    "sync/copy",
                    missing_ok=True,
                    srcFs=self.spec,
                    dstFs=str(down),
                    _filter={"FilesFromRaw": [str(wanted)]},
                    _config=TRANSFER,
                )
            found = {}
            for name in names:
                try:
                    found[name] = Path(down, name).read_bytes()
                except FileNotFoundError:
                    continue
            return found

    def put_many(self, objects: Mapping[str, bytes]) -> None:
        if not objects:
            return
        batch = f"{INCOMING}/{int(time.time())}-{secrets.token_hex(8)}"
        with self._staging() as tmp:
            for i, data in enumerate(objects.values()):
                Path(tmp, f"{i:06d}").write_bytes(data)
            if len(objects) <= ONE_BY_ONE:
                for i in range(len(objects)):
                    self._call(
                        "operations/copyfile",
                        srcFs=tmp,
                        srcRemote=f"{i:06d}",
                        dstFs=self.spec,
                        dstRemote=f"{batch}/{i:06d}",
                        _config=TRANSFER,
                    )
            else:
                self._call("sync/copy", srcFs=tmp, dstFs=self._fs(batch), _config=TRANSFER)
        for i, name in enumerate(objects):
            self._call(
                "operations/movefile",
                srcFs=self.spec,
                srcRemote=f"{batch}/{i:06d}",
                dstFs=self.spec,
                dstRemote=name,
            )

    def delete_many(self, names: Iterable[str]) -> None:
        for name in sorted(set(names)):
            self._call("operations/deletefile", missing_ok=True, fs=self.spec, remote=name)


def stale_uploads(listing: Iterable[str], *, older_than: float = STALE_UPLOAD_S) -> list[str]:
    """Objects under ``incoming/`` that an upload cut short left behind: their batch
    (named by its start time) is older than ``older_than`` seconds."""
    limit = time.time() - older_than
    stale = []
    for name in listing:
        parts = name.split("/")
        if len(parts) == 3 and parts[0] == INCOMING:
            started = parts[1].split("-", 1)[0]
            if not started.isdigit() or int(started) < limit:
                stale.append(name)
    return stale


def _die_with_parent() -> None:
    """In the child: SIGTERM when the thread that started it ends (a killed daemon
    leaves no rcd behind; a syncing thread is long-lived, see requests.py)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _reason(exc: urllib.error.HTTPError) -> str:
    """rclone's error message, from its JSON answer."""
    try:
        return str(json.loads(exc.read()).get("error") or exc.reason)
    except (OSError, ValueError, AttributeError):
        return str(exc.reason)


def scratch_dir(state_dir: Path) -> Path:
    path = state_dir / "sync-scratch"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def rclone_remote(spec: str, config: str | None) -> RcloneRemote:
    """The remote a sync uses, staging through this user's runtime directory."""
    return RcloneRemote(spec, config=config, scratch=scratch_dir(runtime_dir()))
