"""`memvault serve`: the vault's tools for agents, as a Model Context Protocol
server over stdio (the official `mcp` SDK).

Every tool goes through the running daemon's mount (MountedVault), so the
daemon stays the only writer and a query is answered by its ready index.
The server never unlocks anything and never prompts (standard input is the
protocol): on a locked vault each tool answers that it is locked, and the
server stays up for when it is unlocked. A failure is one sentence in a tool
error, never a traceback; nothing but the protocol is written to stdout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from .. import paths
from ..errors import MemvaultError
from ..fs import control
from ..fs.lifecycle import serving_daemon
from ..mounted import MountedVault
from ..search import MAX_K, Query
from ..vault.records import DIRECTORY, FILE, Meta

LOCKED = "The vault is locked; run `memvault unlock` and try again."
RECENT_MAX = 100

INSTRUCTIONS = """\
memvault is the user's encrypted memory vault: Markdown memories kept
between sessions. Search it before answering questions about earlier work,
decisions, people or preferences (`search`, then `read` the best hits). Save
durable facts, decisions and lessons as short Markdown files (`write` or
`append`), one topic per file, in a directory per project (for example
`projects/<name>/decisions.md`). Paths are relative to the vault root.
`forget` destroys a memory for good."""


class Hit(BaseModel):
    rank: int
    path: str = Field(description="the memory's path in the vault")
    score: float = Field(description="0-1: the fused evidence of words and meaning, 1 = best")
    heading: str = Field(description="the title, date or heading above the matching lines")
    start_line: int
    end_line: int
    snippet: str
    words: list[str] = Field(description="the query's words found there (stemmed)")
    cosine: float | None = Field(description="similarity of meaning, if embedded yet")
    also: list[list[int]] = Field(description="line ranges of the file's other matching parts")


class SearchResults(BaseModel):
    query: str
    results: list[Hit]


class Text(BaseModel):
    path: str
    content: str
    start_line: int
    end_line: int
    total_lines: int


class Entry(BaseModel):
    path: str
    type: str = Field(description="file, directory or symlink")
    size: int
    modified: str = Field(description="ISO 8601, UTC")


class Listing(BaseModel):
    entries: list[Entry]


class Done(BaseModel):
    path: str
    detail: str


class Tools:
    """The tool implementations, for one vault (found by its path at each call).

    A scoped server (``subtree``) sees only that directory, as its root: paths
    in and out are relative to it, and searches stay inside it. A read-only
    one has no tool that writes (and these refuse if called)."""

    def __init__(
        self, vault: Path, caller: str | None = None, subtree: str = "", read_only: bool = False
    ) -> None:
        self.vault = vault
        self.caller = caller  # the agent it speaks for, in the audit trail
        self._named: set[int] = set()  # daemons told so
        self.subtree = paths.normalize(subtree, allow_root=True)
        self.read_only = read_only

    @contextmanager
    def memories(self, *, writing: bool = False) -> Iterator[MountedVault]:
        """The live mount, or a ToolError saying what to do; memvault errors become
        tool errors with their one sentence."""
        if writing and self.read_only:
            raise ToolError("This memory view is read-only.")
        record = serving_daemon(self.vault)
        if record is None:
            raise ToolError(LOCKED)
        try:
            if self.caller and record.pid not in self._named:
                # The daemon learns this process's pid from the socket itself.
                control.ask(record.control_path, "caller", pid=record.pid, name=self.caller)
                self._named.add(record.pid)
            with MountedVault(record) as mounted:
                yield mounted
        except MemvaultError as exc:
            raise ToolError(self._scoped(str(exc))) from None

    def vault_path(self, path: str, mounted: MountedVault, *, root: bool = False) -> str:
        """The vault path of a path as the agent gave it: relative to the view's
        root, or absolute under the mount (then it must lie inside the view)."""
        given, mountpoint = path.strip(), str(mounted.root)
        absolute = given == mountpoint or given.startswith(mountpoint + "/")
        rel = given[len(mountpoint) :] if absolute else given
        inside = self.subtree and not absolute
        try:
            full = paths.normalize(
                f"{self.subtree}/{rel.lstrip('/')}" if inside else rel, allow_root=True
            )
            if self.subtree and not paths.is_within(full, self.subtree):
                raise ToolError(f"{path} is outside this memory view.")
            if not root and full == self.subtree:
                raise ToolError(f"{path or 'The path'} names a directory, not a memory.")
            return full
        except MemvaultError as exc:
            raise ToolError(self._scoped(str(exc))) from None

    def shown(self, full: str) -> str:
        """A vault path as the agent sees it (relative to the view)."""
        return full[len(self.subtree) + 1 :] if self.subtree else full

    def _scoped(self, message: str) -> str:
        """Errors name paths as the agent knows them."""
        if not self.subtree:
            return message
        return message.replace(f"{self.subtree}/", "")

    # -- the tools -----------------------------------------------------------------

    def search(self, query: str, k: int = 10, path_prefix: str = "") -> SearchResults:
        with self.memories() as mounted:
            prefix = self.vault_path(path_prefix, mounted, root=True)
            doc = json.loads(mounted.search(Query(query, k, prefix, as_json=True)))
        if "error" in doc:
            raise ToolError(f"Search is unavailable: {doc['error']}")
        hits = [
            Hit(**{f: r[f] for f in Hit.model_fields} | {"path": self.shown(r["path"])})
            for r in doc["results"]
        ]
        return SearchResults(query=doc["query"], results=hits)

    def read(self, path: str, start_line: int = 1, end_line: int | None = None) -> Text:
        with self.memories() as mounted:
            norm = self.vault_path(path, mounted)
            text = mounted.get(norm).decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ToolError("Lines are numbered from 1, and end_line cannot be before start_line.")
        last = len(lines) if end_line is None else min(end_line, len(lines))
        content = "".join(lines[start_line - 1 : last])
        return Text(
            path=self.shown(norm),
            content=content,
            start_line=start_line,
            end_line=max(last, start_line - 1),
            total_lines=len(lines),
        )

    def write(self, path: str, content: str) -> Done:
        with self.memories(writing=True) as mounted:
            norm = self.vault_path(path, mounted)
            existed = mounted.exists(norm)
            meta = mounted.put(norm, content.encode())
        verb = "replaced" if existed else "created"
        return Done(path=self.shown(norm), detail=f"{verb}: {meta.size} bytes")

    def append(self, path: str, content: str) -> Done:
        with self.memories(writing=True) as mounted:
            norm = self.vault_path(path, mounted)
            meta = mounted.append(norm, content.encode())
        return Done(path=self.shown(norm), detail=f"appended: now {meta.size} bytes")

    def list(self, directory: str = "") -> Listing:
        with self.memories() as mounted:
            norm = self.vault_path(directory, mounted, root=True)
            found = mounted.list(norm)
        return Listing(entries=[self._entry(meta) for _, meta in found])

    def move(self, source: str, destination: str) -> Done:
        with self.memories(writing=True) as mounted:
            src = self.vault_path(source, mounted)
            dst = self.vault_path(destination, mounted)
            mounted.rename(src, dst)
        return Done(path=self.shown(dst), detail=f"moved from {self.shown(src)}")

    def forget(self, path: str, recursive: bool = False) -> Done:
        with self.memories(writing=True) as mounted:
            norm = self.vault_path(path, mounted)
            count = mounted.delete(norm, recursive=recursive)
        return Done(
            path=self.shown(norm), detail=f"crypto-shredded {count} record(s): gone for good"
        )

    def recent(self, limit: int = 10, path_prefix: str = "") -> Listing:
        if not 1 <= limit <= RECENT_MAX:
            raise ToolError(f"limit must be between 1 and {RECENT_MAX}.")
        with self.memories() as mounted:
            prefix = self.vault_path(path_prefix, mounted, root=True)
            found = [m for m in mounted.walk(prefix) if m.type == FILE]
        found.sort(key=lambda m: m.mtime_ns, reverse=True)
        return Listing(entries=[self._entry(meta) for meta in found[:limit]])

    def _entry(self, meta: Meta) -> Entry:
        kind = "directory" if meta.type == DIRECTORY else "file" if meta.type == FILE else "symlink"
        when = datetime.fromtimestamp(meta.mtime_ns / 1e9, UTC).isoformat(timespec="seconds")
        return Entry(path=self.shown(meta.path), type=kind, size=meta.size, modified=when)


READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
CHANGES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTROYS = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)

Path_ = Annotated[str, Field(description="a memory's path, relative to the vault root")]


class _Server(MCPServer):
    """Arguments that fail the schema are one sentence too (the SDK would send
    pydantic's multi-line report)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg'].lower()}"
                for e in exc.__cause__.errors()
            )
            raise ToolError(f"Bad arguments for {name} ({problems}).") from None


