"""Where a vault, its mount and its runtime record are (a module light enough
for the agents' hooks, which must answer fast on a locked vault)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

DEFAULT_VAULT = "~/.memvault/memory.vault"
DEFAULT_MOUNTPOINT = "~/memory"
VAULT_ENV_VAR = "MEMVAULT_VAULT"


def chosen_vault(given: str | None = None) -> Path:
    """``given`` (--vault), else $MEMVAULT_VAULT, else the default."""
    return Path(given or os.environ.get(VAULT_ENV_VAR) or DEFAULT_VAULT).expanduser()


def runtime_dir() -> Path:
    """Where mount records, daemon logs and control sockets live (mode 0700)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "memvault" if base else Path(f"/tmp/memvault-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def record_path(vault: Path) -> Path:
    """The runtime record of the daemon serving ``vault``, while it runs."""
    key = hashlib.sha256(str(vault.resolve()).encode()).hexdigest()[:16]
    return runtime_dir() / f"{key}.json"
