"""Results as the reader gets them: Markdown for people and agents, or JSON.

The same bytes whether they are read from the mount's search/ directory or
printed by `memvault search`; only the locations differ (absolute under a
mountpoint, vault paths without one).
"""

from __future__ import annotations

import json
from dataclasses import asdict

from .query import Query
from .result import Result


def render(query: Query, results: list[Result], mountpoint: str = "") -> bytes:
    """The answer to ``query``: a numbered Markdown list, or a JSON document."""
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
    """Why ``query`` has no answer (another model, no model), in the asked format."""
    if query.as_json:
        doc = {"query": query.text, "error": message}
        return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode()
    return f"# Search: {query.text}\n\nSearch is unavailable: {message}\n".encode()


def _location(mountpoint: str, path: str) -> str:
    """The absolute path under the mount, or the vault path without one."""
    return f"{mountpoint}/{path}" if mountpoint else path
