"""One search result: a file, its best matching chunk, and the words around the match."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..index.lexical import tokenize

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(text: str) -> list[str]:
    """The lines of ``text``, cut after each sentence's end, stripped, none empty.
    (Only lines with a full stop, "!" or "?" go through the expression: five
    times faster on notes, where most lines are list items or headings.)"""
    out = []
    for line in text.split("\n"):
        pieces = _SENTENCE_END.split(line) if "." in line or "!" in line or "?" in line else [line]
        out += [piece.strip() for piece in pieces if piece.strip()]
    return out


def _clue(term: str) -> str:
    """What the lowercased text of any word with ``term`` among its terms holds.

    Snowball's English stemmer only rewrites a word's last letters (at most
    two of the stem differ from the word: "happy" -> "happi", "hoping" ->
    "hope", "dying" -> "die"), and an identifier's terms are pieces of it, so
    a sentence without this prefix cannot hold the term: it is not tokenized
    (most of a snippet's cost)."""
    return term[: max(1, len(term) - 2)]


def _holds_any(sentence: str, clues: list[str]) -> bool:
    lower = sentence.lower()
    return any(clue in lower for clue in clues)


@dataclass(frozen=True)
class Result:
    """Names a path, not a record: the path it has now, at the time of the query.

    ``score`` is in [0, 1]: the fused evidence of words and meaning, as a share
    of the best found for this query (1: best on both). ``words`` are the
    query's terms the chunk holds (stemmed, as BM25 matched them); ``also``
    are the line ranges of the file's other matching chunks.
    """

    rank: int
    score: float
    path: str
    heading: str
    start_line: int
    end_line: int
    snippet: str
    cosine: float | None
    words: list[str] = field(default_factory=list)
    also: list[list[int]] = field(default_factory=list)


def matched_words(text: str, query: str) -> list[str]:
    """The query's terms found in ``text``, in the query's order."""
    return describe(text, query)[1]


def snippet(text: str, query: str, width: int = 240) -> str:
    return describe(text, query, width=width)[0]


def describe(text: str, query: str, heading: str = "", width: int = 240) -> tuple[str, list[str]]:
    """A chunk's snippet, and the query's terms it holds (its heading's too), in
    the query's order; each sentence tokenized once for both.

    The snippet is the sentences that hold the most query words, on one line:
    the best sentence (most distinct query terms, the earliest on a tie) is
    the start; the sentences after it fill the width. Without any query word
    in it (found by meaning alone), the chunk's beginning."""
    asked = list(dict.fromkeys(tokenize(query)))
    terms = set(asked)
    sentences = _sentences(text)
    clues = [_clue(term) for term in terms]
    held = [terms.intersection(tokenize(s)) if _holds_any(s, clues) else set() for s in sentences]
    present = terms.intersection(tokenize(heading)).union(*held)
    words = [term for term in asked if term in present]
    if not sentences:
        return "", words
    counts = [len(h) for h in held]
    best = max(range(len(sentences)), key=lambda i: (counts[i], -i)) if terms else 0
    picked = " ".join(" ".join(s.split()) for s in sentences[best:])
    cut = picked[:width]
    return ("…" if best else "") + cut + ("…" if len(picked) > width else ""), words
