"""`memvault integrate claude|codex|cursor`: wire an agent to the vault in one
command, list what is wired, show the changes first, and undo them.

An agent's integration is a few edits of its own configuration files, each
one idempotent and reversible: the MCP server entry (JSON: only our key
changes; TOML: tomlkit keeps the user's comments and formatting) and a
managed block in its instructions file. A file is backed up beside itself
(timestamped, mode kept) before its first change, and a manifest in
~/.memvault/integrations.json says what was done. --undo puts a file back
byte for byte from its backup when nobody changed it since; a file changed
since loses only what memvault added.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from ..errors import UsageError

SERVER_NAME = "memvault"
BLOCK_BEGIN = "<!-- memvault:begin (managed by `memvault integrate`; `--undo` removes it) -->"
BLOCK_END = "<!-- memvault:end -->"
AGENTS = ("claude", "codex", "cursor")


def instructions(mountpoint: Path) -> str:
    """What an agent is told about its memory (the managed block's text)."""
    return f"""## Memory (memvault)

Your long-term memory is an encrypted vault mounted at `{mountpoint}` as
Markdown files, also reachable through the `memvault` MCP tools.

- Before answering questions about earlier work, decisions, people or
  preferences, search it: the `search` tool, or `cat "{mountpoint}/search/<words>"`
  (`<words>.json` for JSON, `?k=20` for more results, `?in=DIR` for a directory).
- Save durable facts, decisions and lessons as short Markdown files, one topic
  per file, under `projects/<project>/` (or `people/`, `howto/`): the `write` or
  `append` tools, or your ordinary file tools on the mount.
- `forget` (or `rm`) destroys a memory for good: only when the user asks.
"""


@dataclass(frozen=True)
class Edit:
    """One change to one file: ``apply`` gives the new text from the old (None:
    no file yet); ``remove`` takes out what apply added; ``present`` tells
    whether the text has it."""

    path: Path
    what: str
    apply: Callable[[str | None], str]
    remove: Callable[[str], str]
    present: Callable[[str], bool]


# -- JSON: one key path, or one item of a list ---------------------------------------------


def _load_json(path: Path, text: str | None) -> dict:
    if not text or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); "
            "fix it first, nothing was changed."
        ) from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} does not hold a JSON object; nothing was changed.")
    return doc


def _dump_json(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _json_edit(path: Path, what: str, keys: tuple[str, ...], value: dict) -> Edit:
    def apply(text: str | None) -> str:
        doc = _load_json(path, text)
        node = doc
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        if node.get(keys[-1]) == value and text is not None:
            return text  # already there: not even reformatted
        node[keys[-1]] = value
        return _dump_json(doc)

    def remove(text: str) -> str:
        doc = _load_json(path, text)
        node = doc
        for key in keys[:-1]:
            node = node.get(key)
            if not isinstance(node, dict):
                return text
        if keys[-1] not in node:
            return text
        del node[keys[-1]]
        return _dump_json(doc)

    def present(text: str) -> bool:
        return _holds(_load_json(path, text), keys, value)

    return Edit(path, what, apply, remove, present)


def _holds(doc: dict, keys: tuple[str, ...], value: object) -> bool:
    """Whether ``doc`` has ``value`` at ``keys``."""
    node = doc
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return node == value


def _json_list_edit(
    path: Path,
    what: str,
    keys: tuple[str, ...],
    item: dict,
    ours: Callable[[object], bool],
    defaults: dict | None = None,
) -> Edit:
    """``item`` in the list at ``keys`` (made if missing); ``ours`` recognises the
    items memvault put there, in this version or another. ``defaults`` are
    top-level keys the file needs, set if missing (and left by an undo that
    cannot restore the file whole: they are the file format's, not ours)."""

    def items(doc: dict, make: bool) -> list | None:
        node = doc
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if make else node.get(key)
            if not isinstance(node, dict):
                return None
        found = node.setdefault(keys[-1], []) if make else node.get(keys[-1])
        return found if isinstance(found, list) else None

    def apply(text: str | None) -> str:
        doc = _load_json(path, text)
        found = items(doc, make=True)
        if found is None:
            raise UsageError(f"{path}: {'.'.join(keys)} is not a list; nothing was changed.")
        missing = {k: v for k, v in (defaults or {}).items() if k not in doc}
        if found.count(item) == 1 and sum(map(ours, found)) == 1 and not missing:
            return text if text is not None else _dump_json(doc)
        found[:] = [x for x in found if not ours(x)] + [item]
        return _dump_json({**missing, **doc})

    def remove(text: str) -> str:
        doc = _load_json(path, text)
        found = items(doc, make=False)
        if not found or not any(map(ours, found)):
            return text
        found[:] = [x for x in found if not ours(x)]
        node = doc
        for key in keys[:-1]:
            node = node[key]
        if not found:
            del node[keys[-1]]
        return _dump_json(doc)

    def present(text: str) -> bool:
        found = items(_load_json(path, text), make=False)
        return bool(found) and item in found

    return Edit(path, what, apply, remove, present)


# -- TOML: one table -------------------------------------------------------------------


def _load_toml(path: Path, text: str | None) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text or "")
    except tomlkit.exceptions.ParseError as exc:
        raise UsageError(
            f"{path} is not valid TOML ({exc}); fix it first, nothing was changed."
        ) from None


