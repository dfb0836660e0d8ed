"""Markdown chunking: sections by headings, merged up to a window, split at it.

A memory that fits in MAX_CHUNK_CHARS is one chunk; otherwise consecutive
heading sections are merged while they fit together, and a section longer
than that is cut at line boundaries, preferring blank lines. (One chunk per
section gave a 1 KB note 2.85 chunks, each embedded and stored apart.) The
model reads a chunk's first 256 tokens, about 1,100 characters of prose;
the rest of a full chunk is found by its words.

Each chunk keeps its heading path ("Title > Section", its first section's)
and its line range in the file, so a search result can point at the exact
place. A chunk of a file without headings, cut from below its first line,
carries that line as its title: "Session 3 (8 May 2023)" or a note's title
is shown with every part of it. The title is for the reader of a result,
not for the index: in every chunk's words and embedding it made the LoCoMo
session-level R@10 worse (0.939 to 0.930)."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHUNK_CHARS = 1500
MAX_TITLE_CHARS = 120
CHUNKING_VERSION = 2
"""Bumped whenever what a chunk's embedding reads may come out otherwise:
vectors stored by an earlier version are embedded again."""
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True, slots=True)
class Chunk:
    heading: str  # "Title > Section > Subsection", "" before the first heading
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str
    title: str = ""  # a headless file's first line, when the chunk starts below it

    def for_embedding(self) -> str:
        """What the model reads: the heading path gives a section its context."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


def chunk_markdown(text: str, max_chars: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    lines = text.splitlines()
    sections: list[tuple[str, int, list[str]]] = []  # heading path, first line, lines
    stack: list[tuple[int, str]] = []
    current: list[str] = []
    start = 1
    heading = ""
    in_fence = False
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            if current:
                sections.append((heading, start, current))
            level, title = len(match.group(1)), match.group(2)
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [(level, title)]
            heading = " > ".join(t for _, t in stack)
            current, start = [line], number
        else:
            current.append(line)
    if current:
        sections.append((heading, start, current))

    chunks = []
    group: list[tuple[str, int, list[str]]] = []  # small sections that fit together
    group_size = 0
    for heading, first, body in sections:
        size = sum(len(line) + 1 for line in body)
        if group and group_size + size > max_chars:
            chunks.append(_merged(group))
            group, group_size = [], 0
        if size > max_chars:
            chunks += _split(heading, first, body, max_chars)
        else:
            group.append((heading, first, body))
            group_size += size
    if group:
        chunks.append(_merged(group))
    chunks = [c for c in chunks if c.text.strip()]
    title = next(((n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()), None)
    if title is not None:
        number, line = title
        chunks = [
            Chunk(c.heading, c.start_line, c.end_line, c.text, line[:MAX_TITLE_CHARS])
            if not c.heading and c.start_line > number
            else c
            for c in chunks
        ]
    return chunks


def _merged(group: list[tuple[str, int, list[str]]]) -> Chunk:
    """Consecutive sections as one chunk, under the first one's heading."""
    heading, first, _ = group[0]
    return _chunk(heading, first, [line for _, _, body in group for line in body])


def _split(heading: str, first: int, body: list[str], max_chars: int) -> list[Chunk]:
    """Cut a long section at line boundaries, preferring blank lines."""
    out: list[Chunk] = []
    piece: list[str] = []
    piece_start = first
    size = 0
    for line in body:
        if piece and size + len(line) + 1 > max_chars:
            cut = _last_blank(piece)
            keep, carry = (piece[:cut], piece[cut:]) if cut else (piece, [])
            out.append(_chunk(heading, piece_start, keep))
            piece_start += len(keep)
            piece, size = carry, sum(len(x) + 1 for x in carry)
        piece.append(line)
        size += len(line) + 1
    if piece:
        out.append(_chunk(heading, piece_start, piece))
    return out


def _last_blank(piece: list[str]) -> int:
    """Index after the last blank line in the second half of ``piece`` (0: none)."""
    for i in range(len(piece) - 1, len(piece) // 2, -1):
        if not piece[i].strip():
            return i + 1
    return 0


def _chunk(heading: str, start: int, lines: list[str]) -> Chunk:
    return Chunk(heading, start, start + max(len(lines), 1) - 1, _joined(lines))


def chunk_text(text: str, chunk: Chunk) -> str:
    """The words of ``chunk`` (a place: its lines) in ``text``, as the chunker cut them."""
    return _joined(text.splitlines()[chunk.start_line - 1 : chunk.end_line])


def _joined(lines: list[str]) -> str:
    text = "\n".join(lines)
    return text[: MAX_CHUNK_CHARS * 4]  # one enormous line: keep the index bounded
