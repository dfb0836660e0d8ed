"""Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl), FORMATS.md §2.

Codex writes most turns twice (response_item and event_msg): prompts come
from event_msg/user_message only (response_item user messages also carry
injected AGENTS.md and environment context), answers and reasoning summaries
from response_item only. Encrypted reasoning and compaction's
replacement_history are never kept. Pre-envelope (2025) lines are read too.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from .jsonl import records
from .session import Session
from .tools import describe, loads_maybe

_ROLLOUT_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
_IGNORED_EVENTS = {
    "agent_message",
    "agent_reasoning",
    "agent_reasoning_raw_content",
    "token_count",
    "task_started",
    "task_complete",
    "turn_started",
    "turn_complete",
    "context_compacted",
    "exec_command_end",
    "web_search_end",
    "mcp_tool_call_end",
    "thread_settings_applied",
    "item_completed",
    "image_generation_end",
    "sub_agent_activity",
    "thread_goal_updated",
    "collab_agent_spawn_end",
    "entered_review_mode",
    "exited_review_mode",
}
_IGNORED_TYPES = {"turn_context", "world_state"}


def parse(path: Path) -> Session:
    skipped: Counter = Counter()
    found = _ROLLOUT_ID.search(path.name.removesuffix(".jsonl"))
    session = Session("codex", found.group(1) if found else path.stem, skipped=skipped)
    session.title = _thread_names(path).get(session.session_id, "")
    for line in records(path, skipped):
        time = str(line.get("timestamp") or "")
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):  # pre-envelope format: the line is the item
            kind, payload = _legacy(line)
        session.seen_at(time)
        if kind == "session_meta":
            _meta(session, payload)
        elif kind == "turn_context":
            session.project = session.project or str(payload.get("cwd") or "")
        elif kind == "response_item":
            _item(session, payload, time)
        elif kind == "event_msg":
            _event(session, payload, time)
        elif kind == "compacted":
            session.add("event", "context compacted", time)
        elif kind in _IGNORED_TYPES or kind == "state":
            continue
        else:
            skipped["unknown record type"] += 1
    return session


def _legacy(line: dict) -> tuple[str, dict]:
    if line.get("record_type") == "state":
        return "state", line
    if "id" in line and "type" not in line:  # the bare header line
        return "session_meta", line
    return "response_item", line


def _meta(session: Session, payload: dict) -> None:
    session.session_id = str(payload.get("id") or session.session_id)
    session.project = str(payload.get("cwd") or session.project)
    session.branch = str((payload.get("git") or {}).get("branch") or session.branch)
    session.seen_at(payload.get("timestamp"))
    source = payload.get("source")
    if isinstance(source, dict):
        spawn = (source.get("subagent") or {}).get("thread_spawn") or {}
        session.parent_id = str(spawn.get("parent_thread_id") or session.parent_id)
    session.parent_id = str(payload.get("parent_thread_id") or session.parent_id)


def _item(session: Session, item: dict, time: str) -> None:
    kind = item.get("type")
    if kind == "message":
        if item.get("role") == "assistant":
            text = "\n".join(
                c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)
            )
            session.add("assistant", text, time)
        return  # user/developer items repeat prompts or carry injected context
    if kind == "reasoning":
        summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
        session.add("reasoning", "\n\n".join(summary), time)  # encrypted_content is never kept
    elif kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments") if kind == "function_call" else item.get("input")
        name = item.get("name", "")
        if item.get("namespace"):
            name = f"{item['namespace']}{name}"
        describe(session, name, loads_maybe(args) if kind == "function_call" else args, time)
    elif kind == "local_shell_call":
        describe(session, "local_shell", (item.get("action") or {}), time)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        session.output(_output_text(item.get("output")))
    elif kind == "web_search_call":
        action = item.get("action") or {}
        query = action.get("query") or ", ".join(action.get("queries") or []) or action.get("url")
        describe(session, "web_search", {"query": query or ""}, time)
    elif kind in ("compaction", "compaction_summary", "context_compaction", "agent_message"):
        session.skipped["encrypted item (not kept)"] += 1
    else:
        session.skipped["unknown record type"] += 1


def _event(session: Session, event: dict, time: str) -> None:
    kind = event.get("type")
    if kind == "user_message":
        session.add("user", str(event.get("message") or ""), time)
    elif kind == "patch_apply_end":
        for file in event.get("changes") or {}:
            session.edited(file)
    elif kind == "turn_aborted":
        session.add("event", f"turn aborted ({event.get('reason', 'unknown')})", time)
    elif kind == "thread_rolled_back":
        session.add("event", f"rolled back {event.get('num_turns', '?')} turn(s)", time)
    elif kind not in _IGNORED_EVENTS:
        session.skipped["unknown record type"] += 1


def _output_text(output) -> str:
    output = loads_maybe(output) if isinstance(output, str) and output[:1] == "{" else output
    if isinstance(output, dict):
        output = output.get("output", json.dumps(output))
    if isinstance(output, list):
        output = "\n".join(
            str(o.get("text", "[image]" if "image" in str(o.get("type")) else ""))
            for o in output
            if isinstance(o, dict)
        )
    return str(output or "")


def _thread_names(path: Path) -> dict[str, str]:
    """Thread names from $CODEX_HOME/session_index.jsonl, if the rollout sits under one."""
    for parent in list(path.parents)[:6]:
        index = parent / "session_index.jsonl"
        if index.is_file():
            names = {}
            for entry in records(index, Counter()):
                if entry.get("id") and entry.get("thread_name"):
                    names[str(entry["id"])] = str(entry["thread_name"])  # the last one wins
            return names
    return {}
