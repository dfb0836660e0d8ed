"""Tool calls of every agent, described in one line each.

Each agent names its tools differently; what a memory needs is the same:
the command that ran or the file that was touched.
"""

from __future__ import annotations

import json
import re

from .session import Session

_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)
SHELL = {
    "bash",
    "shell",
    "run_terminal_cmd",
    "run_terminal_command_v2",
    "exec_command",
    "shell_command",
    "local_shell",
    "awaitshell",
}
EDIT = {
    "write",
    "edit",
    "multiedit",
    "notebookedit",
    "edit_file",
    "edit_file_v2",
    "search_replace",
    "strreplace",
    "delete",
    "delete_file",
    "editnotebook",
    "create_file",
}
READ = {"read", "readfile", "read_file", "read_file_v2", "view_image"}
PATH_KEYS = (
    "file_path",
    "notebook_path",
    "target_notebook",
    "target_file",
    "targetFile",
    "relativeWorkspacePath",
    "relative_workspace_path",
    "path",
    "filePath",
)


def patch_files(patch: str) -> list[str]:
    """Files named in an apply_patch body (*** Add/Update/Delete File:, *** Move to:)."""
    return [m.group(2) or m.group(3) for m in _PATCH_FILE.finditer(patch)]


def loads_maybe(value) -> object:
    """JSON given as a string (Codex arguments, Cursor params) or as an object."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def command_of(args: dict) -> str:
    cmd = args.get("command", args.get("cmd", ""))
    if isinstance(cmd, list):  # ["bash", "-lc", "..."]
        cmd = cmd[-1] if len(cmd) >= 3 and cmd[1] in ("-c", "-lc") else " ".join(map(str, cmd))
    return str(cmd)


def describe(session: Session, name: str, args: object, time: str = "") -> None:
    """Record one tool call in ``session``: its line, and the command or files it names."""
    name = (name or "tool").split("\n")[0].strip() or "tool"  # Cursor names may hold newlines
    key = name.lower().rsplit(".", 1)[-1]
    args = loads_maybe(args)
    if isinstance(args, str):  # a raw patch or script
        files = patch_files(args)
        for path in files:
            session.edited(path)
        shown = ", ".join(f"`{p}`" for p in files) if files else f"`{one_line(args, 160)}`"
        session.tool(f"**{name}** {shown}", time)
        return
    if not isinstance(args, dict):
        args = {}
    if key in SHELL or "command" in args and key not in EDIT | READ:
        command = command_of(args)
        if command:
            session.ran(command)
            session.tool(f"**{name}** `$ {one_line(command, 300)}`", time)
            return
    path = next((str(args[k]) for k in PATH_KEYS if args.get(k)), "")
    if key in EDIT or key == "apply_patch":
        files = [path] if path else patch_files(str(args.get("input", args.get("patch", ""))))
        for p in files:
            session.edited(p)
        session.tool(f"**{name}** " + ", ".join(f"`{p}`" for p in files), time)
        return
    if key in READ and path:
        session.read(path)
        session.tool(f"**{name}** `{path}`", time)
        return
    for field in ("pattern", "query", "url", "glob_pattern", "description", "prompt"):
        if args.get(field):
            session.tool(f"**{name}** {field}: `{one_line(str(args[field]), 200)}`", time)
            return
    summary = one_line(json.dumps(args, ensure_ascii=False), 200) if args else ""
    session.tool(f"**{name}**" + (f" `{summary}`" if summary else ""), time)


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
