"""A Session as one Markdown memory, and where in the vault it goes.

Layout: ``sessions/<agent>/<project>/<date>-<title-or-id>.md``. The header
lists what a later session most wants at a glance (decisions, files touched,
commands run); the conversation follows with one heading per turn, so the
search index chunks it turn by turn.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from .session import AGENT_NAMES, MAX_LISTED, Session

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
ROLE_HEADINGS = {
    "user": "User",
    "assistant": "Assistant",
    "summary": "Compaction summary",
    "reasoning": "Reasoning (summary)",
    "event": "Event",
}


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of ``text`` (ASCII letters, digits, . _ -)."""
    cleaned = _UNSAFE.sub("-", text).strip("-.")
    return cleaned[:limit].rstrip("-.") or "untitled"


def project_name(project: str) -> str:
    """The last component of a project path (what people call the project)."""
    parts = [p for p in re.split(r"[\\/]", project) if p]
    return slug(parts[-1]) if parts else "no-project"


def destination(session: Session) -> str:
    date = session.started[:10] if re.match(r"\d{4}-\d\d-\d\d", session.started) else "undated"
    title = session.display_title
    if title:  # the id's last characters: random in UUIDv4 and v7, unlike their first
        tail = re.sub(r"[^A-Za-z0-9]", "", session.session_id)[-8:]
        name = f"{date}-{slug(title, 50)}-{tail}"
    else:
        name = f"{date}-{slug(session.session_id, 80)}"
    return f"sessions/{session.agent}/{project_name(session.project)}/{name}.md"


def show_time(timestamp: str) -> str:
    """'2026-02-14T10:03:07.123Z' -> '2026-02-14 10:03 UTC' (as given if unparsable)."""
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return timestamp
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def fence(text: str) -> str:
    """A code block around ``text``, its fence longer than any backtick run inside."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def render(session: Session) -> str:
    agent = AGENT_NAMES.get(session.agent, session.agent)
    title = session.display_title or f"{agent} session {session.session_id[:8]}"
    out = [f"# {title}", ""]
    facts = [
        ("agent", agent),
        ("project", session.project),
        ("git branch", session.branch),
        ("started", show_time(session.started) if session.started else ""),
        ("ended", show_time(session.ended) if session.ended else ""),
        ("session", session.session_id),
        ("subagent of", session.parent_id),
    ]
    out += [f"- {name}: {value}" for name, value in facts if value]
    out.append(
        f"- messages: {session.prompts} prompts, {session.answers} answers, "
        f"{session.tool_calls} tool calls"
    )
    for heading, items in (
        ("Decisions", [f"- {d}" for d in session.decisions]),
        (
            "Files touched",
            [f"- `{p}` (edited)" for p in session.files_edited]
            + [f"- `{p}` (read)" for p in session.files_read if p not in session.files_edited],
        ),
        ("Commands run", [f"- `{' '.join(c.split())[:200]}`" for c in session.commands]),
    ):
        if items:
            more = len(items) - MAX_LISTED
            out += ["", f"## {heading}", "", *items[:MAX_LISTED]]
            if more > 0:
                out.append(f"- … and {more} more")
    out += ["", "## Conversation"]
    for entry in session.entries:
        when = f" · {show_time(entry.time)[11:]}" if entry.time else ""
        if entry.role == "tool":
            out += ["", f"- {entry.text}"]
        elif entry.role == "output":
            out += ["", fence(entry.text)]
        else:
            out += ["", f"### {ROLE_HEADINGS.get(entry.role, entry.role)}{when}", "", entry.text]
    return "\n".join(out) + "\n"
