"""`memvault sync` as a user runs it: the real command, a real SFTP server (sshd)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

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
            refused = m.cli("sync", "join", server.remote, *cfg)
            assert refused.returncode != 0 and "lock it" in assert_one_line_error(refused)
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
