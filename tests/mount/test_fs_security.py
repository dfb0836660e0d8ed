"""Security invariants of a real mount: owner only, shreds leave no bytes,
no plaintext anywhere outside the mount, a hardened daemon."""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from memvault.vault import Vault

from ..conftest import PASSPHRASE, encodings
from ..fsutil import mounted, mountinfo

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def open_base():
    """A base directory other users may traverse (pytest's tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="memvault-perm-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_nobody(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NOBODY, *cmd], capture_output=True, timeout=30)


def test_other_users_cannot_reach_the_mount(open_base):
    control = open_base / "control.md"
    control.write_text("readable by all")
    control.chmod(0o644)
    assert as_nobody("cat", str(control)).returncode == 0, "the control must be readable"
    with mounted(open_base) as m:
        (m.root / "secret.md").write_text("owner only")
        os.chmod(m.root / "secret.md", 0o644)
        os.chmod(m.root, 0o755)  # even with open modes, FUSE refuses other users
        for cmd in (("cat", str(m.root / "secret.md")), ("ls", str(m.root))):
            denied = as_nobody(*cmd)
            assert denied.returncode != 0
            assert b"Permission denied" in denied.stderr, denied.stderr


def test_allow_other_is_an_explicit_opt_in(open_base):
    with mounted(open_base) as m:
        m.lock()
        assert m.unlock("--allow-other").returncode == 0
        (m.root / "shared.md").write_text("shared on purpose")
        os.chmod(m.root / "shared.md", 0o644)
        os.chmod(m.root, 0o755)
        allowed = as_nobody("cat", str(m.root / "shared.md"))
        assert allowed.returncode == 0 and allowed.stdout == b"shared on purpose"
        (m.root / "private.md").write_text("still private")
        os.chmod(m.root / "private.md", 0o600)  # default_permissions still applies
        assert as_nobody("cat", str(m.root / "private.md")).returncode != 0


def _super_options(mountpoint: Path) -> set[str]:
    fields = mountinfo(mountpoint)
    assert fields is not None, f"{mountpoint} is not mounted"
    return set(fields[fields.index("-") + 3].split(","))


def test_the_kernel_checks_modes_only_on_a_shared_mount(open_base):
    """The owner's mount checks its modes in the handlers (fs/permissions.py):
    a change in a directory then costs no GETATTR of it first."""
    with mounted(open_base) as m:
        assert "default_permissions" not in _super_options(m.root)
        script = m.root / "run.sh"
        script.write_text("#!/bin/sh\necho ran\n")
        script.chmod(0o644)
        assert not os.access(script, os.X_OK)  # root too: exec needs an x bit
        assert os.access(script, os.R_OK | os.W_OK)
        script.chmod(0o744)
        assert os.access(script, os.X_OK)
        assert subprocess.run([str(script)], capture_output=True).stdout == b"ran\n"
        m.lock()
        assert m.unlock("--allow-other").returncode == 0
        assert {"default_permissions", "allow_other"} <= _super_options(m.root)


def test_rm_shreds_and_lock_leaves_no_byte(tmp_path):
    body = b"sk-live-" + secrets.token_hex(32).encode() + b"\n" + b"x" * 3000
    with mounted(tmp_path) as m:
        for i in range(20):
            (m.root / f"other-{i}.md").write_text(f"other memory {i}\n" * 20)
        (m.root / "token.md").write_bytes(body)
        assert m.lock().returncode == 0
        with Vault.open(m.vault, PASSPHRASE, readonly=True) as v:
            rid = v.record_id("token.md")
            with v._store.read() as txn:
                value = bytes(txn.get(rid, db="records"))
                wrapped = bytes(txn.get(rid, db="keys"))
        assert value[12:60] in m.vault.read_bytes()
        assert m.unlock().returncode == 0
        os.unlink(m.root / "token.md")
        assert "token.md" not in os.listdir(m.root)
        assert not (m.root / "token.md").exists()
        assert m.lock().returncode == 0
    data = m.vault.read_bytes()
    for secret in (value, wrapped):
        for i in range(len(secret) - 15):
            assert secret[i : i + 16] not in data, "a shredded byte survived"


SKIP_DIRS = {".venv", ".git", "site-packages", "node_modules", "__pycache__"}


def _scan(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath, name)
            try:
                if path.is_symlink() or path.stat().st_size > 64 << 20:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            hits += [f"{path}: {n[:12]!r}" for n in needles if n in data]
    return hits


def test_no_marker_outside_the_mount(tmp_path):
    marker = secrets.token_hex(16)
    name_marker = secrets.token_hex(8)
    with mounted(tmp_path) as m:
        d = m.root / f"dir-{name_marker}"
        d.mkdir()
        for i in range(10):
            (d / f"file-{name_marker}-{i}.md").write_text(f"# {marker}\nbody {i} {marker}\n")
        with open(d / f"file-{name_marker}-0.md", "a") as f:
            f.write(f"appended {marker}\n")
        os.rename(d / f"file-{name_marker}-1.md", d / f"moved-{name_marker}.md")
        os.unlink(d / f"file-{name_marker}-2.md")
        assert marker in (d / f"moved-{name_marker}.md").read_text()
        runtime = Path(m.env["XDG_RUNTIME_DIR"])
    needles = [form for n in (marker.encode(), name_marker.encode()) for form in encodings(n)]
    places = [m.vault.parent, m.root.parent, runtime, Path("/tmp"), Path("/dev/shm")]
    hits = [hit for place in places for hit in _scan(place, needles)]
    assert hits == []


def test_harden_process_makes_the_process_non_dumpable():
    from memvault.hardening import harden_process

    pid = os.fork()
    if pid == 0:  # check in a child: the test process itself stays as it was
        libc = ctypes.CDLL(None)
        before = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
        harden_process()
        after = libc.prctl(3, 0, 0, 0, 0)
        os._exit(0 if (before, after) == (1, 0) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_daemon_is_hardened_and_logs_no_content(tmp_path):
    marker = secrets.token_hex(12)
    with mounted(tmp_path) as m:
        (m.root / f"{marker}.md").write_text(marker)
        assert not (m.root / f"{marker}-missing").exists()
        pid = m.daemon_pid()
        limits = Path(f"/proc/{pid}/limits").read_text()
        core = next(x for x in limits.splitlines() if x.startswith("Max core file size"))
        assert core.split()[4:6] == ["0", "0"], core
    logs = list(Path(m.env["XDG_RUNTIME_DIR"], "memvault").glob("*.log"))
    assert logs and any(log.read_text() for log in logs), "the daemon keeps a log"
    for log in logs:
        assert marker not in log.read_text()
