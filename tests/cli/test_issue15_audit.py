"""Issue 15, the audit trail: every change, read and search, with the process,
the CLI command or the MCP agent behind it; sealed (a shredded memory's path
becomes unreadable), hash-chained (verify names the first broken link), and
bounded by a retention that leaves a verifiable checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import anyio

from memvault.vault import Vault, audit, writer

from ..conftest import FAST_KDF, PASSPHRASE, assert_nowhere, run_cli
from ..fsutil import mounted
from ..rawvault import raw
from .test_cli import init

PROCESS = textwrap.dedent(
    """
    import os, sys
    root = sys.argv[1]
    os.makedirs(os.path.join(root, "notes"), exist_ok=True)
    with open(os.path.join(root, "notes", "a.md"), "w") as f:
        f.write("written by a known process\\n")
    for _ in range(5):  # five reads within a minute: one event
        with open(os.path.join(root, "notes", "a.md")) as f:
            f.read()
    print(os.getpid(), flush=True)
    """
)


def events(run, *args: str) -> list[dict]:
    done = run("audit", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def test_each_event_names_the_process_the_cli_or_the_agent_behind_it(tmp_path):
    from ..agents.test_mcp_server import call, session

    errlog = (tmp_path / "serve.err").open("w+")
    with mounted(tmp_path) as m:
        done = subprocess.run(
            [sys.executable, "-c", PROCESS, str(m.root)], capture_output=True, check=True
        )
        pid = int(done.stdout)

        async def agent() -> None:
            async with session(m.env, errlog) as s:
                await call(s, "write", path="agent/x.md", content="from an agent\n")
                await call(s, "read", path="agent/x.md")

        anyio.run(agent)
        trail = events(m.cli)
        assert trail[0]["op"] == "unlock" and trail[0]["caller"]["kind"] == "cli"

        mine = [e for e in trail if e["caller"].get("pid") == pid]
        assert {e["op"] for e in mine} >= {"create", "read"}
        created = next(e for e in mine if e["path"] == "notes/a.md" and e["op"] == "create")
        caller = created["caller"]
        assert caller["kind"] == "fs" and caller["uid"] == os.getuid()
        assert caller["exe"] == os.path.realpath(sys.executable)
        assert caller["comm"] and caller["comm"] in os.path.basename(sys.executable)
        reads = [e for e in mine if e["op"] == "read" and e["path"] == "notes/a.md"]
        assert len(reads) == 1, "reads are aggregated per caller, memory and minute"

        by_agent = [e for e in trail if e["caller"].get("name") == "test"]
        assert by_agent and all(e["caller"]["kind"] == "mcp" for e in by_agent)
        assert {(e["op"], e["path"]) for e in by_agent} >= {  # stored atomically: renamed
            ("rename", "agent/x.md"),
            ("read", "agent/x.md"),
        }
        filtered = events(m.cli, "--caller", str(pid), "--path", "a.md")
        assert [(e["op"], e["path"]) for e in filtered] == [
            ("create", "notes/a.md"),
            ("read", "notes/a.md"),
        ]
        assert m.lock().returncode == 0

        put = m.cli("put", "cli.md", input=b"by the command line\n")  # locked: in process
        assert put.returncode == 0, put.stderr
        by_cli = [e for e in events(m.cli) if e["path"] == "cli.md"]
        assert [(e["op"], e["caller"]["kind"], e["caller"]["name"]) for e in by_cli] == [
            ("create", "cli", "put")
        ]
        trail = events(m.cli)
        assert trail[-1]["op"] == "create" and any(e["op"] == "lock" for e in trail)
        verified = m.cli("audit", "verify")
        assert verified.returncode == 0 and "holds" in verified.stderr.decode()


def test_a_shredded_memorys_entries_keep_no_path_and_no_byte_of_it(vault_path, machine_state):
    init(vault_path)
    name, content = b"clinic/diagnosis-zebra.md", b"the zebra diagnosis stays private\n"
    assert run_cli("put", name.decode(), vault=vault_path, input=content).returncode == 0
    assert run_cli("mv", name.decode(), "clinic/renamed-okapi.md", vault=vault_path).returncode == 0
    before = events(lambda *a: run_cli(*a, vault=vault_path))
    assert [e["op"] for e in before[-2:]] == ["create", "rename"]
    assert before[-1]["from"] == name.decode() and before[-1]["path"] == "clinic/renamed-okapi.md"

    assert run_cli("rm", "clinic/renamed-okapi.md", vault=vault_path).returncode == 0
    after = events(lambda *a: run_cli(*a, vault=vault_path))
    gone = [e for e in after if e["op"] in ("create", "rename", "shred") and e["shredded"]]
    assert [e["op"] for e in gone] == ["create", "rename", "shred"]
    assert all(e["path"] is None and "from" not in e for e in gone)
    shown = run_cli("audit", vault=vault_path).stdout.decode()
    assert "(a shredded memory)" in shown and "zebra" not in shown
    assert_nowhere([name, b"renamed-okapi", b"zebra diagnosis"], vault_path.parent, machine_state)


def trail_of(path, count: int) -> None:
    with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for i in range(count):
            vault.put(f"n{i}.md", f"note {i}\n".encode())


def verify(path) -> tuple[int, str]:
    done = run_cli("audit", "verify", vault=path)
    return done.returncode, done.stderr.decode().strip()


def test_verify_names_a_removed_reordered_altered_or_cut_entry(tmp_path):
    cases = {}
    for case in ("removed", "reordered", "altered", "cut"):
        path = tmp_path / case / "memory.vault"
        trail_of(path, 5)
        with raw(path, write=True) as (txn, dbs):
            entries = dict(txn.cursor(dbs["audit"]))
            keys = sorted(entries)
            assert len(keys) >= 5
            if case == "removed":
                txn.delete(keys[2], db=dbs["audit"])
            elif case == "reordered":
                txn.put(keys[1], entries[keys[2]], db=dbs["audit"])
                txn.put(keys[2], entries[keys[1]], db=dbs["audit"])
            elif case == "altered":
                value = bytearray(entries[keys[3]])
                value[len(value) // 2] ^= 0x10
                txn.put(keys[3], bytes(value), db=dbs["audit"])
            else:
                txn.delete(keys[-1], db=dbs["audit"])
        cases[case] = verify(path)
    assert cases["removed"][0] == 7 and "entry 3 is missing" in cases["removed"][1]
    assert cases["reordered"][0] == 7 and "entry 2 fails authentication" in cases["reordered"][1]
    assert cases["altered"][0] == 7 and "entry 4 fails authentication" in cases["altered"][1]
    assert cases["cut"][0] == 7 and "the last 1 entry is missing" in cases["cut"][1]
    check = run_cli("check", vault=tmp_path / "altered" / "memory.vault")
    assert check.returncode == 7 and b"the audit trail: entry 4" in check.stdout

    for case in ("altered", "removed", "cut"):  # repair starts the trail again after the break
        path = tmp_path / case / "memory.vault"
        repaired = run_cli("repair", vault=path)
        assert repaired.returncode == 0, repaired.stderr
        assert "up to its last broken link" in repaired.stderr.decode()
        code, said = verify(path)
        assert code == 0 and "older entries pruned" in said, said
        assert run_cli("check", vault=path).returncode == 0


def test_retention_prunes_old_entries_behind_a_checkpoint_verify_still_proves(
    vault_path, monkeypatch
):
    monkeypatch.setattr(audit, "clock", lambda: 1_600_000_000 * 10**9)  # September 2020
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for i in range(3):
            vault.put(f"old{i}.md", b"long ago\n")
        assert len(vault.audit_trail()) == 3
    monkeypatch.undo()
    with Vault.open(vault_path, PASSPHRASE, compact_delay=None) as vault:  # pruned at lock
        assert vault.audit_trail() == []
        vault.put("recent.md", b"today\n")
    with Vault.open(vault_path, PASSPHRASE, compact_delay=None) as vault:
        kept = vault.audit_trail()
        assert [e.path for e in kept] == ["recent.md"]
        problem, count, checkpoint = vault.audit_problem()
        assert problem == "" and count == 1 and checkpoint.pruned == 3
    code, said = verify(vault_path)
    assert code == 0 and "3 older entries pruned" in said

    pruned = run_cli("audit", "prune", "--keep-days", "30", vault=vault_path)
    assert pruned.returncode == 0 and "30 days" in pruned.stderr.decode()
    monkeypatch.setattr(writer, "MAX_ENTRIES", 2)  # and a size cap, whatever the age
    with Vault.open(vault_path, PASSPHRASE, compact_delay=None) as vault:
        for i in range(4):
            vault.put(f"more{i}.md", b"x\n")
    with Vault.open(vault_path, PASSPHRASE, compact_delay=None) as vault:
        problem, count, checkpoint = vault.audit_problem()
        assert problem == "" and count <= 2 and checkpoint.keep_days == 30
