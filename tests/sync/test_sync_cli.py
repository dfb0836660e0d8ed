"""`memvault sync` as a user runs it: the real command, a real SFTP server (sshd)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import PASSPHRASE, assert_one_line_error, run_cli

from .devices import SYNC_PASSPHRASE, Device
from .servers import SERVERS, servers_unavailable

pytestmark = pytest.mark.skipif(
    servers_unavailable() is not None, reason=str(servers_unavailable())
)

FAST = ["--kdf-time", "1", "--kdf-memory", "8", "--kdf-parallelism", "1"]
GROUP_PASS = {"MEMVAULT_SYNC_PASSPHRASE": SYNC_PASSPHRASE.decode()}


def test_init_join_sync_and_status_from_the_command_line(tmp_path):
    a, b = tmp_path / "a" / "memory.vault", tmp_path / "b" / "memory.vault"
    a.parent.mkdir()
    b.parent.mkdir()
    assert run_cli("init", *FAST, vault=a).returncode == 0
    assert run_cli("put", "plans/q3.md", vault=a, input=b"ship the sync\n").returncode == 0

    not_yet = run_cli("sync", vault=a)
    assert not_yet.returncode == 3
    assert "sync init" in assert_one_line_error(not_yet)

    with SERVERS["sftp"](tmp_path) as server:
        cfg = ["--rclone-config", str(server.config)]
        started = run_cli(
            "sync", "init", server.remote, "--name", "laptop", *cfg, *FAST, vault=a, env=GROUP_PASS
        )
        assert started.returncode == 0, started.stderr
        assert b"Started a sync group" in started.stderr

        again = run_cli("sync", "init", server.remote, *cfg, vault=b, env=GROUP_PASS)
        assert again.returncode == 3  # no vault at b yet: init needs one
        wrong = run_cli(
            "sync", "join", server.remote, *cfg, *FAST, vault=b,
            env={"MEMVAULT_SYNC_PASSPHRASE": "not it"},
        )  # fmt: skip
        assert wrong.returncode == 4
        assert_one_line_error(wrong)

        joined = run_cli(
            "sync", "join", server.remote, "--name", "desk", *cfg, *FAST, vault=b, env=GROUP_PASS
        )
        assert joined.returncode == 0, joined.stderr
        assert run_cli("get", "plans/q3.md", vault=b).stdout == b"ship the sync\n"

        assert run_cli("put", "from-desk.md", vault=b, input=b"hello\n").returncode == 0
        status = run_cli("sync", "status", "--json", vault=b)
        report = json.loads(status.stdout)
        assert report["pending"] == 1
        assert {d["name"] for d in report["devices"]} == {"laptop", "desk"}
        assert run_cli("sync", vault=b).returncode == 0
        assert run_cli("sync", vault=a).returncode == 0
        assert run_cli("get", "from-desk.md", vault=a).stdout == b"hello\n"
        text = run_cli("sync", "status", vault=a).stdout.decode()
        assert "desk: 1 change(s)" in text and "pending:   0" in text

        server.stop()
        down = run_cli("sync", vault=a, timeout=120)
        assert down.returncode == 1
        assert "could not be reached" in assert_one_line_error(down)


@pytest.fixture
def make_device(tmp_path):
    made: list[Device] = []

    def make(name: str, server) -> Device:
        made.append(Device(tmp_path, name, server))
        return made[-1]

    yield make
    for device in made:
        device.close()


def test_sync_through_the_daemon_of_a_mounted_vault(tmp_path, make_device):
    from ..fsutil import make_env, mounted

    base = tmp_path / "a"
    base.mkdir()
    env = {**make_env(base), **GROUP_PASS}
    vault = Path(env["MEMVAULT_VAULT"])
    with SERVERS["webdav"](tmp_path) as server:
        cfg = ["--rclone-config", str(server.config)]
        assert run_cli("init", *FAST, vault=vault, env=env).returncode == 0
        started = run_cli(
            "sync", "init", server.remote, "--name", "mounted", *cfg, *FAST, vault=vault, env=env
        )
        assert started.returncode == 0, started.stderr
        b = make_device("desk", server)
        b.join()
        with mounted(base, init=False) as m:
            m.env.update(GROUP_PASS)
            (m.root / "notes").mkdir()
            (m.root / "notes" / "from-mount.md").write_bytes(b"written through the mount\n")
            again = m.cli("sync", "join", server.remote, *cfg)  # through the daemon
            assert again.returncode != 0 and "already" in assert_one_line_error(again)
            done = m.cli("sync")
            assert done.returncode == 0, done.stderr
            assert b"sent 2 change(s)" in done.stderr  # the directory and the file
            b.sync()
            assert b.tree()["notes/from-mount.md"] == b"written through the mount\n"
            b.vault.put("notes/from-desk.md", b"arrives in the mount\n")
            b.sync()
            assert m.cli("sync").returncode == 0
            assert (m.root / "notes" / "from-desk.md").read_bytes() == b"arrives in the mount\n"
            status = json.loads(m.cli("sync", "status", "--json").stdout)
            assert status["pending"] == 0 and status["device"] == "mounted"


def _eventually(check, what: str, timeout: float = 90.0):
    """Wait for ``check()`` to be truthy (a deadline against hanging, not a timing claim)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def test_watching_mounts_show_each_others_changes_by_themselves(tmp_path):
    """Two mounted vaults with `sync --watch`: writes, edits of a file the other mount
    has cached, renames and removals arrive without anyone asking; watching
    survives a lock and unlock; --no-watch stops it."""
    from ..fsutil import mounted

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        SERVERS["sftp"](tmp_path) as server,
        mounted(tmp_path / "a") as a,
        mounted(tmp_path / "b") as b,
    ):
        cfg = ["--rclone-config", str(server.config)]
        for m in (a, b):
            m.env.update(GROUP_PASS)
        (a.root / "before.md").write_bytes(b"written before the group\n")
        started = a.cli("sync", "init", server.remote, "--name", "a", *cfg, *FAST)  # mounted
        assert started.returncode == 0, started.stderr
        joined = b.cli("sync", "join", server.remote, "--name", "b", *cfg, *FAST)
        assert joined.returncode == 0, joined.stderr
        assert (b.root / "before.md").read_bytes() == b"written before the group\n"
        for m in (a, b):
            watching = m.cli("sync", "--watch")
            assert watching.returncode == 0, watching.stderr
            assert b"syncs by itself" in watching.stderr

        (a.root / "plans").mkdir()
        (a.root / "plans" / "q3.md").write_bytes(b"first draft\n")
        _eventually(lambda: _read(b.root / "plans" / "q3.md") == b"first draft\n", "a -> b")
        assert (a.root / "plans" / "q3.md").read_bytes() == b"first draft\n"  # a caches it

        (b.root / "plans" / "q3.md").write_bytes(b"second draft, from b\n")
        _eventually(
            lambda: _read(a.root / "plans" / "q3.md") == b"second draft, from b\n",
            "an edit on b replaces what a's kernel had cached",
        )
        (a.root / "plans" / "q3.md").rename(a.root / "plans" / "q4.md")
        _eventually(lambda: _read(b.root / "plans" / "q4.md") is not None, "a rename")
        assert not (b.root / "plans" / "q3.md").exists()
        (b.root / "plans" / "q4.md").unlink()
        _eventually(lambda: not (a.root / "plans" / "q4.md").exists(), "a removal")

        b.lock()
        assert b.unlock().returncode == 0
        status = json.loads(b.cli("sync", "status", "--json").stdout)
        assert status["watching"] is True and status["last_error"] is None
        stopped = b.cli("sync", "--no-watch")
        assert stopped.returncode == 0 and b"no longer" in stopped.stderr
        assert json.loads(b.cli("sync", "status", "--json").stdout)["watching"] is False
        (a.root / "later.md").write_bytes(b"b no longer watches\n")
        time.sleep(6)  # a sends it (a still watches); b must not fetch it by itself
        assert not (b.root / "later.md").exists()
        assert b.cli("sync").returncode == 0
        assert (b.root / "later.md").read_bytes() == b"b no longer watches\n"


