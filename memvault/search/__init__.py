"""Search: the query language, the index of an unlocked vault, and rendering.

The mount's search/ directory and `memvault search` both go through here:
``parse`` (a search/ file name) or ``Query`` (the CLI's arguments) checks a
question, ``open_search`` builds the service that answers it, ``render``
writes the answer.
"""

from __future__ import annotations

from .factory import open_search
from .query import DEFAULT_K, MAX_K, Query, QueryError, parse, to_k
from .render import render, render_error
from .result import Result
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
