"""Agents' session hooks: `python -m memvault.agents.hook AGENT EVENT [--vault PATH]`.

A hook must never slow down or fail an agent's session. So: on a locked
vault (or no vault) it prints nothing and exits 0 after importing almost
nothing; it reads the hook's JSON from stdin with a timeout (some hosts
never close it); every failure is logged to stderr in one line and still
exits 0. Events:

- ``session-start``: prints the context block (`memvault context`) for the
  session's working directory; the host adds it to the agent's context.
- ``session-end``: imports the finished session from the transcript path
  the host gives, in a detached process (the host does not wait for it).
- ``notify`` (Codex's `notify` program, called after each turn with its JSON
  as the last argument): imports that thread's rollout file the same way.
- ``stop`` (Cursor, when its agent loop ends): imports Cursor's histories
  from their usual places (an import skips what it has already), and answers
  Cursor with an empty JSON object, as it expects, locked or not.
"""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path

from ..locations import VAULT_ENV_VAR, chosen_vault, record_path

STDIN_WAIT_S = 1.0
TRANSCRIPT_AGENTS = {"claude", "codex"}
"""Agents whose session files `memvault ingest AGENT --source FILE` reads."""


def read_payload(stream=sys.stdin) -> dict:
    """The hook's JSON object ({} if none came within STDIN_WAIT_S)."""
    try:
        ready, _, _ = select.select([stream], [], [], STDIN_WAIT_S)
    except (OSError, ValueError):  # no usable stdin
        return {}
    if not ready:
        return {}
    chunks = []
    while True:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        chunks.append(chunk)
        try:
            value = json.loads(b"".join(chunks))
        except ValueError:
            if not select.select([stream], [], [], STDIN_WAIT_S)[0]:
                break
            continue
        return value if isinstance(value, dict) else {}
    return {}


def session_start(record, payload: dict) -> None:
    from ..mounted import MountedVault  # only now: the vault is unlocked
    from .context import build

    project = Path(payload.get("cwd") or os.getcwd())
    with MountedVault(record) as mounted:
        sys.stdout.write(build(mounted, project))


def codex_rollout(payload: dict) -> Path | None:
    """The rollout file of the thread a Codex notification names."""
    thread = str(payload.get("thread-id") or "")
    if payload.get("type") != "agent-turn-complete" or not thread.replace("-", "").isalnum():
        return None
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    found = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread}.jsonl"))
    return found[-1] if found else None


def session_end(vault: Path, agent: str, transcript: str | None) -> None:
    """Import one session file (the transcript a host names, or Codex's rollout)."""
    if transcript and agent in TRANSCRIPT_AGENTS and Path(transcript).is_file():
        _import_detached(vault, [agent, "--source", transcript])


def _import_detached(vault: Path, what: list[str]) -> None:
    """`memvault ingest WHAT...` in a process of its own: the host does not wait."""
    import subprocess

    subprocess.Popen(
        [sys.executable, "-m", "memvault", "ingest", *what],
        env={**os.environ, VAULT_ENV_VAR: str(vault)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives the hook; never asks for a passphrase
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["cursor"]:
        print("{}", flush=True)  # Cursor reads a JSON answer from every hook
    try:
        agent, event, *rest = argv
        given = rest[1] if rest[:1] == ["--vault"] and len(rest) > 1 else None
        vault = chosen_vault(given)
        if not record_path(vault).exists():
            return 0  # locked: nothing to add, nothing to store (and nothing imported)
        from ..fs.runtime import MountRecord

        record = MountRecord.load(vault)
        if record is None or not record.alive:
            return 0  # its daemon was killed: locked too
        if event == "notify":  # the JSON is the last argument, stdin is not used
            payload = json.loads(rest[-1]) if rest and rest[-1].startswith("{") else {}
            rollout = codex_rollout(payload)
            session_end(vault, agent, str(rollout) if rollout else None)
        elif event == "session-start":
            session_start(record, read_payload())
        elif event == "session-end":
            session_end(vault, agent, read_payload().get("transcript_path"))
        elif event == "stop" and agent == "cursor":
            read_payload()  # which conversation does not matter: the import skips what it has
            _import_detached(vault, ["cursor"])
        else:
            print(f"memvault hook: unknown event {event!r}; nothing done.", file=sys.stderr)
    except Exception as exc:  # never fail the agent's session
        print(f"memvault hook: skipped ({type(exc).__name__}: {exc}).", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
