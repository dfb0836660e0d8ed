"""Cursor: agent transcripts (~/.cursor/projects/*/agent-transcripts) and the
IDE's state.vscdb (FORMATS.md §3).

state.vscdb is opened read-only through SQLite (``mode=ro``, a busy
timeout), which is safe while Cursor runs and sees its WAL; only the
``composerData:`` and ``bubbleId:`` key prefixes are ever read, never
``cursorAuth/*`` or anything else in that database.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from .jsonl import records
from .session import Session
from .tools import describe, loads_maybe

_TIMESTAMP = re.compile(r"<timestamp>(.*?)</timestamp>", re.S)
_QUERY = re.compile(r"<user_query>(.*)</user_query>", re.S)
_TS_FORMAT = re.compile(r"\w+, (\w+ \d+, \d{4}), (\d+:\d\d [AP]M) \(UTC([+-]\d+)(?::(\d\d))?\)")


# -- agent transcripts ------------------------------------------------------------


def transcript_project(path: Path) -> str:
    """The project slug: .../projects/<slug>/agent-transcripts/<id>/<file>."""
    for parent in path.parents:
        if parent.name == "agent-transcripts":
            return parent.parent.name
    return ""


def parse_transcript(path: Path) -> Session:
    skipped: Counter = Counter()
    session = Session("cursor", path.stem, skipped=skipped, project=transcript_project(path))
    if path.parent.name == "subagents":
        session.parent_id = path.parent.parent.name
    seen: set[bytes] = set()
    for record in records(path, skipped):
        key = json.dumps(record, sort_keys=True).encode()
        if key in seen:  # Cursor writes byte-identical duplicate records
            skipped["duplicate record"] += 1
            continue
        seen.add(key)
        role = record.get("role")
        content = (record.get("message") or {}).get("content")
        if role not in ("user", "assistant") or not isinstance(content, list):
            skipped["not a conversation record"] += 1
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and role == "user":
                _user_text(session, str(block.get("text", "")))
            elif block.get("type") == "text":
                session.add("assistant", str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                describe(session, str(block.get("name", "")), block.get("input"))
    # The file's mtime is the session's end (and its start, if no prompt had a time).
    session.seen_at(_from_millis(path.stat().st_mtime * 1000))
    session.project = _unslug(session.project, [*session.files_edited, *session.files_read])
    return session


def _unslug(slug: str, paths: list[str]) -> str:
    """The project folder whose slug this is, if a touched file lies under it.

    Cursor's slug is the path without its leading '/', every '/' turned to
    '-': lossy, so it is only undone when a real path confirms it.
    """
    for path in paths:
        parts = [p for p in path.split("/") if p]
        for end in range(len(parts), 0, -1):
            if re.sub(r"[^A-Za-z0-9]", "-", "-".join(parts[:end])) == slug:
                return "/" + "/".join(parts[:end])
    return slug


def _user_text(session: Session, text: str) -> None:
    stamp = _TIMESTAMP.search(text)
    time = _parse_stamp(stamp.group(1)) if stamp else ""
    session.seen_at(time)
    query = _QUERY.search(text)
    if query is None:
        session.add("event", text)
        return
    body = query.group(1)
    if body.startswith("\n"):  # a newline right after <user_query>: the human typed it
        session.add("user", body.strip(), time)
    else:  # injected by the harness (e.g. after a subagent)
        session.skipped["injected continuation"] += 1


def _parse_stamp(text: str) -> str:
    """'Monday, May 4, 2026, 12:39 AM (UTC+5:30)' -> ISO-8601 UTC."""
    match = _TS_FORMAT.search(text)
    if not match:
        return ""
    try:
        local = datetime.strptime(f"{match.group(1)} {match.group(2)}", "%B %d, %Y %I:%M %p")
    except ValueError:
        return ""
    hours = int(match.group(3))
    minutes = int(match.group(4) or 0) * (1 if hours >= 0 else -1)
    moment = local - timedelta(hours=hours, minutes=minutes)
    return moment.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


# -- the IDE's state.vscdb ----------------------------------------------------------


def open_readonly(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=5)
    conn.execute("PRAGMA query_only = ON")
    return conn


def composer_fingerprints(db: Path) -> dict[str, str]:
    """composerId -> a value that changes whenever the conversation does."""
    conn = open_readonly(db)
    try:
        out = {}
        for key, value in conn.execute(
            "SELECT key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%'"
        ).fetchall():
            composer_id = key.split(":", 1)[1]
            bubbles = conn.execute(
                "SELECT count(*), sum(length(value)) FROM cursorDiskKV WHERE key LIKE ?",
                (f"bubbleId:{composer_id}:%",),
            ).fetchone()
            out[composer_id] = f"{len(value or '')}/{bubbles[0]}/{bubbles[1]}"
        return out
    finally:
        conn.close()


def parse_store(db: Path, composer_ids: list[str] | None = None) -> Iterator[Session]:
    """One Session per conversation ("composer") in a global state.vscdb."""
    projects = _workspace_projects(db)
    conn = open_readonly(db)
    try:
        rows = conn.execute("SELECT key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%'")
        for key, value in rows.fetchall():
            composer_id = key.split(":", 1)[1]
            if composer_ids is not None and composer_id not in composer_ids:
                continue
            data = _json(value)
            if not isinstance(data, dict):
                continue
            yield _composer(conn, composer_id, data, projects)
    finally:
        conn.close()


def _composer(conn, composer_id: str, data: dict, projects: dict[str, str]) -> Session:
    session = Session("cursor", composer_id, title=str(data.get("name") or ""))
    uri = (data.get("workspaceIdentifier") or {}).get("uri") or {}
    session.project = str(uri.get("fsPath") or projects.get(composer_id, ""))
    session.branch = str(data.get("createdOnBranch") or "")
    for millis in (data.get("createdAt"), data.get("lastUpdatedAt")):
        if isinstance(millis, int | float):
            session.seen_at(_from_millis(millis))
    headers = data.get("fullConversationHeadersOnly")
    if headers:
        bubbles = {
            k.rsplit(":", 1)[1]: _json(v)
            for k, v in conn.execute(
                "SELECT key, value FROM cursorDiskKV WHERE key LIKE ?",
                (f"bubbleId:{composer_id}:%",),
            )
        }
        ordered = [bubbles.get(h.get("bubbleId")) for h in headers if isinstance(h, dict)]
        if missing := sum(b is None for b in ordered):
            session.skipped["missing bubble"] += missing
    else:
        ordered = data.get("conversation") or []
    legacy_tools = _legacy_tool_data(data)
    for bubble in ordered:
        if isinstance(bubble, dict):
            _bubble(session, bubble, legacy_tools)
    return session


def _bubble(session: Session, bubble: dict, legacy_tools: dict) -> None:
    time = str(bubble.get("createdAt") or "")
    session.seen_at(time)
    text = str(bubble.get("text") or "")
    if bubble.get("type") == 1:
        session.add("user", text, time)
        return
    if text:
        session.add("assistant", text, time)
    tool = bubble.get("toolFormerData") or legacy_tools.get(bubble.get("bubbleId"))
    if isinstance(tool, dict):
        if tool.get("status") == "error" and not tool.get("name"):
            session.skipped["failed tool call"] += 1
            return
        args = loads_maybe(tool.get("params")) or loads_maybe(tool.get("rawArgs")) or {}
        describe(session, str(tool.get("name") or "tool"), args, time)
        result = loads_maybe(tool.get("result"))
        if isinstance(result, dict) and result.get("output"):
            session.output(str(result["output"]))


def _legacy_tool_data(data: dict) -> dict:
    """Tool data of _v < 3 composers: capabilities[].data.bubbleDataMap (maybe a JSON string)."""
    out = {}
    for capability in data.get("capabilities") or []:
        mapping = loads_maybe(((capability or {}).get("data") or {}).get("bubbleDataMap"))
        if isinstance(mapping, dict):
            out.update(mapping)
    return out


def _workspace_projects(global_db: Path) -> dict[str, str]:
    """composerId -> folder, from the workspace DBs beside the global one."""
    out: dict[str, str] = {}
    storage = global_db.parent.parent / "workspaceStorage"
    for db in sorted(storage.glob("*/state.vscdb")) if storage.is_dir() else []:
        try:
            folder = json.loads((db.parent / "workspace.json").read_text()).get("folder", "")
            conn = open_readonly(db)
            try:
                row = conn.execute(
                    "SELECT value FROM ItemTable WHERE key = 'composer.composerData'"
                ).fetchone()
            finally:
                conn.close()
        except (OSError, ValueError, sqlite3.Error):
            continue
        data = _json(row[0]) if row else None
        path = unquote(urlparse(folder).path) if folder else ""
        for head in (data or {}).get("allComposers") or []:
            if isinstance(head, dict) and head.get("composerId") and path:
                out[head["composerId"]] = path
    return out


def _json(value) -> object:
    if isinstance(value, bytes):
        if not value.startswith(b"{"):
            return None  # binary (protobuf) values
        value = value.decode("utf-8", errors="replace")
    try:
        return json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _from_millis(millis: float) -> str:
    moment = datetime.fromtimestamp(millis / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
