"""The deterministic merge: from every device's changes to one tree.

Each change (an Op) names a memory (a random id shared by all devices), the
version it makes (a hybrid logical clock reading and the device that made
it) and the version it was made on (its base: what that device had of the
memory then, None for a new one). Per memory, the versions no other change
was made on are its *heads*: one head means the history is linear; several
mean changes made without seeing each other. The latest head (clock, then
device id) is the memory; every other head that is not a deletion survives
as a conflict copy: a memory of its own, whose id is derived from the
memory and the losing version (every device derives the same), named
``name (conflict from <device> <date>).md`` next to it. A conflict copy is
edited, renamed or deleted like any memory; a later change that saw both
heads leaves the losing head where it is (still a head), so the copy stays
until someone deletes it.

Two memories may then claim one path (both devices made ``notes.md``); the
later keeps it and the other takes a conflict name. A file where another
file needs a directory takes a conflict name too. The result depends on the
set of changes only, never on the order they arrived in (tested).
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .. import paths

FILE, DIRECTORY = "file", "dir"


@dataclass(frozen=True, order=True)
class Version:
    """A version of a memory: a hybrid logical clock reading, then the device
    (a total order every device agrees on)."""

    hlc: int
    device: str

    def __str__(self) -> str:
        return f"{self.hlc:016x}.{self.device}"

    @classmethod
    def parse(cls, text: str) -> Version:
        hlc, _, device = text.partition(".")
        return cls(int(hlc, 16), device)

    @property
    def wall_ms(self) -> int:
        return self.hlc >> 16


@dataclass(frozen=True)
class Op:
    """One change of one memory; ``path`` and ``kind`` are None for a deletion
    and for a version whose key is gone (a shredded one: never a head)."""

    memory: str
    version: Version
    base: Version | None
    deleted: bool
    kind: str | None = None
    path: str | None = None
    payload: Any = None
    """What the caller needs to write the memory (its sealed content); carried along."""


@dataclass(frozen=True)
class Placed:
    """A memory of the merged tree, where it goes."""

    memory: str
    version: Version
    kind: str
    path: str
    op: Op


def conflict_id(memory: str, version: Version) -> str:
    """The id of the conflict copy a losing version becomes (the same on every device)."""
    digest = hashlib.blake2b(f"{memory}/{version}".encode(), digest_size=16, person=b"mv.conflict")
    return digest.hexdigest()


def conflict_name(path: str, device_name: str, wall_ms: int, attempt: int = 0) -> str:
    """``dir/name (conflict from laptop 2026-12-04 1432).md``; a number after
    the date if that is taken too."""
    directory, _, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    when = time.strftime("%Y-%m-%d %H%M", time.gmtime(wall_ms / 1000))
    tag = f" (conflict from {device_name} {when}{f' {attempt}' if attempt else ''})"
    renamed = f"{stem}{tag}{'.' + ext if ext else ''}"
    return f"{directory}/{renamed}" if directory else renamed


def heads(ops: Iterable[Op]) -> list[Op]:
    """The versions of one memory that no other change was made on, latest first."""
    ops = list(ops)
    built_on = {op.base for op in ops if op.base is not None}
    return sorted((op for op in ops if op.version not in built_on), key=_order, reverse=True)


def _order(op: Op) -> Version:
    return op.version


def current(ops: Iterable[Op], device_names: Mapping[str, str]) -> dict[str, Op]:
    """Every memory that exists after ``ops``, by id, conflict copies included:
    the winning head of each (a put), before any path is placed."""
    by_memory: dict[str, dict[Version, Op]] = defaultdict(dict)
    for op in ops:
        by_memory[op.memory].setdefault(op.version, op)
    todo = list(by_memory)
    result: dict[str, Op] = {}
    seen_copies: set[str] = set()
    while todo:
        memory = todo.pop()
        ranked = heads(by_memory[memory].values())
        winner = ranked[0]
        if winner.deleted:
            result.pop(memory, None)
        else:
            result[memory] = winner
        for loser in ranked[1:]:
            if loser.deleted or loser.path is None or loser.kind == DIRECTORY:
                continue  # a directory is the same wherever it was made
            copy_id = conflict_id(memory, loser.version)
            if copy_id in seen_copies:
                continue
            seen_copies.add(copy_id)
            name = device_names.get(loser.version.device, loser.version.device[:8])
            copy = replace(
                loser,
                memory=copy_id,
                base=None,
                path=conflict_name(loser.path, name, loser.version.wall_ms),
            )
            by_memory[copy_id].setdefault(copy.version, copy)
            todo.append(copy_id)
    return result


def place(memories: Mapping[str, Op], device_names: Mapping[str, str]) -> dict[str, Placed]:
    """Give every memory a path of its own: the latest version first keeps its
    path; a later claimant of a taken path (or of a file's path as a
    directory, or the reverse) takes a conflict name."""
    files: set[str] = set()
    dirs: set[str] = set()
    placed: dict[str, Placed] = {}
    for op in sorted(memories.values(), key=_order, reverse=True):
        assert op.path is not None and op.kind is not None
        name = device_names.get(op.version.device, op.version.device[:8])
        path, attempt = op.path, 0
        while _taken(path, op.kind, files, dirs):
            path = _renamed_clear(op.path, op.kind, files, dirs, name, op.version.wall_ms, attempt)
            attempt += 1
        if op.kind == DIRECTORY:
            dirs.add(path)
        else:
            files.add(path)
        dirs.update(paths.ancestors(path))
        placed[op.memory] = Placed(op.memory, op.version, op.kind, path, op)
    return placed


def _taken(path: str, kind: str, files: set[str], dirs: set[str]) -> bool:
    if path in files or any(a in files for a in paths.ancestors(path)):
        return True
    return kind != DIRECTORY and path in dirs


def _renamed_clear(
    path: str, kind: str, files: set[str], dirs: set[str], name: str, wall_ms: int, attempt: int
) -> str:
    """A conflict name for ``path``: the component where a file blocks it, or the
    last one."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in files:  # a file where this path needs a directory
            head = conflict_name("/".join(parts[:i]), name, wall_ms, attempt)
            return "/".join([head, *parts[i:]])
    return conflict_name(path, name, wall_ms, attempt)


def merge(ops: Iterable[Op], device_names: Mapping[str, str]) -> dict[str, Placed]:
    """The tree every device converges to, by memory id."""
    return place(current(ops, device_names), device_names)