def _toml_edit(path: Path, what: str, keys: tuple[str, ...], value: dict) -> Edit:
    def load(text: str | None) -> tomlkit.TOMLDocument:
        return _load_toml(path, text)

    def apply(text: str | None) -> str:
        doc = load(text)
        node = doc
        for key in keys[:-1]:
            if key not in node:
                node[key] = tomlkit.table(is_super_table=True)
            node = node[key]
        if key_value(node, keys[-1]) == value and text is not None:
            return text
        table = tomlkit.table()
        for k, v in value.items():
            table[k] = v
        node[keys[-1]] = table
        return tomlkit.dumps(doc)

    def remove(text: str) -> str:
        doc = load(text)
        node = doc
        for key in keys[:-1]:
            if key not in node:
                return text
            node = node[key]
        if keys[-1] not in node:
            return text
        del node[keys[-1]]
        if len(keys) > 1 and not node:
            del doc[keys[0]]  # the super table we may have made
        return tomlkit.dumps(doc)

    def present(text: str) -> bool:
        return _holds(load(text).unwrap(), keys, value)

    return Edit(path, what, apply, remove, present)


def _toml_key_edit(
    path: Path, what: str, key: str, value: list, ours: Callable[[object], bool]
) -> Edit:
    """A top-level key, set only if absent or already ours (a user's own value,
    say another `notify` program, is left alone: the edit is then not present)."""

    def load(text: str | None) -> tomlkit.TOMLDocument:
        return _load_toml(path, text)

    def apply(text: str | None) -> str:
        doc = load(text)
        current = key_value(doc, key)
        if current == value and text is not None:
            return text
        if current is not None and not ours(current):
            return text if text is not None else tomlkit.dumps(doc)
        doc[key] = value
        return tomlkit.dumps(doc)

    def remove(text: str) -> str:
        doc = load(text)
        if key not in doc or not ours(key_value(doc, key)):
            return text
        del doc[key]
        return tomlkit.dumps(doc)

    def present(text: str) -> bool:
        return key_value(load(text), key) == value

    return Edit(path, what, apply, remove, present)


def key_value(node, key: str):
    found = node.get(key)
    return found.unwrap() if hasattr(found, "unwrap") else found


# -- Markdown: one managed block -------------------------------------------------------


