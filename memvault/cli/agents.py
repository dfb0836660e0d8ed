"""Commands for agents: serve (the MCP server over stdio), integrate (wire an
agent to the vault, list, preview or undo it) and context (what a session
start tells the agent)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import paths
from ..errors import MemvaultError, NotUnlocked, UsageError
from ..mounted import MountedVault
from . import output
from .common import VAULT_ENV_VAR, daemon_of, default_mountpoint, vault_path


def cmd_serve(args: argparse.Namespace) -> int:
    from ..agents.server import build_server  # the MCP SDK loads only for this command

    try:
        subtree = paths.normalize(args.subtree or "", allow_root=True)
    except MemvaultError as exc:
        raise UsageError(f"--subtree: {exc}") from None
    server = build_server(
        vault_path(args), caller=args.caller, subtree=subtree, read_only=args.read_only
    )
    server.run("stdio")
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    from ..agents.context import build

    if args.budget < 256:
        raise UsageError("--budget must be at least 256 bytes.")
    record = daemon_of(args)
    if record is None:
        raise NotUnlocked(vault_path(args))
    project = Path(args.project or os.getcwd()).expanduser().absolute()
    with MountedVault(record) as mounted:
        output.data(build(mounted, project, args.budget))
    return 0


def cmd_integrate(args: argparse.Namespace) -> int:
    from ..agents import integrate

    if args.agent is None and not args.list:
        raise UsageError(f"Name an agent ({', '.join(integrate.AGENTS)}), or give --list.")
    home = Path.home()
    chosen = getattr(args, "vault", None) or os.environ.get(VAULT_ENV_VAR)
    vault = vault_path(args) if chosen else None  # the default one needs no option
    record = daemon_of(args)
    mountpoint = Path(record.mountpoint) if record is not None else default_mountpoint()
    agents = [args.agent] if args.agent else list(integrate.AGENTS)
    for agent in agents:
        edits = integrate.edits_for(agent, home, mountpoint, vault)
        if args.list:
            for edit, present in integrate.status(edits):
                mark = "yes" if present else "no "
                output.data(f"{agent:7} {mark} {edit.what}: {edit.path}\n".encode())
        elif args.undo:
            _report(
                integrate.undo(agent, edits, home),
                f"{agent} is no longer integrated.",
                f"{agent} was not integrated; nothing to undo.",
            )
        elif args.dry_run:
            changes = integrate.plan(edits)
            output.data(integrate.diff(changes).encode())
            if not changes:
                output.note(f"memvault: {agent} is already integrated; nothing would change.")
        else:
            _report(
                integrate.apply(agent, edits, home),
                f"{agent} integrated; restart it to load the MCP server and hooks.",
                f"{agent} is already integrated; nothing changed.",
            )
    return 0


def _report(done: list[str], changed: str, unchanged: str) -> None:
    for line in done:
        output.note(f"memvault: {line}")
    output.note(f"memvault: {changed if done else unchanged}")


def register(add) -> None:
    p = add(
        "serve",
        cmd_serve,
        "serve the vault to an agent as an MCP server over stdio (through the running "
        "mount; on a locked vault every tool says so)",
    )
    p.add_argument(
        "--caller",
        metavar="NAME",
        help="the agent this server is for (claude, codex, cursor...), as it will be recorded",
    )
    p.add_argument(
        "--subtree",
        metavar="DIR",
        help="show the agent only this directory of the vault, as its root",
    )
    p.add_argument(
        "--read-only", action="store_true", help="offer no tool that writes, moves or forgets"
    )
    p = add(
        "context",
        cmd_context,
        "print what an agent should know as a session starts: the project's memory "
        "files, then related and recent memories (through the mount)",
    )
    p.add_argument("--project", metavar="DIR", help="the project directory (default: here)")
    p.add_argument(
        "--budget", type=int, default=2048, metavar="BYTES", help="at most this many bytes"
    )
    p = add(
        "integrate",
        cmd_integrate,
        "wire an agent to the vault: its MCP server entry and instructions (files backed "
        "up first; --undo restores them)",
    )
    p.add_argument(
        "agent",
        nargs="?",
        choices=("claude", "codex", "cursor"),
        metavar="AGENT",
        help="claude, codex or cursor",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--list", action="store_true", help="show what is integrated, per agent")
    mode.add_argument(
        "--dry-run", action="store_true", help="print the exact changes as a diff and write nothing"
    )
    mode.add_argument(
        "--undo",
        action="store_true",
        help="restore the files integrate changed (byte for byte where unchanged "
        "since) and remove what it added",
    )
