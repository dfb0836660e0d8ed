"""Where each agent keeps its history, and which files under a root are sessions."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .jsonl import sniff

KINDS = ("claude", "codex", "cursor", "context")
CONTEXT_NAMES = {
    "CLAUDE.md",
    "CLAUDE.local.md",
    "AGENTS.md",
    "AGENTS.override.md",
    ".cursorrules",
    "MEMORY.md",
}
RULE_DIRS = {(".cursor", "rules"), (".claude", "rules")}
PRUNED_DIRS = {
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".cache",
    "dist",
    "build",
    "target",
    ".tox",
    ".mypy_cache",
}
MAX_CONTEXT_DEPTH = 8


@dataclass(frozen=True)
class Source:
    kind: str  # claude | codex | cursor | cursor-db | context
    path: Path
    root: Path | None = None  # for context files: the root they were found under

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.path}"


def default_roots(kind: str) -> list[Path]:
    home = Path.home()
    codex_home = Path(os.environ.get("CODEX_HOME", home / ".codex"))
    if kind == "claude":
        return [home / ".claude" / "projects"]
    if kind == "codex":
        return [codex_home / "sessions", codex_home / "archived_sessions"]
    if kind == "cursor":
        return [
            home / ".cursor" / "projects",
            home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb",
            home
            / "Library"
            / "Application Support"
            / "Cursor"
            / "User"
            / "globalStorage"
            / "state.vscdb",
        ]
    return [home / ".claude" / "CLAUDE.md", codex_home / "AGENTS.md", Path.cwd()]


def discover(kind: str, root: Path, skipped: Counter) -> list[Source]:
    """The sources of ``kind`` at ``root`` (a file, or a directory searched recursively).

    JSONL files are checked to be that agent's (a folder may hold several agents'
    files, and `ingest all --source DIR` searches it for each).
    """
    found = _candidates(kind, root, skipped)
    return [s for s in found if not s.path.name.endswith(".jsonl") or sniff(s.path) == s.kind]


def _candidates(kind: str, root: Path, skipped: Counter) -> list[Source]:
    if root.is_file():
        return [_single(kind, root)]
    if not root.is_dir():
        return []
    if kind == "claude":
        return _claude(root, skipped)
    if kind == "codex":
        found = []
        for path in sorted(root.rglob("rollout-*.jsonl*")):
            if path.name.endswith(".jsonl"):
                found.append(Source("codex", path))
            elif path.name.endswith(".zst"):
                skipped["compressed rollout (.zst, not supported yet)"] += 1
        return found
    if kind == "cursor":
        found = [
            Source("cursor", p)
            for p in sorted(root.rglob("*.jsonl"))
            if "agent-transcripts" in p.parts
        ]
        found += [
            Source("cursor-db", p)
            for p in sorted(root.rglob("state.vscdb"))
            if p.parent.name == "globalStorage"
        ]
        skipped["legacy .txt transcript (not read)"] += sum(
            1 for p in root.rglob("*.txt") if p.parent.parent.name == "agent-transcripts"
        )
        return found
    return _context(root)


def _single(kind: str, path: Path) -> Source:
    if kind == "cursor" and path.name.endswith(".vscdb"):
        return Source("cursor-db", path)
    if kind == "context":
        return Source("context", path, path.parent)
    return Source(kind, path)


def _claude(root: Path, skipped: Counter) -> list[Source]:
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        if path.name.startswith("agent-acompact-"):
            skipped["compaction run (a copy of the conversation)"] += 1
        elif path.name in ("journal.jsonl", "history.jsonl"):
            continue
        else:
            found.append(Source("claude", path))
    for path in sorted(root.rglob("*.md")):
        if path.parent.name == "memory":  # Claude's auto memory: projects/<slug>/memory/*.md
            found.append(Source("context", path, path.parent.parent.parent))
    return found


def _context(root: Path) -> list[Source]:
    found = []
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        depth = len(here.relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if d not in PRUNED_DIRS and depth < MAX_CONTEXT_DEPTH)
        in_rules = tuple(here.parts[-2:]) in RULE_DIRS
        for name in sorted(files):
            if name in CONTEXT_NAMES or (in_rules and name.endswith((".md", ".mdc"))):
                found.append(Source("context", here / name, root))
    return found
