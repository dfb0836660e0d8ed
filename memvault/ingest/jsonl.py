"""Streaming JSONL reading that never stops at a bad line.

Lines are read one at a time (no length cap, no whole-file buffer). A line
that is not a JSON object is counted as "corrupt line" and skipped; an
unterminated last line that does not parse is a record still being written:
it is counted as "incomplete last line" and read again on the next run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

CORRUPT = "corrupt line"
INCOMPLETE = "incomplete last line"


_CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_CLAUDE_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
}


def sniff(path: Path, probe_lines: int = 20) -> str | None:
    """Which agent wrote this JSONL file ('claude', 'codex', 'cursor'), from its first records."""
    try:
        with open(path, "rb") as f:
            for _ in range(probe_lines):
                line = f.readline()
                if not line:
                    return None
                try:
                    record = json.loads(line)
                except (ValueError, UnicodeDecodeError):
                    continue
                if not isinstance(record, dict):
                    continue
                kind = record.get("type")
                if "payload" in record or kind in _CODEX_TYPES or "record_type" in record:
                    return "codex"
                if "role" in record and "message" in record and "type" not in record:
                    return "cursor"
                if "sessionId" in record or kind in _CLAUDE_TYPES:
                    return "claude"
    except OSError:
        return None
    return None


def records(path: Path, skipped: Counter) -> Iterator[dict]:
    with open(path, "rb") as f:
        for raw in f:
            complete = raw.endswith(b"\n")
            text = raw.strip()
            if not text:
                continue
            try:
                value = json.loads(text)
            except (ValueError, UnicodeDecodeError):
                skipped[CORRUPT if complete else INCOMPLETE] += 1
                continue
            if not isinstance(value, dict):
                skipped[CORRUPT] += 1
                continue
            yield value
