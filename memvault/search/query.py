"""The query language: ``<words>[.json][?k=N&in=DIR]``, as a search/ file name.

The mount's ``search/`` directory and the CLI ask the same questions, so
both go through this one parser and one set of limits: a query that the CLI
accepts is a file name the mount understands, and the reverse. Options follow
a ``?``, URL-style (``k``: how many results; ``in``: a directory prefix);
percent-escapes are decoded, so ``%2F`` is a ``/`` in a prefix. ``.json``,
at the end of the words or of the options, asks for JSON instead of Markdown.
"""

from __future__ import annotations

import errno as _errno
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlencode

from .. import paths
from ..errors import BadPath, MemvaultError

DEFAULT_K = 10
MAX_K = 50
JSON_SUFFIX = ".json"


class QueryError(MemvaultError):
    """{0}"""

    errno = _errno.EINVAL
    exit_code = 2  # a usage error, like a bad command-line option


def to_k(value: int | str) -> int:
    """The number of results asked for, as a checked int."""
    try:
        k = int(value)
    except (TypeError, ValueError):
        k = 0
    if not 1 <= k <= MAX_K or isinstance(value, bool):
        shown = str(value).strip() or "nothing"
        raise QueryError(f"k must be a whole number between 1 and {MAX_K}, not {shown}.")
    return k


@dataclass(frozen=True)
class Query:
    """A checked query: building one with bad parts raises QueryError."""

    text: str
    k: int = DEFAULT_K
    prefix: str = ""
    as_json: bool = False

    def __post_init__(self) -> None:
        text = self.text.strip()
        if not text:
            raise QueryError("The search query is empty.")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "k", to_k(self.k))
        object.__setattr__(self, "prefix", _scope(self.prefix))

    def file_name(self) -> str:
        """The search/ file name that parse() reads back as this very query."""
        words = quote(self.text, safe=" ")
        if words.endswith(JSON_SUFFIX):  # the words' own ".json" is not the format
            words = words[: -len(JSON_SUFFIX)] + "%2E" + JSON_SUFFIX[1:]
        options = {"k": self.k} | ({"in": self.prefix} if self.prefix else {})
        return words + "?" + urlencode(options) + (JSON_SUFFIX if self.as_json else "")


def parse(name: str) -> Query:
    """The query a search/ file name spells; raises QueryError."""
    words, _, options = name.partition("?")
    as_json = False
    if words.endswith(JSON_SUFFIX):
        words, as_json = words[: -len(JSON_SUFFIX)], True
    if options.endswith(JSON_SUFFIX):
        options, as_json = options[: -len(JSON_SUFFIX)], True
    params = parse_qs(options, keep_blank_values=True)
    k = params.get("k", [DEFAULT_K])[0]
    prefix = params.get("in", [""])[0]
    return Query(unquote(words), to_k(k), prefix, as_json)


def _scope(prefix: str) -> str:
    """The canonical directory prefix ('' for the whole vault)."""
    try:
        return paths.normalize(prefix, allow_root=True)
    except BadPath as exc:
        reason = exc.args[1] if len(exc.args) > 1 else "not a memory path"
        raise QueryError(
            f"The search scope {prefix!r} is not a directory path: {reason}."
        ) from None