def test_watching_a_locked_vault_in_the_foreground(tmp_path, make_device):
    a_vault = tmp_path / "a" / "memory.vault"
    a_vault.parent.mkdir()
    with SERVERS["sftp"](tmp_path) as server:
        cfg = ["--rclone-config", str(server.config)]
        assert run_cli("init", *FAST, vault=a_vault).returncode == 0
        started = run_cli("sync", "init", server.remote, *cfg, *FAST, vault=a_vault, env=GROUP_PASS)
        assert started.returncode == 0, started.stderr
        b = make_device("desk", server)
        b.join()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
        env.update(MEMVAULT_VAULT=str(a_vault), MEMVAULT_PASSPHRASE=PASSPHRASE.decode())
        watcher = subprocess.Popen(
            [sys.executable, "-m", "memvault", "sync", "--watch"],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        said: list[bytes] = []
        reader = threading.Thread(target=lambda: said.extend(iter(watcher.stderr.readline, b"")))
        reader.start()
        try:
            _eventually(lambda: any(b"until interrupted" in line for line in said), "started")
            b.vault.put("from-desk.md", b"picked up by the watcher\n")
            b.sync()
            _eventually(lambda: any(b"received 1" in line for line in said), "received")
        finally:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(timeout=60)
            reader.join()
        assert watcher.returncode == 0, b"".join(said)
        assert run_cli("get", "from-desk.md", vault=a_vault).stdout == b"picked up by the watcher\n"
