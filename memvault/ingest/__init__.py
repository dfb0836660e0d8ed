"""Importing agents' own histories as Markdown memories (`memvault ingest`).

Parsers (claude, codex, cursor) turn each agent's files into Sessions;
render makes them Markdown; runner stores what changed, tracking sources in
an encrypted state memory. See ../shared/fixtures/traces/FORMATS.md.
"""

from .runner import Summary, collect, run
from .sources import KINDS, default_roots

__all__ = ["KINDS", "Summary", "collect", "default_roots", "run"]
