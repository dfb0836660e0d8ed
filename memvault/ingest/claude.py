"""Claude Code transcripts (~/.claude/projects/<slug>/*.jsonl), FORMATS.md §1.

Prompts are user records with text and no tool_result, minus meta records,
command wrappers and compaction summaries (shown as summaries, never as
prompts). Assistant lines are one content block each, merged by message id.
Thinking is not kept (often empty; the signature is opaque).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from .jsonl import records
from .session import Session
from .tools import describe

_WRAPPERS = re.compile(
    r"^\s*<(command-name|command-message|command-args|local-command-stdout|"
    r"local-command-caveat|local-command-stderr)>",
    re.S,
)
_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_BOOKKEEPING = {
    "file-history-snapshot",
    "progress",
    "queue-operation",
    "attachment",
    "pr-link",
    "last-prompt",
    "permission-mode",
    "agent-setting",
    "bridge-session",
    "mode",
    "worktree-state",
}


def parse(path: Path) -> Session:
    skipped: Counter = Counter()
    session = Session("claude", path.stem, skipped=skipped)
    if path.parent.name == "subagents":  # <session>/subagents/agent-<id>.jsonl
        session.parent_id = path.parent.parent.name
    last_message_id = None
    for record in records(path, skipped):
        kind = record.get("type")
        session.project = session.project or record.get("cwd") or ""  # where it started
        session.branch = session.branch or record.get("gitBranch") or ""
        time = record.get("timestamp") or ""
        if kind in ("user", "assistant", "system"):
            session.seen_at(time)
            if record.get("agentId") and record.get("sessionId") != path.stem:
                session.parent_id = session.parent_id or record.get("sessionId", "")
        if kind == "user":
            last_message_id = None
            _user(session, record, time)
        elif kind == "assistant":
            message = record.get("message") or {}
            message_id = message.get("id")
            if record.get("isApiErrorMessage"):
                session.add("event", "API error: " + _text_of(message.get("content")), time)
                continue
            for block in _blocks(message.get("content")):
                continues = message_id is not None and message_id == last_message_id
                _assistant_block(session, block, time, continues=continues)
                last_message_id = message_id
        elif kind == "system":
            _system(session, record, time)
        elif kind == "summary":
            session.title = session.title or str(record.get("summary") or "")
        elif kind in ("ai-title", "custom-title", "agent-name"):
            title = record.get("customTitle") or record.get("aiTitle") or record.get("agentName")
            if title and (kind == "custom-title" or not session.title):
                session.title = str(title)
        elif kind in _BOOKKEEPING:
            if kind == "file-history-snapshot":
                backups = (record.get("snapshot") or {}).get("trackedFileBackups") or {}
                for file in backups:
                    session.edited(file)
        else:
            skipped["unknown record type"] += 1
    return session


def _blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text_of(content) -> str:
    return "\n".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


def _user(session: Session, record: dict, time: str) -> None:
    content = (record.get("message") or {}).get("content")
    if record.get("isCompactSummary"):
        session.add("summary", _text_of(content), time)
        return
    if record.get("isMeta"):
        session.skipped["meta record"] += 1
        return
    blocks = _blocks(content)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    for result in results:
        output = result.get("content")
        if isinstance(output, list):
            output = "\n".join(str(b.get("text", "")) for b in output if isinstance(b, dict))
        output = _REMINDER.sub("", str(output or ""))
        session.output(("error: " if result.get("is_error") else "") + output)
    if results:
        return
    text = _REMINDER.sub("", _text_of(content)).strip()
    if any(b.get("type") == "image" for b in blocks):
        text = (text + "\n\n[image]").strip()
    if not text:
        return
    if _WRAPPERS.match(text):
        name = _COMMAND_NAME.search(text)
        if name:
            args = _COMMAND_ARGS.search(text)
            shown = name.group(1).strip() + (" " + args.group(1).strip() if args else "")
            session.add("event", f"slash command `{shown.strip()}`", time)
        return
    if text.startswith("[Request interrupted by user"):
        session.add("event", "interrupted by the user", time)
        return
    session.add("user", text, time)


def _assistant_block(session: Session, block: dict, time: str, *, continues: bool) -> None:
    kind = block.get("type")
    if kind == "text" and block.get("text", "").strip():
        if continues:
            session.add_to_answer(block["text"])
        else:
            session.add("assistant", block["text"], time)
    elif kind == "tool_use":
        describe(session, block.get("name", ""), block.get("input") or {}, time)
    elif kind in ("thinking", "redacted_thinking"):
        session.skipped["thinking block (not kept)"] += 1


def _system(session: Session, record: dict, time: str) -> None:
    subtype = record.get("subtype")
    if subtype == "compact_boundary":
        meta = record.get("compactMetadata") or {}
        tokens = meta.get("preTokens")
        session.add(
            "event",
            f"context compacted ({meta.get('trigger', 'unknown')} trigger"
            + (f", {tokens:,} tokens before)" if isinstance(tokens, int) else ")"),
            time,
        )
    elif subtype == "local_command":
        text = _COMMAND_NAME.search(str(record.get("content", "")))
        if text:
            session.add("event", f"slash command `{text.group(1).strip()}`", time)
