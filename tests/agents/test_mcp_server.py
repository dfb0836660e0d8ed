"""`memvault serve`, driven by the official MCP SDK's stdio client, as a host
would: through a real mount, and on a locked vault."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ..conftest import KDF_ARGS
from ..fsutil import Mount, force_lock, make_env, mounted

pytestmark = pytest.mark.model  # search answers through the daemon's real index

TOOLS = {"search", "read", "write", "append", "list", "move", "forget", "recent"}


@asynccontextmanager
async def session(env: dict[str, str], errlog, *options: str):
    args = ["-m", "memvault", "serve", "--caller", "test", *options]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with stdio_client(params, errlog=errlog) as streams, ClientSession(*streams) as s:
        await s.initialize()
        yield s


def text_of(result) -> str:
    return " ".join(c.text for c in result.content if c.type == "text")


async def call(s: ClientSession, tool: str, **arguments):
    result = await s.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {text_of(result)}"
    return result.structured_content


async def refused(s: ClientSession, tool: str, **arguments) -> str:
    result = await s.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    message = text_of(result)
    assert "Traceback" not in message and "\n" not in message.strip(), message
    return message


def test_a_host_writes_searches_reads_and_forgets_through_the_mount(tmp_path):
    errlog = (tmp_path / "serve.err").open("w+")
    with mounted(tmp_path) as m:

        async def scenario() -> None:
            async with session(m.env, errlog) as s:
                listed = await s.list_tools()
                tools = {t.name: t for t in listed.tools}
                assert set(tools) == TOOLS
                assert "shred" in tools["forget"].description
                assert tools["search"].annotations.read_only_hint
                assert tools["forget"].annotations.destructive_hint

                text = "# Auth\nJWT signing keys rotate every thirty days.\nOld keys stay 24h.\n"
                done = await call(s, "write", path="proj/auth.md", content=text)
                assert done["detail"].startswith("created")
                assert (m.root / "proj" / "auth.md").read_text() == text
                assert (await call(s, "read", path="proj/auth.md"))["content"] == text
                middle = await call(s, "read", path="proj/auth.md", start_line=2, end_line=2)
                assert middle["content"] == "JWT signing keys rotate every thirty days.\n"
                assert middle["total_lines"] == 3
                absolute = await call(s, "read", path=str(m.root / "proj" / "auth.md"))
                assert absolute["path"] == "proj/auth.md"

                await call(s, "write", path="proj/notes.md", content="# Notes\nlunch at noon\n")
                found = await call(s, "search", query="token key rotation policy", k=3)
                first = found["results"][0]
                assert first["path"] == "proj/auth.md" and 0 < first["score"] <= 1
                assert "rotat" in first["words"]

                await call(s, "append", path="proj/auth.md", content="Revoked keys: see KMS.\n")
                assert (m.root / "proj" / "auth.md").read_text().endswith("see KMS.\n")
                names = [e["path"] for e in (await call(s, "list", directory="proj"))["entries"]]
                assert names == ["proj/auth.md", "proj/notes.md"]
                recent = await call(s, "recent", limit=5)
                assert recent["entries"][0]["path"] == "proj/auth.md"

                await call(s, "move", source="proj/auth.md", destination="proj/sec/auth.md")
                assert "No memory" in await refused(s, "read", path="proj/auth.md")
                gone = await call(s, "forget", path="proj/sec/auth.md")
                assert "crypto-shredded 1 record" in gone["detail"]
                again = await call(s, "search", query="JWT signing keys rotate", k=5)
                assert all("auth.md" not in r["path"] for r in again["results"])
                assert not (m.root / "proj" / "sec" / "auth.md").exists()

                assert "limit: input should be greater" in await refused(s, "recent", limit=0)
                assert "k: input should be less" in await refused(s, "search", query="x", k=500)
                assert "query: field required" in await refused(s, "search", k=3)
                bad_line = await refused(s, "read", path="proj/notes.md", start_line=0)
                assert "numbered from 1" in bad_line
                assert await refused(s, "write", path="search/x.md", content="reserved")
                assert await refused(s, "read", path="../etc/passwd")

        anyio.run(scenario)
    errlog.seek(0)
    assert "Traceback" not in errlog.read()


def test_a_locked_vault_answers_locked_and_the_server_stays_up(tmp_path):
    """No passphrase prompt (stdin is the protocol): unlocking later just works."""
    env = make_env(tmp_path)
    mount = Mount(tmp_path / "mnt", Path(env["MEMVAULT_VAULT"]), env)
    assert mount.cli("init", *KDF_ARGS).returncode == 0
    errlog = (tmp_path / "serve.err").open("w+")

    async def scenario() -> None:
        async with session(env, errlog) as s:
            for tool, arguments in [
                ("search", {"query": "anything"}),
                ("write", {"path": "a.md", "content": "x"}),
                ("recent", {}),
            ]:
                assert "the vault is locked" in (await refused(s, tool, **arguments)).lower()
            done = await anyio.to_thread.run_sync(mount.unlock)
            assert done.returncode == 0, done.stderr
            try:
                await call(s, "write", path="a.md", content="# A\nwritten once unlocked\n")
                assert (mount.root / "a.md").read_text().startswith("# A")
            finally:
                await anyio.to_thread.run_sync(force_lock, mount)
            assert "locked" in (await refused(s, "read", path="a.md")).lower()

    anyio.run(scenario)
    errlog.seek(0)
    assert "Traceback" not in errlog.read()


def test_stdout_carries_only_the_protocol(tmp_path):
    """Raw JSON-RPC over stdin, as any host sends it: every stdout line is a
    protocol message, errors are results with one sentence, and the end of
    input ends the server cleanly."""
    env = make_env(tmp_path)
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    requests = [
        ("initialize", hello),
        ("tools/list", {}),
        ("tools/call", {"name": "read", "arguments": {"path": "a.md"}}),
        ("tools/call", {"name": "read", "arguments": {"path": 5}}),
    ]
    server = subprocess.Popen(
        [sys.executable, "-m", "memvault", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    replies = {}
    try:
        for number, (method, params) in enumerate(requests, 1):
            request = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
            server.stdin.write(json.dumps(request).encode() + b"\n")
            server.stdin.flush()
            message = json.loads(server.stdout.readline())  # nothing else on stdout
            assert message["jsonrpc"] == "2.0" and message["id"] == number, message
            replies[number] = message
            if method == "initialize":
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                server.stdin.write(json.dumps(initialized).encode() + b"\n")
        server.stdin.close()
        assert server.wait(timeout=30) == 0
        assert server.stdout.read() == b""
        assert b"Traceback" not in server.stderr.read()
    finally:
        server.kill()
        server.wait()
    assert replies[1]["result"]["serverInfo"]["name"] == "memvault"
    assert {t["name"] for t in replies[2]["result"]["tools"]} == TOOLS
    locked, bad = replies[3]["result"], replies[4]["result"]
    assert locked["isError"] and "locked" in locked["content"][0]["text"]
    assert bad["isError"] and "path: input should be a valid string" in bad["content"][0]["text"]


def test_a_scoped_view_sees_only_its_subtree_and_a_read_only_one_cannot_write(tmp_path):
    errlog = (tmp_path / "serve.err").open("w+")
    with mounted(tmp_path) as m:
        (m.root / "projects" / "api").mkdir(parents=True)
        (m.root / "projects" / "api" / "deploy.md").write_text("# Deploy\nmake release ships it\n")
        (m.root / "secrets").mkdir()
        (m.root / "secrets" / "keys.md").write_text("# Keys\nthe zanzibar signing passphrase\n")
        secret = str(m.root / "secrets" / "keys.md")

        async def scenario() -> None:
            view = ("--subtree", "projects/api", "--read-only")
            async with session(m.env, errlog, *view) as s:
                names = {t.name for t in (await s.list_tools()).tools}
                assert names == {"search", "read", "list", "recent"}
                listed = await call(s, "list")
                assert [e["path"] for e in listed["entries"]] == ["deploy.md"]
                assert (await call(s, "read", path="deploy.md"))["path"] == "deploy.md"
                assert "outside this memory view" in await refused(s, "read", path=secret)
                assert "No memory" in await refused(s, "read", path="secrets/keys.md")
                assert await refused(s, "read", path="../../secrets/keys.md")
                assert await refused(s, "list", directory="..")
                hits = await call(s, "search", query="zanzibar signing passphrase", k=5)
                assert all("keys" not in r["path"] for r in hits["results"])
                found = await call(s, "search", query="make release", k=5)
                assert [r["path"] for r in found["results"]] == ["deploy.md"]
                recent = await call(s, "recent", limit=10)
                assert [e["path"] for e in recent["entries"]] == ["deploy.md"]
                result = await s.call_tool("write", {"path": "x.md", "content": "no"})
                assert result.is_error
            async with session(m.env, errlog, "--subtree", "projects/api") as s:
                done = await call(s, "write", path="notes.md", content="# Notes\nscoped\n")
                assert done["path"] == "notes.md"
                assert (m.root / "projects" / "api" / "notes.md").read_text() == "# Notes\nscoped\n"
                assert not (m.root / "notes.md").exists()

        anyio.run(scenario)
    errlog.seek(0)
    assert "Traceback" not in errlog.read()
