"""Real storage servers on 127.0.0.1 for the sync tests, each stopped on exit:
OpenSSH's sshd (SFTP) with its own host key and an authorized key, and
`rclone serve webdav`; plus the rclone configuration file that names them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def servers_unavailable() -> str | None:
    missing = [name for name in ("rclone", "ssh-keygen") if shutil.which(name) is None]
    if not os.path.exists(SSHD):
        missing.append("sshd")
    if missing:
        return f"sync servers need {', '.join(missing)} (scripts/setup installs them)"
    return None


@dataclass
class Server:
    """A running server: the directory it serves, the rclone remote naming it."""

    kind: str
    root: Path  # what the server stores, on this machine
    remote: str  # REMOTE:PATH for rclone
    config: Path  # the rclone configuration file
    proc: subprocess.Popen
    restart_cmd: list[str]
    port: int

    def stop(self) -> None:
        stop(self.proc)

    def start_again(self) -> None:
        self.proc = subprocess.Popen(
            self.restart_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port, self.proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def webdav(tmp: Path) -> Iterator[Server]:
    """``rclone serve webdav`` of a directory, with a user and password."""
    root = tmp / "webdav-root"
    root.mkdir()
    port = free_port()
    cmd = [
        "rclone", "serve", "webdav", str(root), "--addr", f"127.0.0.1:{port}",
        "--user", "memvault", "--pass", "s3cret", "--log-level", "ERROR",
        "--dir-cache-time", "0s",  # the tests change the directory behind its back
    ]  # fmt: skip
    obscured = subprocess.run(
        ["rclone", "obscure", "s3cret"], capture_output=True, check=True, text=True
    ).stdout.strip()
    config = tmp / "rclone.conf"
    config.write_text(
        f"[dav]\ntype = webdav\nurl = http://127.0.0.1:{port}\nvendor = other\n"
        f"user = memvault\npass = {obscured}\n"
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server("webdav", root / "group", "dav:group", config, proc, cmd, port)
    try:
        wait_for_port(port, proc)
        yield server
    finally:
        server.stop()


@contextmanager
def sftp(tmp: Path) -> Iterator[Server]:
    """OpenSSH's sshd on 127.0.0.1 with a host key and one authorized client key."""
    home = tmp / "sshd"
    home.mkdir()
    for name in ("host", "client"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / name)], check=True
        )
    (home / "authorized_keys").write_bytes((home / "client.pub").read_bytes())
    os.chmod(home / "authorized_keys", 0o600)
    port = free_port()
    (home / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {home / 'host'}\n"
        f"AuthorizedKeysFile {home / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        f"PidFile {home / 'sshd.pid'}\nSubsystem sftp internal-sftp\n"
        "PermitRootLogin prohibit-password\nMaxStartups 100\n"
    )
    host_key = (home / "host.pub").read_text().split()[:2]
    (home / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
    root = tmp / "sftp-root"
    root.mkdir()
    config = tmp / "rclone.conf"
    config.write_text(
        f"[ssh]\ntype = sftp\nhost = 127.0.0.1\nport = {port}\nuser = root\n"
        f"key_file = {home / 'client'}\nknown_hosts_file = {home / 'known_hosts'}\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    cmd = [SSHD, "-D", "-e", "-f", str(home / "sshd_config")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server("sftp", root / "group", f"ssh:{root / 'group'}", config, proc, cmd, port)
    try:
        wait_for_port(port, proc)
        yield server
    finally:
        server.stop()


SERVERS = {"webdav": webdav, "sftp": sftp}
