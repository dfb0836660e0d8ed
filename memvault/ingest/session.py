"""What every agent's history is turned into: one Session per conversation.

The parsers fill a Session from their own format; the renderer turns it into
a Markdown memory. Nothing here knows about any agent.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex", "cursor": "Cursor"}
TOOL_OUTPUT_LIMIT = 600
"""Characters of a tool's output kept in the memory (the rest is trimmed)."""
MAX_LISTED = 40
"""At most this many files, commands or decisions in a session's header."""

_DECISION = re.compile(
    r"\b(decided|decision|we will|we'll|let's go with|going with|chose|agreed|"
    r"from now on|always use|never use|instead of)\b",
    re.IGNORECASE,
)


@dataclass
class Turn:
    """One turn of the conversation as it will be shown."""

    role: str  # "user", "assistant", "tool", "output", "reasoning", "summary", "event"
    text: str
    time: str = ""  # ISO-8601, UTC when known


@dataclass
class Session:
    agent: str  # claude | codex | cursor
    session_id: str
    project: str = ""
    branch: str = ""
    title: str = ""
    started: str = ""
    ended: str = ""
    parent_id: str = ""  # for subagents
    entries: list[Turn] = field(default_factory=list)
    files_edited: dict[str, None] = field(default_factory=dict)  # ordered sets
    files_read: dict[str, None] = field(default_factory=dict)
    commands: dict[str, None] = field(default_factory=dict)
    decisions: dict[str, None] = field(default_factory=dict)
    prompts: int = 0
    answers: int = 0
    tool_calls: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> lines

    @property
    def display_title(self) -> str:
        """The agent's title, else the first prompt's first line."""
        if self.title:
            return " ".join(self.title.split())
        first = next((e.text for e in self.entries if e.role == "user"), "")
        line = next((x.strip("# ") for x in first.splitlines() if x.strip()), "")
        return line[:80]

    @property
    def messages(self) -> int:
        return self.prompts + self.answers + self.tool_calls

    def seen_at(self, timestamp: str | None) -> None:
        if not timestamp:
            return
        if not self.started or timestamp < self.started:
            self.started = timestamp
        if timestamp > self.ended:
            self.ended = timestamp

    def add(self, role: str, text: str, time: str = "") -> None:
        text = text.strip("\n")
        if not text.strip():
            return
        self.entries.append(Turn(role, text, time))
        if role == "user":
            self.prompts += 1
        elif role == "assistant":
            self.answers += 1
        if role in ("user", "assistant"):
            self._note_decisions(text)

    def add_to_answer(self, text: str) -> None:
        """Continue the last assistant entry (one API message split over lines)."""
        if self.entries and self.entries[-1].role == "assistant":
            self.entries[-1].text += "\n\n" + text.strip("\n")
            self._note_decisions(text)
        else:
            self.add("assistant", text)

    def tool(self, text: str, time: str = "") -> None:
        self.tool_calls += 1
        self.entries.append(Turn("tool", text, time))

    def output(self, text: str) -> None:
        if text.strip():
            self.entries.append(Turn("output", trim(text)))

    def edited(self, path: str) -> None:
        if path:
            self.files_edited[path] = None

    def read(self, path: str) -> None:
        if path:
            self.files_read[path] = None

    def ran(self, command: str) -> None:
        command = " ".join(command.split()) if "\n" not in command.strip() else command.strip()
        if command:
            self.commands[command] = None

    def _note_decisions(self, text: str) -> None:
        if len(self.decisions) >= MAX_LISTED:
            return
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
            sentence = sentence.strip(" -*#>\t")
            if 12 <= len(sentence) <= 240 and _DECISION.search(sentence):
                self.decisions[sentence] = None


def trim(text: str, limit: int = TOOL_OUTPUT_LIMIT) -> str:
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n… ({len(text) - limit:,} more characters trimmed)"
