"""Real FUSE mounts for tests: unlock in a temporary directory, always lock
(and, should that fail, force the unmount and kill the daemon)."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import KDF_ARGS, PASSPHRASE, fuse_unavailable


@dataclass
class Mount:
    root: Path
    vault: Path
    env: dict[str, str]

    def cli(self, *args: str, input: bytes = b"", timeout: float = 120):
        return subprocess.run(
            [sys.executable, "-m", "memvault", *args],
            input=input,
            capture_output=True,
            env=self.env,
            timeout=timeout,
            start_new_session=True,
        )

    def record(self) -> dict | None:
        for path in Path(self.env["XDG_RUNTIME_DIR"], "memvault").glob("*.json"):
            return json.loads(path.read_text())
        return None

    def daemon_pid(self) -> int:
        record = self.record()
        assert record is not None, "no daemon record"
        return record["pid"]

    def unlock(self, *extra: str):
        return self.cli("unlock", str(self.root), *extra)

    def lock(self):
        return self.cli("lock", str(self.root))

    def is_mounted(self) -> bool:
        return mountinfo(self.root) is not None


def mountinfo(mountpoint: Path) -> list[str] | None:
    """The fields of the mountpoint's line in /proc/self/mountinfo (None: not mounted)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(mountpoint):
                return fields
    return None


def make_env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env["MEMVAULT_VAULT"] = str(base / "vault" / "memory.vault")
    env["MEMVAULT_PASSPHRASE"] = PASSPHRASE.decode()
    env["XDG_RUNTIME_DIR"] = str(base / "run")
    (base / "run").mkdir(mode=0o700, exist_ok=True)
    return env


@contextmanager
def mounted(base: Path, *, init: bool = True, unlock_args: tuple[str, ...] = ()):
    """An unlocked vault mounted at ``base/mnt`` (a skip saying why, where FUSE is missing)."""
    reason = fuse_unavailable()
    if reason:
        pytest.skip(reason)
    env = make_env(base)
    mount = Mount(base / "mnt", Path(env["MEMVAULT_VAULT"]), env)
    if init:
        done = mount.cli("init", *KDF_ARGS)
        assert done.returncode == 0, done.stderr
    done = mount.unlock(*unlock_args)
    assert done.returncode == 0, done.stderr
    try:
        yield mount
    finally:
        force_lock(mount)


def force_lock(mount: Mount) -> None:
    if mount.is_mounted():
        record = mount.record()
        with suppress(subprocess.TimeoutExpired):
            mount.lock()
        if mount.is_mounted():
            subprocess.run(["fusermount3", "-u", "-z", str(mount.root)], check=False)
        if record is not None:
            with suppress(ProcessLookupError):
                os.kill(record["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while mount.is_mounted() and time.monotonic() < deadline:
        time.sleep(0.05)


def run(*cmd: str, cwd: Path | None = None, check: bool = True, **kwargs):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=120, **kwargs)
    if check:
        assert done.returncode == 0, f"{cmd}: {done.stderr.decode(errors='replace')}"
    return done


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)


def cached_pages(path: Path) -> int:
    """How many of a file's pages the kernel holds up to date (mincore), found
    without reading the file (its open sends no READ, nor does the mapping)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if not size:
            return 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            vec = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return sum(byte & 1 for byte in vec.raw)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)
