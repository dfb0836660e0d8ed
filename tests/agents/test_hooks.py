"""Session hooks and `memvault context`, run the way the agents run them:
a command with the hook's JSON on stdin (recorded examples below)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import KDF_ARGS, assert_one_line_error
from ..fsutil import Mount, make_env, mounted

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRANSCRIPT = DATA / "claude/real/spotter/short.jsonl"
THREAD = "d1d1d1d1-1111-4111-8111-111111111111"
ROLLOUT = (
    DATA
    / f"codex/synthetic/potsherd/sessions/2099/01/02/rollout-2099-01-02T08-30-00-{THREAD}.jsonl"
)


def session_start(cwd: Path) -> dict:
    """Claude Code's SessionStart input (https://code.claude.com/docs/en/hooks)."""
    return {
        "session_id": "0f6b4c1e-8d0a-4f5e-9a39-6f1b2f6c2d11",
        "transcript_path": str(cwd / "session.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }


def session_end(cwd: Path, transcript: Path) -> dict:
    return {
        "session_id": "ae4a77f8-aedd-4bc1-888f-c94edc91af04",
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }


def hook(env: dict, event: str, payload: dict | None) -> subprocess.CompletedProcess:
    stdin = json.dumps(payload).encode() if payload is not None else b""
    return subprocess.run(
        [sys.executable, "-m", "memvault.agents.hook", "claude", event],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
    )


CURSOR_PROJECT = (
    DATA / "cursor/agent-transcripts/synthetic-potsherd/projects/Users-example-demo-app"
)


def cursor_stop(tmp_path: Path) -> dict:
    """Cursor's `stop` hook input (common fields, then the event's own)."""
    return {
        "hook_event_name": "stop",
        "conversation_id": "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
        "generation_id": "gen-1",
        "workspace_roots": [str(tmp_path)],
        "status": "completed",
        "loop_count": 0,
    }


def test_on_a_locked_vault_hooks_say_nothing_and_succeed(tmp_path):
    env = make_env(tmp_path)
    for event, payload in [
        ("session-start", session_start(tmp_path)),
        ("session-end", session_end(tmp_path, TRANSCRIPT)),
        ("session-start", None),  # no vault, no input: still nothing
    ]:
        done = hook(env, event, payload)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), done
    done = subprocess.run(
        [sys.executable, "-m", "memvault.agents.hook", "cursor", "stop"],
        input=json.dumps(cursor_stop(tmp_path)).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b""), done
    mount = Mount(tmp_path / "mnt", Path(env["MEMVAULT_VAULT"]), env)
    assert mount.cli("init", *KDF_ARGS).returncode == 0
    assert hook(env, "session-start", session_start(tmp_path)).stdout == b""
    line = assert_one_line_error(mount.cli("context"))
    assert "not unlocked" in line and "memvault unlock" in line


@pytest.mark.model
def test_a_hook_whose_stdin_never_closes_still_returns(tmp_path):
    """Some hosts keep the pipe open: the hook reads one JSON object and goes on."""
    with mounted(tmp_path) as m:
        project = tmp_path / "api"
        project.mkdir()
        proc = subprocess.Popen(
            [sys.executable, "-m", "memvault.agents.hook", "claude", "session-start"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=m.env,
        )
        try:
            proc.stdin.write(json.dumps(session_start(project)).encode())
            proc.stdin.flush()
            assert proc.wait(timeout=60) == 0
            assert b"# Memory (memvault)" in proc.stdout.read()
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.model
def test_session_start_gives_context_and_session_end_imports_the_session(tmp_path):
    with mounted(tmp_path) as m:
        project = tmp_path / "api"
        project.mkdir()
        (m.root / "projects" / "api").mkdir(parents=True)
        (m.root / "projects" / "api" / "decisions.md").write_text(
            "# Decisions\n\nWe deploy the api with `make release`, never by hand.\n"
        )
        (m.root / "notes.md").write_text("# Notes\nThe api gateway times out after 30 s.\n")
        (m.root / "unrelated.md").write_text("# Garden\nTomatoes need sun.\n")

        started = hook(m.env, "session-start", session_start(project))
        assert started.returncode == 0 and started.stderr == b"", started.stderr
        text = started.stdout.decode()
        assert text.startswith("# Memory (memvault)") and len(started.stdout) <= 2048
        assert f"{m.root}/projects/api/decisions.md" in text and "make release" in text
        assert f"{m.root}/notes.md" in text, "found by the project's name"
        assert "Tomatoes" not in text

        small = m.cli("context", "--project", str(project), "--budget", "300")
        assert small.returncode == 0 and 0 < len(small.stdout) <= 300, small.stdout

        transcript = tmp_path / "session.jsonl"
        shutil.copy(TRANSCRIPT, transcript)
        ended = hook(m.env, "session-end", session_end(project, transcript))
        assert (ended.returncode, ended.stdout, ended.stderr) == (0, b"", b"")
        wait_for_import(m, "phx.server doesnt seem to start", "sessions/claude/")


def wait_for_import(m, query: str, prefix: str) -> None:
    """Until a search finds a memory under ``prefix`` (a detached process imports it)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = m.cli("search", "--json", query, "-k", "3")
        paths = [r["path"] for r in json.loads(found.stdout)["results"]]
        if any(p.startswith(prefix) for p in paths):
            return
        time.sleep(1)
    pytest.fail(f"the session was not imported: {paths}")


@pytest.mark.model
def test_codex_notify_after_a_turn_imports_its_thread(tmp_path):
    """Codex calls its `notify` program with the turn's JSON as the last argument."""
    with mounted(tmp_path) as m:
        home = tmp_path / "home"
        sessions = home / ".codex" / "sessions" / "2099" / "01" / "02"
        sessions.mkdir(parents=True)
        shutil.copy(ROLLOUT, sessions / ROLLOUT.name)
        turn = {
            "type": "agent-turn-complete",
            "thread-id": THREAD,
            "turn-id": "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaa1",
            "cwd": "/tmp/potsherd-codex-demo",
            "input-messages": ["add a changelog entry for the widget pipeline"],
            "last-assistant-message": "Added CHANGELOG.md with the widget pipeline entry.",
        }
        done = subprocess.run(
            [sys.executable, "-m", "memvault.agents.hook", "codex", "notify", json.dumps(turn)],
            capture_output=True,
            env={**m.env, "HOME": str(home)},
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
        wait_for_import(m, "changelog entry for the widget pipeline", "sessions/codex/")


@pytest.mark.model
def test_cursor_stop_imports_its_sessions(tmp_path):
    with mounted(tmp_path) as m:
        home = tmp_path / "home"
        shutil.copytree(CURSOR_PROJECT, home / ".cursor" / "projects" / CURSOR_PROJECT.name)
        done = subprocess.run(
            [sys.executable, "-m", "memvault.agents.hook", "cursor", "stop"],
            input=json.dumps(cursor_stop(tmp_path)).encode(),
            capture_output=True,
            env={**m.env, "HOME": str(home)},
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")
        wait_for_import(m, "every test that touches the router", "sessions/cursor/")