def _block_edit(path: Path, what: str, body: str) -> Edit:
    block = f"{BLOCK_BEGIN}\n{body.rstrip()}\n{BLOCK_END}\n"

    def span(text: str) -> tuple[int, int] | None:
        start = text.find(BLOCK_BEGIN)
        if start < 0:
            return None
        end = text.find(BLOCK_END, start)
        if end < 0:
            return None
        end += len(BLOCK_END)
        if text[end : end + 1] == "\n":
            end += 1
        return start, end

    def apply(text: str | None) -> str:
        text = text or ""
        found = span(text)
        if found is not None:
            return text[: found[0]] + block + text[found[1] :]
        if not text:
            return block
        return text + ("" if text.endswith("\n") else "\n") + "\n" + block

    def remove(text: str) -> str:
        found = span(text)
        if found is None:
            return text
        before, after = text[: found[0]], text[found[1] :]
        if not after and before.endswith("\n\n"):
            before = before[:-1]  # the blank line apply put before the block
        return before + after

    def present(text: str) -> bool:
        found = span(text)
        return found is not None and text[found[0] : found[1]] == block

    return Edit(path, what, apply, remove, present)


# -- the agents --------------------------------------------------------------------------


def server_command(vault: Path | None) -> tuple[str, list[str]]:
    """How a host starts `memvault serve`: this Python, so no PATH is needed."""
    args = ["-m", "memvault", "serve"]
    if vault is not None:
        args += ["--vault", str(vault)]
    return sys.executable, args


HOOK_MODULE = "memvault.agents.hook"


def hook_command(agent: str, event: str, vault: Path | None) -> str:
    """The shell command a host runs for a session event (see hook.py)."""
    words = [sys.executable, "-m", HOOK_MODULE, agent, event]
    if vault is not None:
        words += ["--vault", str(vault)]
    return shlex.join(words)


def _is_our_hook(group: object) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(map(_is_our_command, hooks))


def _is_our_command(entry: object) -> bool:
    return isinstance(entry, dict) and HOOK_MODULE in str(entry.get("command", ""))


def _claude_hook(home: Path, event: str, name: str, vault: Path | None) -> Edit:
    group = {"hooks": [{"type": "command", "command": hook_command("claude", name, vault)}]}
    return _json_list_edit(
        home / ".claude" / "settings.json", f"{event} hook", ("hooks", event), group, _is_our_hook
    )


def edits_for(agent: str, home: Path, mountpoint: Path, vault: Path | None) -> list[Edit]:
    command, args = server_command(vault)
    args = [*args, "--caller", agent]
    text = instructions(mountpoint)
    if agent == "claude":
        entry = {"type": "stdio", "command": command, "args": args, "env": {}}
        return [
            _claude_hook(home, "SessionStart", "session-start", vault),
            _claude_hook(home, "SessionEnd", "session-end", vault),
            _json_edit(
                home / ".claude.json", "MCP server (user scope)", ("mcpServers", SERVER_NAME), entry
            ),
            _block_edit(home / ".claude" / "CLAUDE.md", "instructions block", text),
        ]
    if agent == "codex":
        entry = {"command": command, "args": args}
        notify = shlex.split(hook_command("codex", "notify", vault))
        return [
            _toml_key_edit(
                home / ".codex" / "config.toml",
                "notify program (imports each turn)",
                "notify",
                notify,
                lambda v: isinstance(v, list) and HOOK_MODULE in v,
            ),
            _toml_edit(
                home / ".codex" / "config.toml", "MCP server", ("mcp_servers", SERVER_NAME), entry
            ),
            _block_edit(home / ".codex" / "AGENTS.md", "instructions block", text),
        ]
    if agent == "cursor":
        entry = {"command": command, "args": args}
        stop = {"command": hook_command("cursor", "stop", vault)}
        return [
            _json_edit(
                home / ".cursor" / "mcp.json", "MCP server", ("mcpServers", SERVER_NAME), entry
            ),
            _json_list_edit(
                home / ".cursor" / "hooks.json",
                "stop hook (imports sessions)",
                ("hooks", "stop"),
                stop,
                _is_our_command,
                defaults={"version": 1},
            ),
        ]
    raise UsageError(f"Unknown agent {agent!r}: choose one of {', '.join(AGENTS)}.")


# -- applying, listing, undoing --------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def plan(edits: list[Edit]) -> list[tuple[Edit, str | None, str]]:
    """(edit, text now, text after) for the edits that change something."""
    changes = []
    texts: dict[Path, str | None] = {}
    for edit in edits:
        before = texts[edit.path] if edit.path in texts else _read(edit.path)
        after = edit.apply(before)
        texts[edit.path] = after
        if after != before:
            changes.append((edit, before, after))
    return changes


