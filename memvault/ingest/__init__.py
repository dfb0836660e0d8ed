"""Importing agents' own histories as Markdown memories (`memvault ingest`).

Parsers (claude, codex, cursor) turn each agent's files into Sessions;
render makes them Markdown; runner stores what changed, tracking sources in
an encrypted state memory. See tests/data/traces/FORMATS.md (the formats, with sources).
"""

from .runner import Summary, collect, run
from .sources import KINDS, default_roots

__all__ = ["KINDS", "Summary", "collect", "default_roots", "run"]
