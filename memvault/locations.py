"""Where a vault and its mount are by default (a module light enough for hooks)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_VAULT = "~/.memvault/memory.vault"
DEFAULT_MOUNTPOINT = "~/memory"
VAULT_ENV_VAR = "MEMVAULT_VAULT"


def chosen_vault(given: str | None = None) -> Path:
    """``given`` (--vault), else $MEMVAULT_VAULT, else the default."""
    return Path(given or os.environ.get(VAULT_ENV_VAR) or DEFAULT_VAULT).expanduser()
