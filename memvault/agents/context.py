"""`memvault context`: what an agent should know as a session starts, in a
few kilobytes: the project's own memory files, then the memories that match
the project (its name and git remote, ranked by the daemon's search) and
those changed last, each with its path so the agent can read more.

Everything comes through the live mount (MountedVault): a locked vault has
no context to give.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .. import paths
from ..errors import MemvaultError
from ..mounted import MountedVault
from ..search import Query
from ..vault.records import FILE

DEFAULT_BUDGET = 2048
PROJECTS = "projects"
SEARCHED = 8


def project_names(project: Path) -> list[str]:
    """The names a project goes by: its directory, and its git remote's repository."""
    names = [project.name]
    try:
        done = subprocess.run(
            ["git", "-C", str(project), "remote", "get-url", "origin"],
            capture_output=True,
            text=True,
            timeout=2,
        )
    except (OSError, subprocess.TimeoutExpired):
        return names
    remote = done.stdout.strip().removesuffix("/").removesuffix(".git")
    if done.returncode == 0 and remote:
        repo = remote.replace(":", "/").rsplit("/", 1)[-1]
        if repo and repo not in names:
            names.append(repo)
    return [n for n in names if n]


def _project_files(mounted: MountedVault, names: list[str]) -> tuple[list[str], list]:
    """The project's memory files (projects/<name>.md and the files directly in
    projects/<name>/), and every file below its directories, walked once (not
    the whole vault: a big one would cost a stat per memory at every start)."""
    own, tree = [], []
    for name in names:
        try:
            base = paths.join(PROJECTS, paths.check_name(name))
            if mounted.exists(base + ".md"):
                own.append(base + ".md")
            if mounted.exists(base):
                below = [m for m in mounted.walk(base) if m.type == FILE]
                own += [m.path for m in below if paths.parent(m.path) == base]
                tree += below
        except MemvaultError:
            continue
    return list(dict.fromkeys(own)), tree


def _search(mounted: MountedVault, text: str) -> list[dict]:
    """The best matches for ``text`` (none if the search cannot answer)."""
    try:
        return json.loads(mounted.search(Query(text, SEARCHED, "", as_json=True)))["results"]
    except (MemvaultError, ValueError, KeyError):
        return []


def build(mounted: MountedVault, project: Path, budget: int = DEFAULT_BUDGET) -> str:
    """The context block, at most ``budget`` bytes (UTF-8)."""
    names = project_names(project)
    root = mounted.root
    lines: list[str] = []
    used = 0
    shown: set[str] = set()

    def add(line: str) -> bool:
        nonlocal used
        size = len(line.encode()) + 1
        if used + size > budget:
            return False
        lines.append(line)
        used += size
        return True

    add("# Memory (memvault)")
    add(
        f'Memories: {root} (also the `memvault` MCP tools). Search: cat "{root}/search/<words>". '
        f"Save durable facts under {root}/{PROJECTS}/{names[0]}/."
    )
    own, tree = _project_files(mounted, names)
    if own and add("\n## This project's memory"):
        for path in own:
            title = f"### {root}/{path}"
            room = budget - used - len(title.encode()) - 8  # newlines and the ellipsis
            if room < 80:
                break
            text = mounted.get(path).decode("utf-8", errors="replace").strip()
            if len(text.encode()) > room:
                cut = text.encode()[:room].decode("utf-8", errors="ignore")
                text = cut.rsplit(" ", 1)[0] + " …"
            if add(f"{title}\n{text}"):
                shown.add(path)

    hits = [r for r in _search(mounted, " ".join(names)) if r["path"] not in shown]
    if hits and add("\n## Related memories"):
        for r in hits:
            heading = f" ({r['heading']})" if r.get("heading") else ""
            if not add(f"- {root}/{r['path']}{heading}: {r['snippet']}"):
                break
            shown.add(r["path"])

    recent = sorted(
        (m for m in tree if m.path not in shown),
        key=lambda m: m.mtime_ns,
        reverse=True,
    )[:5]
    if recent and add("\n## Changed last in this project"):
        for meta in recent:
            if not add(f"- {root}/{meta.path}"):
                break
    return "\n".join(lines) + "\n"
