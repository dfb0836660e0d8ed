"""Memories out of the vault and back in: a plaintext Markdown tree, or JSON Lines.

Both keep what a memory is: its path, its bytes, its mode and its
modification time, so that exporting a vault and importing the result into
a new one gives the same files. Export writes plaintext, so it writes only
into a new or empty directory, which it makes 0700 (the files inside keep
their modes: nobody else can reach them). Import reads everything first and
checks every path before it writes one: a conflict or a bad line leaves the
vault as it was.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .api import Memories
from .errors import EXIT_USAGE, MemvaultError, SourceNotFound, TooLarge, UsageError
from .vault import MAX_MEMORY_SIZE
from .vault.records import FILE, Meta


class NotEmpty(MemvaultError):
    """{0} is not empty: export writes plaintext only into a new or empty directory."""

    exit_code = EXIT_USAGE


class BadJsonLine(MemvaultError):
    """Line {1} of {0} is not a memory ({2}); nothing was imported."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Memory:
    """One memory as it travels: path in the vault, bytes, mode, mtime."""

    path: str
    data: bytes
    mode: int
    mtime_ns: int

    def to_json(self) -> str:
        doc: dict[str, object] = {"path": self.path}
        try:
            doc["content"] = self.data.decode("utf-8")
        except UnicodeDecodeError:  # kept exactly, whatever it is
            doc["content_base64"] = base64.b64encode(self.data).decode()
        doc.update(mode=f"{self.mode:o}", mtime_ns=self.mtime_ns)
        return json.dumps(doc, ensure_ascii=False)


def memories_of(
    vault: Memories, metas: Iterable[Meta], unreadable: list[str] | None = None
) -> Iterator[Memory]:
    """The files among ``metas`` (of ``vault.walk()``), read; with ``unreadable``,
    one that cannot be read is named there (with why) instead of stopping."""
    for meta in metas:
        if meta.type != FILE:
            continue
        try:
            yield Memory(meta.path, vault.get(meta.path), meta.mode, meta.mtime_ns)
        except MemvaultError as exc:
            if unreadable is None:
                raise
            unreadable.append(f"{meta.path} ({exc})")


def check_destination(dest: Path) -> None:
    """Plaintext goes only into a new or empty directory."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise NotEmpty(dest)


# -- export -------------------------------------------------------------------------


def export_tree(memories: Iterable[Memory], dest: Path) -> int:
    """Write ``memories`` below ``dest`` (new or empty, made 0700); how many."""
    check_destination(dest)
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    dest.chmod(0o700)
    count = 0
    for memory in memories:
        target = dest.joinpath(*memory.path.split("/"))
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(target, flags, 0o600), "wb") as f:
            f.write(memory.data)
            os.fchmod(f.fileno(), memory.mode)
        os.utime(target, ns=(memory.mtime_ns, memory.mtime_ns), follow_symlinks=False)
        count += 1
    return count


def export_jsonl(memories: Iterable[Memory], out) -> int:
    """One JSON object per line on the text stream ``out``; how many."""
    count = 0
    for memory in memories:
        out.write(memory.to_json() + "\n")
        count += 1
    return count


# -- import -------------------------------------------------------------------------


def read_source(source: Path, prefix: str = "") -> list[Memory]:
    """The memories a directory tree or a .jsonl file holds, under ``prefix``,
    all read and checked before anything is written."""
    if not source.exists():
        raise SourceNotFound(source)
    found = _read_tree(source) if source.is_dir() else _read_jsonl(source)
    base = paths.normalize(prefix, allow_root=True) if prefix else ""
    out: dict[str, Memory] = {}
    for memory in found:
        path = paths.normalize(paths.join(base, memory.path) if base else memory.path)
        if len(memory.data) > MAX_MEMORY_SIZE:
            raise TooLarge(path, len(memory.data), MAX_MEMORY_SIZE)
        if path in out:
            raise UsageError(f"{path} is given twice in {source}; nothing was imported.")
        out[path] = Memory(path, memory.data, memory.mode, memory.mtime_ns)
    return sorted(out.values(), key=lambda m: m.path)


def _read_tree(root: Path) -> Iterator[Memory]:
    """Regular files below ``root`` (symlinks are not followed, nor taken)."""
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            file = Path(directory, name)
            st = file.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue
            relative = file.relative_to(root).as_posix()
            yield Memory(relative, file.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)


def _read_jsonl(file: Path) -> Iterator[Memory]:
    """An `export --jsonl` file, or a Compartment export (`compartment export
    --plaintext`: one record a line, with "namespace" and "text")."""
    with open(file, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                if "path" not in doc and "text" in doc:
                    if not doc.get("pack"):  # a pack is Compartment's own seed content
                        yield _from_compartment(doc)
                    continue
                if "content_base64" in doc:
                    data = base64.b64decode(doc["content_base64"], validate=True)
                else:
                    data = doc["content"].encode("utf-8")
                mode = int(doc.get("mode", "600"), 8)
                yield Memory(str(doc["path"]), data, mode & 0o7777, int(doc["mtime_ns"]))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
                raise BadJsonLine(file, number, reason) from None


def _from_compartment(record: dict) -> Memory:
    """A Compartment record as a Markdown memory: its namespace a directory, its
    id the file name, what it knew of the record (tags, kind, provenance...)
    kept in front matter above the text, its creation time the mtime."""
    fields = {
        "compartment_id": record["id"],
        "kind": record.get("kind"),
        "tags": ", ".join(record.get("tags") or []),
        "importance": record.get("importance"),
        "created": record.get("created_local"),
        "source": record.get("source"),
        "expires": record.get("expires"),
        "superseded_by": record.get("superseded_by"),
        "quarantined": record.get("quarantined") or None,
        "provenance": json.dumps(record["provenance"]) if record.get("provenance") else None,
    }
    front = "".join(f"{k}: {v}\n" for k, v in fields.items() if v not in (None, ""))
    text = record["text"] if record["text"].endswith("\n") else record["text"] + "\n"
    namespace = str(record.get("namespace") or "main").replace("/", "-")
    return Memory(
        f"{namespace}/{record['id']}.md",
        f"---\n{front}---\n{text}".encode(),
        0o600,
        int(float(record["created"]) * 1e9),
    )


def plan(vault: Memories, memories: list[Memory]) -> tuple[list[Memory], list[str]]:
    """What to write (paths not in the vault yet), and the paths already in it
    with other content; one already there with the same content needs nothing."""
    new, clashing = [], []
    for memory in memories:
        if not vault.exists(memory.path):
            new.append(memory)
        elif vault.get(memory.path) != memory.data:
            clashing.append(memory.path)
    return new, clashing


def import_memories(vault: Memories, memories: Iterable[Memory]) -> None:
    """Store ``memories`` with their modes and mtimes."""
    for memory in memories:
        vault.put(memory.path, memory.data, mode=memory.mode, mtime_ns=memory.mtime_ns)
