"""One search result: where a matching chunk is, and the words around the match."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """Names a path, not a record: the path it has now, at the time of the query."""

    rank: int
    score: float
    path: str
    heading: str
    start_line: int
    end_line: int
    snippet: str
    cosine: float | None


def snippet(text: str, query: str, width: int = 240) -> str:
    """The part of a chunk around the first query word it contains, on one line."""
    flat = " ".join(text.split())
    lower = flat.lower()
    at = -1
    for word in sorted(query.lower().split(), key=len, reverse=True):
        at = lower.find(word)
        if at >= 0:
            break
    start = max(0, at - width // 3) if at >= 0 else 0
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")
