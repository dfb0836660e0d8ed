"""`memvault sync` asked of a running daemon: the mount's vault is the only writer,
so the daemon runs the sync itself (in a worker thread, requests go on)."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import NotSynced
from . import group
from .engine import Sync
from .remote import rclone_remote
from .state import load

_one_at_a_time = threading.Lock()
"""Two syncs of one vault at once would number their log entries alike."""


def serve(vault, request: dict[str, Any]) -> dict[str, Any]:
    with _one_at_a_time:
        state = load(vault)
        if state is None:
            raise NotSynced()
        if request.get("action") == "status":
            return group.status(vault, state)
        remote = rclone_remote(state.remote, state.rclone_config)
        return {"sentence": Sync(vault, state, remote).run().sentence()}
