"""Issue 16, point 6: team spaces. shared/NAME/ syncs with other people's vaults
through a remote of its own, under a key of its own; personal memories never go
there, and the personal group never carries shared/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memvault.sync.state import load
from tests.conftest import assert_nowhere, assert_one_line_error, reopen, run_cli

from .servers import SERVERS, servers_unavailable
from .test_issue16_sync import _every_readable_version
from .test_sync_cli import FAST, GROUP_PASS

pytestmark = pytest.mark.skipif(
    servers_unavailable() is not None, reason=str(servers_unavailable())
)


def _vault(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name / "memory.vault"
    path.parent.mkdir()
    assert run_cli("init", *FAST, vault=path).returncode == 0
    return path


def test_a_team_space_carries_only_its_directory(tmp_path):
    alice, bob = _vault(tmp_path, "alice"), _vault(tmp_path, "bob")
    (tmp_path / "personal").mkdir()
    (tmp_path / "team").mkdir()
    with (
        SERVERS["webdav"](tmp_path / "personal") as personal,
        SERVERS["sftp"](tmp_path / "team") as team,
    ):
        p_cfg = ["--rclone-config", str(personal.config)]
        t_cfg = ["--rclone-config", str(team.config)]
        assert run_cli("put", "diary.md", vault=alice, input=b"PERSONAL-SECRET\n").returncode == 0
        started = run_cli(
            "sync", "init", personal.remote, *p_cfg, *FAST, vault=alice, env=GROUP_PASS
        )
        assert started.returncode == 0, started.stderr

        created = run_cli(
            "share", "create", "acme", team.remote, "--name", "alice", *t_cfg, vault=alice
        )
        assert created.returncode == 0, created.stderr
        code = created.stdout.decode().strip()
        assert code.startswith("mvshare-") and b"shown this once" in created.stderr
        decision = b"we use postgres (TEAM-DECISION)\n"
        put = run_cli("put", "shared/acme/decisions.md", vault=alice, input=decision)
        assert put.returncode == 0
        assert run_cli("sync", vault=alice).returncode == 0

        wrong = run_cli(
            "share", "join", "acme", team.remote, *t_cfg, vault=bob,
            env={"MEMVAULT_SHARE_CODE": "mvshare-not-the-code"},
        )  # fmt: skip
        assert wrong.returncode == 4
        assert_one_line_error(wrong)
        joined = run_cli(
            "share", "join", "acme", team.remote, "--name", "bob", *t_cfg, vault=bob,
            env={"MEMVAULT_SHARE_CODE": code},
        )  # fmt: skip
        assert joined.returncode == 0, joined.stderr
        assert run_cli("get", "shared/acme/decisions.md", vault=bob).stdout == decision
        assert run_cli("get", "diary.md", vault=bob).returncode != 0  # personal stays personal

        edited = b"we use postgres 16 (TEAM-DECISION, bob)\n"
        assert run_cli("put", "shared/acme/decisions.md", vault=bob, input=edited).returncode == 0
        assert run_cli("put", "shared/acme/oncall.md", vault=bob, input=b"bob\n").returncode == 0
        assert run_cli("put", "bob-private.md", vault=bob, input=b"BOB-PRIVATE\n").returncode == 0
        assert run_cli("sync", vault=bob).returncode == 0
        synced = run_cli("sync", vault=alice)
        assert synced.returncode == 0, synced.stderr
        assert b"personal: Synced" in synced.stderr and b"shared/acme: Synced" in synced.stderr
        assert run_cli("get", "shared/acme/decisions.md", vault=alice).stdout == edited
        assert run_cli("get", "shared/acme/oncall.md", vault=alice).stdout == b"bob\n"
        assert run_cli("get", "bob-private.md", vault=alice).returncode != 0

        status = json.loads(run_cli("sync", "status", "--json", vault=alice).stdout)
        assert status["remote"] == personal.remote and status["pending"] == 0
        (space,) = status["shares"]
        assert space["share"] == "acme" and {d["name"] for d in space["devices"]} == {
            "alice",
            "bob",
        }
        listed = json.loads(run_cli("share", "list", "--json", vault=alice).stdout)
        assert listed == [{"name": "acme", "remote": team.remote, "device": "alice"}]

        # the team remote: no personal memory, no path, no space name, nothing readable
        assert_nowhere(
            [b"PERSONAL-SECRET", b"diary", b"BOB-PRIVATE", b"acme", b"postgres"], team.root
        )
        with reopen(alice) as vault:
            team_state, personal_state = load(vault, "acme"), load(vault)
        team_paths = {path for path, _ in _every_readable_version(team.root, team_state)}
        assert team_paths == {"decisions.md", "oncall.md"}
        # the personal remote never carries shared/
        personal_paths = {p for p, _ in _every_readable_version(personal.root, personal_state)}
        assert personal_paths == {"diary.md"}
        assert_nowhere([b"postgres", b"oncall"], personal.root)

        again = run_cli(
            "share",
            "join",
            "acme",
            team.remote,
            *t_cfg,
            vault=alice,
            env={"MEMVAULT_SHARE_CODE": code},
        )
        assert again.returncode != 0
        assert_one_line_error(again)
        bad = run_cli("share", "create", "../x", team.remote, vault=alice)
        assert bad.returncode == 2 and "one plain name" in assert_one_line_error(bad)


def test_a_team_space_in_the_mount(tmp_path):
    from ..fsutil import mounted

    bob = _vault(tmp_path, "bob")
    (tmp_path / "alice").mkdir()
    with SERVERS["webdav"](tmp_path) as team, mounted(tmp_path / "alice") as alice:
        t_cfg = ["--rclone-config", str(team.config)]
        created = alice.cli("share", "create", "acme", team.remote, *t_cfg)  # while mounted
        assert created.returncode == 0, created.stderr
        code = created.stdout.decode().strip()
        assert (alice.root / "shared" / "acme").is_dir()
        (alice.root / "shared" / "acme" / "from-alice.md").write_bytes(b"hello team\n")
        (alice.root / "mine.md").write_bytes(b"ALICE-ONLY\n")
        alice.env["MEMVAULT_SHARE_CODE"] = code
        nothing = alice.cli("share", "join", "other", team.remote + "-elsewhere", *t_cfg)
        assert nothing.returncode == 3 and "no sync group" in assert_one_line_error(nothing).lower()
        assert alice.cli("sync").returncode == 0
        joined = run_cli(
            "share", "join", "acme", team.remote, *t_cfg, vault=bob,
            env={"MEMVAULT_SHARE_CODE": code},
        )  # fmt: skip
        assert joined.returncode == 0, joined.stderr
        assert run_cli("get", "shared/acme/from-alice.md", vault=bob).stdout == b"hello team\n"
        put = run_cli("put", "shared/acme/from-bob.md", vault=bob, input=b"hi alice\n")
        assert put.returncode == 0
        assert run_cli("sync", vault=bob).returncode == 0
        assert alice.cli("sync").returncode == 0
        assert (alice.root / "shared" / "acme" / "from-bob.md").read_bytes() == b"hi alice\n"
        assert_nowhere([b"ALICE-ONLY", b"mine.md"], team.root)


def test_removing_a_member_changes_the_space_key(tmp_path):
    alice, bob, carol = (_vault(tmp_path, n) for n in ("alice", "bob", "carol"))
    with SERVERS["sftp"](tmp_path) as team:
        t_cfg = ["--rclone-config", str(team.config)]
        created = run_cli(
            "share", "create", "acme", team.remote, "--name", "alice", *t_cfg, vault=alice
        )
        code = created.stdout.decode().strip()
        for who, vault in (("bob", bob), ("carol", carol)):
            joined = run_cli(
                "share", "join", "acme", team.remote, "--name", who, *t_cfg, vault=vault,
                env={"MEMVAULT_SHARE_CODE": code},
            )  # fmt: skip
            assert joined.returncode == 0, joined.stderr
        nobody = run_cli("share", "remove-member", "acme", "dave", vault=alice)
        assert nobody.returncode == 2 and "bob" in assert_one_line_error(nobody)
        removed = run_cli("share", "remove-member", "acme", "bob", vault=alice)
        assert removed.returncode == 0, removed.stderr
        new_code = removed.stdout.decode().strip()
        assert new_code.startswith("mvshare-") and new_code != code
        put = run_cli("put", "shared/acme/plans.md", vault=alice, input=b"AFTER-BOB-LEFT\n")
        assert put.returncode == 0
        assert run_cli("sync", vault=alice).returncode == 0
        assert run_cli("sync", vault=carol).returncode == 0
        assert run_cli("get", "shared/acme/plans.md", vault=carol).stdout == b"AFTER-BOB-LEFT\n"
        refused = run_cli("sync", vault=bob)
        assert refused.returncode == 1 and "removed" in assert_one_line_error(refused)
        assert run_cli("get", "shared/acme/plans.md", vault=bob).returncode != 0
        dave = _vault(tmp_path, "dave")
        old = run_cli(
            "share",
            "join",
            "acme",
            team.remote,
            *t_cfg,
            vault=dave,
            env={"MEMVAULT_SHARE_CODE": code},
        )
        assert old.returncode == 4
        new = run_cli(
            "share",
            "join",
            "acme",
            team.remote,
            *t_cfg,
            vault=dave,
            env={"MEMVAULT_SHARE_CODE": new_code},
        )
        assert new.returncode == 0, new.stderr
        assert run_cli("get", "shared/acme/plans.md", vault=dave).stdout == b"AFTER-BOB-LEFT\n"


def test_removing_a_device_of_the_personal_group(tmp_path):
    laptop, lost = _vault(tmp_path, "laptop"), _vault(tmp_path, "lost")
    with SERVERS["sftp"](tmp_path) as server:
        cfg = ["--rclone-config", str(server.config)]
        assert (
            run_cli(
                "sync",
                "init",
                server.remote,
                "--name",
                "laptop",
                *cfg,
                *FAST,
                vault=laptop,
                env=GROUP_PASS,
            ).returncode
            == 0
        )
        assert (
            run_cli(
                "sync",
                "join",
                server.remote,
                "--name",
                "lost",
                *cfg,
                *FAST,
                vault=lost,
                env=GROUP_PASS,
            ).returncode
            == 0
        )
        usage = run_cli("sync", "devices", "drop", "lost", vault=laptop)
        assert usage.returncode == 2
        new_pass = {"MEMVAULT_SYNC_PASSPHRASE": "the passphrase after the loss"}
        removed = run_cli("sync", "devices", "remove", "lost", *FAST, vault=laptop, env=new_pass)
        assert removed.returncode == 0, removed.stderr
        assert b"Removed 'lost'" in removed.stderr
        assert run_cli("put", "later.md", vault=laptop, input=b"LATER\n").returncode == 0
        assert run_cli("sync", vault=laptop).returncode == 0
        refused = run_cli("sync", vault=lost)
        assert refused.returncode == 1 and "removed" in assert_one_line_error(refused)
        status = json.loads(run_cli("sync", "status", "--json", vault=laptop).stdout)
        assert {d["name"]: d["removed"] for d in status["devices"]} == {
            "laptop": False,
            "lost": True,
        }
