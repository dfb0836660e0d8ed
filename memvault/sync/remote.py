"""Where a sync group's objects live: any rclone remote (S3, SFTP, WebDAV, ...).

The one seam between sync and storage is ``Remote``: list every object, get
some, put some, delete some. ``RcloneRemote`` runs the ``rclone`` command
with the user's own configuration (``--config`` or rclone's default), one
process per batch, never one per object where a batch will do. Uploads
first go to a name of their own under ``incoming/`` and are then moved to
their final name, so a reader never finds a half-written object under a
real name (an upload cut short leaves only ``incoming/`` debris; an emptied
batch directory may stay). Transient failures (a refused connection, a
timeout, a server killed mid-transfer) are retried a few times with a pause; what still fails
is RemoteUnavailable, and the caller has changed nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from ..errors import RemoteUnavailable, UsageError
from ..locations import runtime_dir

INCOMING = "incoming"
ATTEMPTS = 4
PAUSES = (0.5, 1.5, 3.0)
NOT_FOUND_EXITS = (3, 4)  # rclone: directory not found, file not found
RCLONE_FLAGS = (
    "--retries",
    "1",
    "--low-level-retries",
    "2",
    "--contimeout",
    "10s",
    "--timeout",
    "60s",
    "--use-json-log",
    "--log-level",
    "ERROR",
)


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
    """A Remote through the ``rclone`` command line."""

    def __init__(self, spec: str, *, config: str | None = None, scratch: Path | None = None):
        self.spec = check_spec(spec)
        self.config = config
        self.scratch = scratch  # where downloads and uploads are staged (ciphertext only)
        if shutil.which("rclone") is None:
            raise UsageError("rclone is not installed: install it (apt install rclone) to sync.")

    def _path(self, name: str = "") -> str:
        if not name:
            return self.spec
        sep = "" if self.spec.endswith(":") else "/"
        return f"{self.spec}{sep}{name}"

    def _run(self, *args: str, ok: tuple[int, ...] = ()) -> subprocess.CompletedProcess:
        cmd = ["rclone", *RCLONE_FLAGS]
        if self.config:
            cmd += ["--config", self.config]
        cmd += args
        last = ""
        for attempt in range(ATTEMPTS):
            done = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL)
            if done.returncode == 0 or done.returncode in ok:
                return done
            last = _reason(done.stderr)
            if done.returncode in (1,) and "syntax" in last.lower():
                break  # a bad command line never gets better
            if attempt < len(PAUSES):
                time.sleep(PAUSES[attempt])
        raise RemoteUnavailable(self.spec, last or "rclone failed")

    def _staging(self) -> tempfile.TemporaryDirectory:
        if self.scratch is not None:
            self.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix="sync-", dir=self.scratch)

    def list(self) -> dict[str, int]:
        done = self._run(
            "lsjson",
            "-R",
            "--files-only",
            "--no-mimetype",
            "--no-modtime",
            self._path(),
            ok=NOT_FOUND_EXITS,
        )
        if done.returncode:
            return {}
        try:
            return {item["Path"]: int(item["Size"]) for item in json.loads(done.stdout or b"[]")}
        except (ValueError, KeyError, TypeError):
            raise RemoteUnavailable(self.spec, "rclone listed something unreadable") from None

    def get_many(self, names: Iterable[str]) -> dict[str, bytes]:
        names = sorted(set(names))
        if not names:
            return {}
        with self._staging() as tmp:
            wanted = Path(tmp, ".wanted")
            wanted.write_text("".join(f"{n}\n" for n in names))
            down = Path(tmp, "objects")
            self._run(
                "copy",
                self._path(),
                str(down),
                "--files-from-raw",
                str(wanted),
                "--no-traverse",
                ok=NOT_FOUND_EXITS,
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
        batch = f"{INCOMING}/{secrets.token_hex(8)}"
        with self._staging() as tmp:
            for i, data in enumerate(objects.values()):
                path = Path(tmp, f"{i:06d}")
                path.write_bytes(data)
            self._run("copy", tmp, self._path(batch), "--no-traverse")
        for i, name in enumerate(objects):
            self._run("moveto", self._path(f"{batch}/{i:06d}"), self._path(name))

    def delete_many(self, names: Iterable[str]) -> None:
        names = sorted(set(names))
        if not names:
            return
        with self._staging() as tmp:
            listed = Path(tmp, ".delete")
            listed.write_text("".join(f"{n}\n" for n in names))
            self._run("delete", self._path(), "--files-from-raw", str(listed), ok=NOT_FOUND_EXITS)


def _reason(stderr: bytes) -> str:
    """rclone's last error message, from its JSON log lines."""
    for line in reversed(stderr.decode(errors="replace").splitlines()):
        try:
            msg = json.loads(line).get("msg", "")
        except ValueError:
            msg = line
        msg = msg.strip()
        if msg:
            return msg[:300]
    return ""


def scratch_dir(state_dir: Path) -> Path:
    path = state_dir / "sync-scratch"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def rclone_remote(spec: str, config: str | None) -> RcloneRemote:
    """The remote a sync uses, staging through this user's runtime directory."""
    return RcloneRemote(spec, config=config, scratch=scratch_dir(runtime_dir()))