def diff(changes: list[tuple[Edit, str | None, str]]) -> str:
    """One unified diff per file, from what it holds now to what it would hold."""
    files: dict[Path, list] = {}
    for edit, before, after in changes:
        files.setdefault(edit.path, [before, after])[1] = after
    out = []
    for path, (before, after) in files.items():
        out.extend(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=str(path) if before is not None else "/dev/null",
                tofile=str(path),
            )
        )
    return "".join(out)


class Manifest:
    """What `integrate` did, per agent: each file's backup (None: memvault made
    the file) and the digest of what it wrote."""

    def __init__(self, home: Path) -> None:
        self.path = home / ".memvault" / "integrations.json"
        text = _read(self.path)
        self.data: dict = json.loads(text) if text else {}

    def record(self, agent: str, path: Path, backup: Path | None, written: str) -> None:
        files = self.data.setdefault(agent, {})
        first = files.get(str(path))
        files[str(path)] = {
            "backup": first["backup"] if first else (str(backup) if backup else None),
            "written": _digest(written),
        }

    def files(self, agent: str) -> dict:
        return self.data.get(agent, {})

    def forget(self, agent: str) -> None:
        self.data.pop(agent, None)

    def save(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(self.path, json.dumps(self.data, indent=2) + "\n", 0o600)


def _write(path: Path, text: str, mode: int | None = None) -> None:
    """Replace ``path`` atomically, keeping its mode (or ``mode`` for a new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600 if mode is None else mode
    temp = path.with_name(f".{path.name}.memvault-tmp")
    temp.write_text(text)
    os.chmod(temp, mode)
    os.replace(temp, path)


def apply(agent: str, edits: list[Edit], home: Path) -> list[str]:
    """Make the changes, backing each file up first; return what was done."""
    changes = plan(edits)
    manifest = Manifest(home)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    done = []
    backed_up: set[Path] = set()
    for edit, before, after in changes:
        backup = None
        if (
            before is not None
            and edit.path not in backed_up
            and not manifest.files(agent).get(str(edit.path))
        ):
            backup = edit.path.with_name(f"{edit.path.name}.memvault-backup-{stamp}")
            shutil.copy2(edit.path, backup)
            backed_up.add(edit.path)
        _write(edit.path, after)
        manifest.record(agent, edit.path, backup, after)
        done.append(f"{edit.what}: {edit.path}" + (f" (backup: {backup.name})" if backup else ""))
    if changes:
        manifest.save()
    return done


def status(edits: list[Edit]) -> list[tuple[Edit, bool]]:
    return [(edit, (text := _read(edit.path)) is not None and edit.present(text)) for edit in edits]


def undo(agent: str, edits: list[Edit], home: Path) -> list[str]:
    """Restore each file memvault changed: from its backup if nobody touched it
    since (byte for byte), else by removing only what memvault added."""
    manifest = Manifest(home)
    recorded = manifest.files(agent)
    done = []
    for path_text, entry in recorded.items():
        path = Path(path_text)
        now = _read(path)
        if now is None:
            continue
        backup = Path(entry["backup"]) if entry["backup"] else None
        if _digest(now) == entry["written"]:
            if backup is None:
                path.unlink()
                done.append(f"removed {path} (memvault created it)")
            else:
                shutil.copy2(backup, path)
                backup.unlink()
                done.append(f"restored {path} from its backup")
            continue
        text = now
        for edit in edits:
            if edit.path == path:
                text = edit.remove(text)
        if text != now:
            _write(path, text)
        done.append(f"removed memvault's entries from {path} (changed since; backup kept)")
    for edit in edits:  # integrated by hand or by another version: take ours out too
        if str(edit.path) not in recorded and (text := _read(edit.path)) is not None:
            cleaned = edit.remove(text)
            if cleaned != text:
                _write(edit.path, cleaned)
                done.append(f"removed memvault's {edit.what} from {edit.path}")
    manifest.forget(agent)
    manifest.save()
    return done
