"""Issue 9: `ingest --watch` after `lock` must write nothing into the bare
mountpoint (it wrote the watched files there, in plaintext), and every
long-running process holding keys or plaintext is hardened like the daemon."""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from memvault.errors import EXIT_LOCKED

from ..conftest import KDF_ARGS, PASSPHRASE
from ..fsutil import make_env, mounted

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _watch(env: dict, source: Path, *prefix: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *prefix,
            sys.executable,
            "-m",
            "memvault",
            "ingest",
            "context",
            "--source",
            str(source),
            "--watch",
            "--interval",
            "0.2",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **kwargs,
    )


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_watch_after_lock_writes_no_plaintext(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    watched = project / "CLAUDE.md"
    watched.write_text(f"# Rules\nfirst version {secrets.token_hex(8)}\n")
    (tmp_path / "m").mkdir()
    with mounted(tmp_path / "m") as m:
        imported = m.root / "context" / "proj" / "CLAUDE.md"
        watcher = _watch(m.env, project)
        try:
            _wait_for(imported.exists, 60, "--watch did not import CLAUDE.md")
            locked = m.lock()
            assert locked.returncode == 0, locked.stderr  # the watcher's descriptor: no EBUSY
            assert not m.is_mounted()
            watched.write_text(f"# Rules\nsecond version {secrets.token_hex(8)}\n")
            with contextlib.suppress(subprocess.TimeoutExpired):
                watcher.wait(timeout=10)
            assert os.listdir(m.root) == [], "plaintext written into the bare mountpoint"
        finally:
            if watcher.poll() is None:
                watcher.kill()
            out, err = watcher.communicate(timeout=30)
        # Its progress went to stderr before; the error is its last line.
        last = err.decode().strip().splitlines()[-1]
        assert last.startswith("memvault: The vault was locked"), err
        assert watcher.returncode == EXIT_LOCKED and b"Traceback" not in err, err
        again = m.unlock()
        assert again.returncode == 0, again.stderr
        assert "first version" in imported.read_text()


@pytest.fixture
def open_base():
    """A directory tree the unprivileged user owns (pytest's tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="memvault-harden-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _raise_core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def test_watch_process_is_hardened_like_the_daemon(open_base):
    """Run as an unprivileged user: another process of that user can read a
    dumpable process's environ (here: its passphrase), not a hardened one's."""
    project = open_base / "proj"
    project.mkdir()
    (project / "CLAUDE.md").write_text("# Rules\nuse tabs\n")
    env = make_env(open_base)
    env["HOME"] = str(open_base)
    subprocess.run(["chown", "-R", "65534:65534", str(open_base)], check=True)
    init = subprocess.run(
        [*NOBODY, sys.executable, "-m", "memvault", "init", *KDF_ARGS],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert init.returncode == 0, init.stderr
    watcher = _watch(env, project, *NOBODY, preexec_fn=_raise_core_limit)
    try:
        for line in iter(watcher.stderr.readline, b""):  # EOF if it fails
            if line.startswith(b"Watching"):
                break
        assert watcher.poll() is None, watcher.communicate(timeout=30)[1]
        pid = watcher.pid
        peek = subprocess.run(
            [*NOBODY, "cat", f"/proc/{pid}/environ"], capture_output=True, timeout=30
        )
        assert peek.returncode != 0, "another process of the user read the watcher's environ"
        assert PASSPHRASE not in peek.stdout
        limits = Path(f"/proc/{pid}/limits").read_text()
        core = next(x for x in limits.splitlines() if x.startswith("Max core file size"))
        assert core.split()[4:6] == ["0", "0"], core
    finally:
        watcher.kill()
        watcher.communicate(timeout=30)
