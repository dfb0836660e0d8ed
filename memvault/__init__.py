"""memvault: an encrypted, offline memory vault for AI agents."""

__version__ = "0.1.0"
