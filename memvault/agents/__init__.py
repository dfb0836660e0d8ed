"""Agents wired to the vault: the MCP server (server.py), `integrate`
(integrate.py), the session context (context.py) and hooks (hook.py)."""
