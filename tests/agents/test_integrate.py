"""`memvault integrate`: an agent's configuration gains the MCP server and the
instructions, keeps everything else, and --undo gives it back byte for byte.
The real agent CLIs (from npm, installed by scripts/setup) read the result."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ..fsutil import mounted

ROOT = Path(__file__).resolve().parents[2]
NPM_BIN = ROOT / ".npm-tools" / "node_modules" / ".bin"

CLAUDE_JSON = {
    "numStartups": 3,
    "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}},
    "projects": {"/src/api": {"allowedTools": ["Bash"]}},
}
CLAUDE_MD = "# My rules\n\nAlways run the tests.\n"
CLAUDE_SETTINGS = {
    "model": "opus",
    "hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo hello"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
    },
}
CODEX_TOML = """# my Codex settings
model = "o3"  # the big one

[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]
"""
CURSOR_JSON = {"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}}
CURSOR_HOOKS = {"version": 1, "hooks": {"afterFileEdit": [{"command": "prettier --write"}]}}


def memvault(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    full.update(HOME=str(home), XDG_RUNTIME_DIR=str(home / "run"), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args], capture_output=True, env=full, timeout=60
    )


def user_configs(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude.json").write_text(json.dumps(CLAUDE_JSON, indent=4))
    (home / ".claude" / "CLAUDE.md").write_text(CLAUDE_MD)
    (home / ".claude" / "settings.json").write_text(json.dumps(CLAUDE_SETTINGS, indent=2))
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_TOML)
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(json.dumps(CURSOR_JSON))
    (home / ".cursor" / "hooks.json").write_text(json.dumps(CURSOR_HOOKS))
    os.chmod(home / ".codex" / "config.toml", 0o640)


def snapshot(home: Path, only: tuple[str, ...] = ()) -> dict[str, tuple[bytes, int]]:
    """Every file under ``home`` (or the ``only`` ones that exist): content and mode."""
    paths = [home / name for name in only] if only else home.rglob("*")
    return {
        str(path.relative_to(home)): (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
        for path in paths
        if path.is_file() and path.relative_to(home).parts[0] != "run"
    }


def test_integrate_keeps_the_users_settings_and_undo_restores_them(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    user_configs(home)
    before = snapshot(home)

    preview = memvault(home, "integrate", "claude", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert b"+++ " + str(home / ".claude.json").encode() in preview.stdout
    assert b'"memvault"' in preview.stdout and b"memvault:begin" in preview.stdout
    settings = str(home / ".claude" / "settings.json").encode()
    assert preview.stdout.count(b"+++ " + settings) == 1, "one diff per file"
    assert b"session-start" in preview.stdout and b"session-end" in preview.stdout
    assert snapshot(home) == before, "--dry-run wrote something"

    for agent in ("claude", "codex", "cursor"):
        done = memvault(home, "integrate", agent)
        assert done.returncode == 0, done.stderr
    claude = json.loads((home / ".claude.json").read_text())
    assert claude["numStartups"] == 3 and claude["projects"] == CLAUDE_JSON["projects"]
    assert set(claude["mcpServers"]) == {"github", "memvault"}
    server = claude["mcpServers"]["memvault"]
    assert server["args"][-3:] == ["serve", "--caller", "claude"]
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus"
    assert settings["hooks"]["PreToolUse"] == CLAUDE_SETTINGS["hooks"]["PreToolUse"]
    start, end = settings["hooks"]["SessionStart"], settings["hooks"]["SessionEnd"]
    assert start[0] == CLAUDE_SETTINGS["hooks"]["SessionStart"][0] and len(start) == 2
    assert "memvault.agents.hook claude session-start" in start[1]["hooks"][0]["command"]
    assert "memvault.agents.hook claude session-end" in end[0]["hooks"][0]["command"]
    md = (home / ".claude" / "CLAUDE.md").read_text()
    assert md.startswith(CLAUDE_MD) and "search/<words>" in md
    toml = (home / ".codex" / "config.toml").read_text()
    first, table = CODEX_TOML.split("\n\n")
    assert toml.startswith(first) and table in toml, "comments and formatting kept"
    assert "[mcp_servers.memvault]" in toml
    assert tomllib.loads(toml)["notify"][-2:] == ["codex", "notify"]
    assert stat.S_IMODE((home / ".codex" / "config.toml").stat().st_mode) == 0o640
    assert (home / ".codex" / "AGENTS.md").read_text().count("memvault:begin") == 1
    cursor = json.loads((home / ".cursor" / "mcp.json").read_text())
    assert set(cursor["mcpServers"]) == {"linear", "memvault"}
    hooks = json.loads((home / ".cursor" / "hooks.json").read_text())
    assert hooks["version"] == 1 and hooks["hooks"]["afterFileEdit"] == [
        {"command": "prettier --write"}
    ]
    assert "memvault.agents.hook cursor stop" in hooks["hooks"]["stop"][0]["command"]
    backups = sorted(p.name for p in home.rglob("*.memvault-backup-*"))
    assert len(backups) == 6, backups  # the six files that existed; AGENTS.md is new
    backup = next(home.rglob("config.toml.memvault-backup-*"))
    assert backup.read_text() == CODEX_TOML and stat.S_IMODE(backup.stat().st_mode) == 0o640

    integrated = snapshot(home)
    again = memvault(home, "integrate", "claude")
    assert again.returncode == 0 and b"already integrated" in again.stderr
    assert snapshot(home) == integrated, "a second run changed something"
    listed = memvault(home, "integrate", "--list")
    assert listed.returncode == 0
    lines = listed.stdout.decode().splitlines()
    assert len(lines) == 9 and all(" yes " in line for line in lines), lines

    for agent in ("claude", "codex", "cursor"):
        undone = memvault(home, "integrate", agent, "--undo")
        assert undone.returncode == 0, undone.stderr
    after = snapshot(home)
    after.pop(".memvault/integrations.json")
    assert after == before, "--undo did not give the files back byte for byte"
    listed = memvault(home, "integrate", "--list")
    assert all(" no " in line for line in listed.stdout.decode().splitlines())


def test_undo_after_the_user_edited_the_file_removes_only_ours(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    user_configs(home)
    assert memvault(home, "integrate", "codex").returncode == 0
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text() + '\n[profiles.fast]\nmodel = "o4-mini"\n')
    undone = memvault(home, "integrate", "codex", "--undo")
    assert undone.returncode == 0, undone.stderr
    text = config.read_text()
    assert "memvault" not in text and "[profiles.fast]" in text and text.startswith(CODEX_TOML)
    assert "AGENTS.md" not in {p.name for p in (home / ".codex").iterdir()}


def test_a_broken_configuration_is_refused_untouched(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {,}')
    done = memvault(home, "integrate", "cursor")
    assert done.returncode == 2
    err = done.stderr.decode().strip()
    assert "not valid JSON" in err and "\n" not in err and "Traceback" not in err
    assert (home / ".cursor" / "mcp.json").read_text() == '{"mcpServers": {,}'


def agent_cli(name: str) -> str:
    path = NPM_BIN / name
    assert path.exists(), f"{path} is missing: run scripts/setup (it installs the agent CLIs)"
    return str(path)


@pytest.mark.model
def test_the_real_agent_clis_see_the_server_and_undo_restores_their_configs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    user_configs(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env["HOME"] = str(home)

    def run(*cmd: str) -> str:
        done = subprocess.run(cmd, capture_output=True, env=env, cwd=home, timeout=120)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout.decode(errors="replace")

    configs = (".claude.json", ".claude/CLAUDE.md", ".codex/config.toml", ".codex/AGENTS.md")
    run(agent_cli("claude"), "mcp", "list")  # its first run adds its own keys
    before = snapshot(home, configs)
    with mounted(tmp_path) as m:
        for agent in ("claude", "codex"):
            done = memvault(home, "integrate", agent, env={"MEMVAULT_VAULT": str(m.vault)})
            assert done.returncode == 0, done.stderr
        claude = run(agent_cli("claude"), "mcp", "list")
        line = next(line for line in claude.splitlines() if line.startswith("memvault:"))
        assert "Connected" in line, claude
        codex = run(agent_cli("codex"), "mcp", "list")
        assert any(line.split()[:1] == ["memvault"] for line in codex.splitlines()), codex
    for agent in ("claude", "codex"):
        assert memvault(home, "integrate", agent, "--undo").returncode == 0
    assert snapshot(home, configs) == before


def test_a_users_own_codex_notify_program_is_kept(tmp_path):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    mine = 'notify = ["notify-send", "Codex"]\n'
    (home / ".codex" / "config.toml").write_text(mine)
    assert memvault(home, "integrate", "codex").returncode == 0
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["notify"] == ["notify-send", "Codex"] and "memvault" in config["mcp_servers"]
    listed = memvault(home, "integrate", "codex", "--list").stdout.decode()
    assert any(" no " in line and "notify" in line for line in listed.splitlines()), listed
    assert memvault(home, "integrate", "codex", "--undo").returncode == 0
    assert (home / ".codex" / "config.toml").read_text() == mine
