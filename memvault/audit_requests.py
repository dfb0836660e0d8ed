"""What `memvault audit` asks of a vault, in process or in the daemon (the same
request either way, like keys.py): the trail's events since a time, its
chain checked, or its retention applied."""

from __future__ import annotations

from typing import Any

from .errors import UsageError


def serve(vault, request: dict[str, Any]) -> dict[str, Any]:
    action = request.get("action")
    if action == "show":
        since = int(request.get("since_ns") or 0)
        return {"events": [e.as_json() for e in vault.audit_trail() if e.time_ns >= since]}
    if action == "verify":
        problem, entries, checkpoint = vault.audit_problem()
        return {
            "problem": problem,
            "entries": entries,
            "first": checkpoint.seq + 1,
            "pruned": checkpoint.pruned,
            "keep_days": checkpoint.keep_days,
        }
    if action == "prune":
        keep = int(request.get("keep_days") or 0)
        if keep < 1:
            raise UsageError("--keep-days must be at least 1.")
        return {"pruned": vault.prune_audit(keep), "keep_days": keep}
    raise UsageError(f"Unknown audit action {action!r}.")
