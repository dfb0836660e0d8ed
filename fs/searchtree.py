"""The virtual, read-only ``search/`` directory of a mount.

Looking up ``search/<query>`` runs the query; the rendered result is cached
for a few seconds so that ``stat`` reports its true size and ``read`` returns
the same bytes, and files are opened with direct_io so no stale page is
served. ``search/<query>.json`` is the same as JSON. Options follow a ``?``
in the name, URL-style: ``search/deploy steps?k=3&in=projects`` (``k``: how
many results, default 10, at most 50; ``in``: a path prefix). Percent-escapes
are decoded, so ``%2F`` is a ``/`` in a prefix.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from urllib.parse import parse_qs, unquote

from ..search import Result

RESULT_TTL_S = 5.0
MAX_RECENT = 64
DEFAULT_K = 10
MAX_K = 50


class QueryError(ValueError):
    """A search file name that cannot be understood."""


@dataclass(frozen=True)
class Query:
    text: str
    k: int
    prefix: str
    as_json: bool


def parse(name: str) -> Query:
    raw, _, options = name.partition("?")
    as_json = False
    if raw.endswith(".json"):
        raw, as_json = raw[: -len(".json")], True
    text = unquote(raw).strip()
    params = parse_qs(options, keep_blank_values=True)
    if options.endswith(".json"):
        as_json = True
        params = parse_qs(options[: -len(".json")], keep_blank_values=True)
    try:
        k = int(params.get("k", [DEFAULT_K])[0])
    except ValueError:
        raise QueryError("k must be a number") from None
    if not text or not 1 <= k <= MAX_K:
        raise QueryError("empty query or k out of range")
    prefix = unquote(params.get("in", [""])[0]).strip("/")
    return Query(text, k, prefix, as_json)


def render(query: Query, results: list[Result], mountpoint: str) -> bytes:
    if query.as_json:
        doc = {
            "query": query.text,
            "k": query.k,
            "in": query.prefix,
            "results": [{**asdict(r), "location": _location(mountpoint, r.path)} for r in results],
        }
        return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode()
    scope = f" in {query.prefix}/" if query.prefix else ""
    if not results:
        return f"# Search: {query.text}\n\nNo memory matches this query{scope}.\n".encode()
    lines = [f"# Search: {query.text}", ""]
    for r in results:
        heading = f" — {r.heading}" if r.heading else ""
        lines.append(
            f"{r.rank}. **{_location(mountpoint, r.path)}**{heading} "
            f"(lines {r.start_line}–{r.end_line}, score {r.score:.4f})"
        )
        lines.append(f"   > {r.snippet}")
        lines.append("")
    return "\n".join(lines).encode()


def render_error(query: Query, message: str) -> bytes:
    if query.as_json:
        return (json.dumps({"query": query.text, "error": message}, indent=2) + "\n").encode()
    return f"# Search: {query.text}\n\nSearch is unavailable: {message}\n".encode()


def _location(mountpoint: str, path: str) -> str:
    """The absolute path under the mount, or the vault path without one."""
    return f"{mountpoint}/{path}" if mountpoint else path


@dataclass
class CachedResult:
    inode: int
    data: bytes
    made: float

    @property
    def fresh(self) -> bool:
        return time.monotonic() - self.made < RESULT_TTL_S


class ResultCache:
    """Recent queries by file name, each with a stable inode for the mount's life."""

    def __init__(self, first_inode: int) -> None:
        self._by_name: dict[str, CachedResult] = {}
        self._by_inode: dict[int, str] = {}
        self._next = first_inode

    def get(self, name: str) -> CachedResult | None:
        return self._by_name.get(name)

    def name_of(self, inode: int) -> str | None:
        return self._by_inode.get(inode)

    def store(self, name: str, data: bytes) -> CachedResult:
        entry = self._by_name.get(name)
        if entry is None:
            entry = CachedResult(self._next, data, time.monotonic())
            self._by_inode[self._next] = name
            self._next += 1
        else:
            entry.data, entry.made = data, time.monotonic()
        self._by_name.pop(name, None)
        self._by_name[name] = entry  # most recent last
        while len(self._by_name) > MAX_RECENT:
            old_name = next(iter(self._by_name))
            del self._by_inode[self._by_name.pop(old_name).inode]
        return entry

    def names(self) -> list[str]:
        return list(self._by_name)