def build_server(
    vault: Path, caller: str | None = None, *, subtree: str = "", read_only: bool = False
) -> MCPServer:
    """The MCP server for ``vault`` (its tools described for a model to choose well),
    seeing only ``subtree`` if given; a read-only one has no tool that writes."""
    tools = Tools(vault, caller, subtree, read_only)
    server = _Server("memvault", instructions=INSTRUCTIONS)

    def writing_tool(**options):
        """server.tool, except on a read-only view (the model never sees these)."""
        return (lambda fn: fn) if read_only else server.tool(**options)

    @server.tool(
        name="search",
        annotations=READ_ONLY,
        description="Find memories by words and meaning (hybrid ranking). Returns the best "
        "files first, each with its matching lines, a snippet and a score in [0, 1]. Use "
        "before answering anything that earlier sessions may have settled.",
    )
    def search(
        query: Annotated[str, Field(description="a few key words or a question")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many files")] = 10,
        path_prefix: Annotated[str, Field(description="only under this directory")] = "",
    ) -> SearchResults:
        return tools.search(query, k, path_prefix)

    @server.tool(
        name="read",
        annotations=READ_ONLY,
        description="Read a memory, whole or a range of its lines (numbered from 1).",
    )
    def read(path: Path_, start_line: int = 1, end_line: int | None = None) -> Text:
        return tools.read(path, start_line, end_line)

    @writing_tool(
        name="write",
        annotations=CHANGES,
        description="Create a memory, or replace its whole content (atomically). Missing "
        "directories are created. Use Markdown; one topic per file.",
    )
    def write(path: Path_, content: str) -> Done:
        return tools.write(path, content)

    @writing_tool(
        name="append",
        annotations=CHANGES,
        description="Add text at the end of a memory (created if missing): for logs, "
        "decisions and lessons that accumulate.",
    )
    def append(path: Path_, content: str) -> Done:
        return tools.append(path, content)

    @server.tool(
        name="list",
        annotations=READ_ONLY,
        description="List a directory of the vault (the root if none is given).",
    )
    def list_(directory: str = "") -> Listing:
        return tools.list(directory)

    @writing_tool(
        name="move",
        annotations=CHANGES,
        description="Move or rename a memory or a directory (replacing a file at the destination).",
    )
    def move(source: Path_, destination: Path_) -> Done:
        return tools.move(source, destination)

    @writing_tool(
        name="forget",
        annotations=DESTROYS,
        description="Crypto-shred a memory (or a directory with recursive=true): its key "
        "is destroyed and its bytes leave the vault file. It cannot be undone; only "
        "use it when the user asks to forget something.",
    )
    def forget(path: Path_, recursive: bool = False) -> Done:
        return tools.forget(path, recursive)

    @server.tool(
        name="recent",
        annotations=READ_ONLY,
        description="The memories changed most recently, newest first: what the last "
        "sessions worked on.",
    )
    def recent(
        limit: Annotated[int, Field(ge=1, le=RECENT_MAX)] = 10, path_prefix: str = ""
    ) -> Listing:
        return tools.recent(limit, path_prefix)

    return server
