"""Search: the query language, the index of an unlocked vault, and rendering.

The mount's search/ directory and `memvault search` both go through here:
``parse`` (a search/ file name) or ``Query`` (the CLI's arguments) checks a
question, ``open_search`` builds the service that answers it, ``render``
writes the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .query import DEFAULT_K, MAX_K, Query, QueryError, parse, to_k
from .render import render, render_error
from .result import Result

if TYPE_CHECKING:
    from .factory import open_search
    from .service import SearchService

__all__ = [
    "DEFAULT_K",
    "MAX_K",
    "Query",
    "QueryError",
    "Result",
    "SearchService",
    "open_search",
    "parse",
    "render",
    "render_error",
    "to_k",
]


def __getattr__(name: str):
    """The service needs numpy, the index and (later) onnxruntime: loaded when
    first asked for, so a command that only parses a query stays quick."""
    if name == "open_search":
        from .factory import open_search

        return open_search
    if name == "SearchService":
        from .service import SearchService

        return SearchService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
