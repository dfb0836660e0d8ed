"""One ingest run: discover sources, parse what changed, store Markdown memories.

Works on any :class:`~memvault.api.Memories` (the Vault itself, or the mount
of a running daemon), so the same code imports whether or not the vault is
unlocked.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..api import Memories
from ..errors import MemoryNotFound
from . import claude, codex, cursor
from .redact import redact
from .render import destination, render, slug
from .session import Session
from .sources import Source, discover
from .state import IngestState

SAVE_EVERY = 50
"""Sessions between two saves of the state (an interrupted import keeps its progress)."""


@dataclass
class Summary:
    sources: int = 0
    unchanged: int = 0
    new: int = 0
    updated: int = 0
    duplicates: int = 0
    messages: int = 0  # messages added by this run
    prompts: int = 0
    tool_calls: int = 0
    bytes_read: int = 0
    redactions: int = 0
    skipped: Counter = field(default_factory=Counter)
    planned: list[tuple[str, int, int, str]] = field(default_factory=list)  # dry run

    def lines(self) -> list[str]:
        out = [
            f"{self.sources} source(s) read: {self.new} new memory(ies), {self.updated} updated, "
            f"{self.unchanged} unchanged, {self.duplicates} duplicate(s) not stored again",
            f"{self.messages} new message(s) ({self.prompts} prompts, {self.tool_calls} tool "
            f"calls in what was imported); {self.bytes_read / 1e6:.1f} MB read",
            f"{self.redactions} credential(s) redacted",
        ]
        if self.skipped:
            reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
            out.append(f"skipped: {reasons}")
        return out


Progress = Callable[[int, int, str], None]


def collect(kinds: Iterable[str], roots: dict[str, list[Path]], skipped: Counter) -> list[Source]:
    sources: dict[str, Source] = {}
    for kind in kinds:
        for root in roots[kind]:
            for source in discover(kind, root, skipped):
                sources.setdefault(source.key, source)
    return list(sources.values())


def run(
    vault: Memories,
    sources: list[Source],
    *,
    dry_run: bool = False,
    redact_secrets: bool = True,
    progress: Progress | None = None,
) -> Summary:
    state = IngestState.load(vault)
    summary = Summary(sources=len(sources))
    for done, source in enumerate(sources, start=1):
        if progress:
            progress(done, len(sources), source.path.name)
        try:
            _one(vault, state, source, summary, dry_run=dry_run, redact_secrets=redact_secrets)
        except (OSError, sqlite3.Error) as exc:  # vanished, unreadable or locked: next run
            summary.skipped[f"unreadable source ({type(exc).__name__})"] += 1
        if not dry_run and done % SAVE_EVERY == 0:
            state.save(vault)
    if not dry_run:
        state.save(vault)
    return summary


def _one(vault: Memories, state: IngestState, source: Source, summary: Summary, **options) -> None:
    if source.kind == "cursor-db":
        fingerprints = cursor.composer_fingerprints(source.path)
        changed = [
            c
            for c, fp in fingerprints.items()
            if state.get(f"{source.key}#{c}").get("fingerprint") != fp
        ]
        summary.unchanged += len(fingerprints) - len(changed)
        if changed:
            summary.bytes_read += source.path.stat().st_size
            for session in cursor.parse_store(source.path, changed):
                key = f"{source.key}#{session.session_id}"
                _store(
                    vault, state, key, fingerprints[session.session_id], session, summary, **options
                )
        return
    stat = source.path.stat()
    fingerprint = f"{stat.st_size}:{stat.st_mtime_ns}"
    if state.get(source.key).get("fingerprint") == fingerprint:
        summary.unchanged += 1
        return
    summary.bytes_read += stat.st_size
    if source.kind == "context":
        _store_context(vault, state, source, fingerprint, summary, **options)
        return
    parser = {"claude": claude.parse, "codex": codex.parse, "cursor": cursor.parse_transcript}
    session = parser[source.kind](source.path)
    _store(vault, state, source.key, fingerprint, session, summary, **options)


def _store(
    vault: Memories, state, key, fingerprint, session: Session, summary: Summary, **options
) -> None:
    summary.skipped.update(session.skipped)
    if not session.entries:
        summary.skipped["session with no conversation"] += 1
        state.set(key, fingerprint=fingerprint, dest="", digest="", messages=0)
        return
    text = render(session)
    _write(
        vault,
        state,
        key,
        fingerprint,
        destination(session),
        text,
        session.messages,
        summary,
        **options,
    )
    summary.prompts += session.prompts
    summary.tool_calls += session.tool_calls


def _store_context(
    vault: Memories, state, source: Source, fingerprint: str, summary: Summary, **options
):
    root = source.root or source.path.parent
    relative = source.path.relative_to(root) if source.path.is_relative_to(root) else source.path
    parts = [slug(p.lstrip("."), 80) for p in relative.parts]
    if not parts[-1].endswith(".md"):
        parts[-1] += ".md"  # .cursorrules, *.mdc: indexed as Markdown
    dest = "/".join(["context", slug(root.name or "root"), *parts])
    body = source.path.read_bytes().decode("utf-8", errors="replace")
    imported = datetime.now(UTC).strftime("%Y-%m-%d")
    text = f"<!-- imported by memvault from {source.path} on {imported} -->\n\n{body}"
    _write(vault, state, source.key, fingerprint, dest, text, 0, summary, **options)


def _write(
    vault: Memories,
    state,
    key,
    fingerprint,
    dest,
    text,
    messages,
    summary,
    *,
    dry_run: bool,
    redact_secrets: bool,
) -> None:
    if redact_secrets:
        text, count = redact(text)
        summary.redactions += count
    data = text.encode()
    digest = hashlib.sha256(data).hexdigest()
    previous = state.get(key)
    summary.messages += max(0, messages - previous.get("messages", 0))
    if previous.get("digest") == digest and previous.get("dest") == dest:
        summary.unchanged += 1
    elif (owner := state.owner_of(dest, digest)) is not None and owner != key:
        summary.duplicates += 1
    else:
        if previous.get("dest"):
            summary.updated += 1
        else:
            summary.new += 1
        if dry_run:
            summary.planned.append((dest, len(data), messages, str(key.split(":", 1)[1])))
            return
        vault.put(dest, data)
        old = previous.get("dest")
        if old and old != dest:  # the session got a title: its memory moves
            with contextlib.suppress(MemoryNotFound):
                vault.delete(old)
    if not dry_run:
        state.set(key, fingerprint=fingerprint, dest=dest, digest=digest, messages=messages)
