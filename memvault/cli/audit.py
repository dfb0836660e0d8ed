"""`memvault audit`: who touched which memory, and when (memvault/vault/audit.py).

The trail is read from the daemon when the vault is unlocked, else from the
file (the passphrase opens it): `audit` shows it, `audit verify` walks its
chain, `audit prune` applies a retention."""

from __future__ import annotations

import argparse
import json
import re
import time
from datetime import UTC, datetime
from typing import Any

from .. import audit_requests
from ..errors import EXIT_DAMAGED, MemvaultError, UsageError
from ..fs import control
from . import output
from .common import daemon_of, open_in_process, vault_path


class AuditBroken(MemvaultError):
    """The audit trail of {0} is broken: {1}."""

    exit_code = EXIT_DAMAGED


_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str) -> int:
    """A time as nanoseconds: "30m", "2h", "7d", "1w" ago, or an ISO date or time (UTC)."""
    found = _RELATIVE.match(text.strip().lower())
    if found:
        return time.time_ns() - int(found.group(1)) * _UNITS[found.group(2)] * 10**9
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither a duration (30m, 2h, 7d, 1w) nor a date "
            "(2026-12-01 or 2026-12-01T09:30)."
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 10**9)


def ask(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    """The request answered by the daemon, or by the vault opened here."""
    record = daemon_of(args)
    if record is not None:
        return control.ask(record.control_path, "audit", pid=record.pid, **request)
    with open_in_process(args, readonly=request["action"] != "prune") as vault:
        return audit_requests.serve(vault, request)


def cmd_audit(args: argparse.Namespace) -> int:
    if args.action == "verify":
        return _verify(args)
    if args.action == "prune":
        if args.keep_days is None:
            raise UsageError("`audit prune` needs --keep-days N.")
        done = ask(args, {"action": "prune", "keep_days": args.keep_days})
        output.note(
            f"Pruned {done['pruned']} entries older than {done['keep_days']} days; "
            "that retention now applies at every lock."
        )
        return 0
    since = parse_since(args.since) if args.since else 0
    events = ask(args, {"action": "show", "since_ns": since})["events"]
    shown = [e for e in events if _matches(e, args)]
    if args.json:
        output.data("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in shown))
    else:
        output.data("".join(_line(e) + "\n" for e in shown))
    if not shown:
        output.note("No audit events match." if events else "The audit trail is empty.")
    return 0


def _verify(args: argparse.Namespace) -> int:
    found = ask(args, {"action": "verify"})
    if found["problem"]:
        raise AuditBroken(vault_path(args), found["problem"])
    pruned = found["pruned"]
    earlier = f"; {pruned} older entries pruned behind a sealed checkpoint" if pruned else ""
    last = found["first"] + found["entries"] - 1
    output.note(
        f"The audit trail holds: entries {found['first']} to {last}, each chained to the one "
        f"before and the last to the sealed vault state{earlier} "
        f"(retention {found['keep_days']} days)."
    )
    return 0


def _matches(event: dict, args: argparse.Namespace) -> bool:
    if args.path and args.path not in (event.get("path") or "") + " " + event.get("from", ""):
        return False
    if args.caller:
        caller = event["caller"]
        words = " ".join(str(v) for v in caller.values())
        if args.caller.lower() not in words.lower():
            return False
    return True


def _line(event: dict) -> str:
    when = event["time"].replace("T", " ")[:19]
    if event["shredded"]:
        what = "(a shredded memory)"
    elif event.get("from"):
        what = f"{event['from']} -> {event['path']}"
    else:
        what = event["path"] or ""
    if event.get("detail"):
        what = f"{what} {event['detail']}".strip()
    caller = event["caller"]
    who = caller.get("name") or caller.get("comm") or caller["kind"]
    ids = f"pid {caller.get('pid', '?')}, uid {caller.get('uid', '?')}"
    exe = f", {caller['exe']}" if caller.get("exe") else ""
    return f"{when}  {event['op']:<15} {what}  [{caller['kind']}: {who} ({ids}{exe})]"


def register(add) -> None:
    p = add(
        "audit",
        cmd_audit,
        "show who read or changed which memory and when; `audit verify` checks the chain",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("show", "verify", "prune"),
        default="show",
        help="show (the default), verify (walk the hash chain, name the first broken link), "
        "or prune (drop entries older than --keep-days, which becomes the retention)",
    )
    p.add_argument("--since", metavar="WHEN", help="only events since 30m, 2h, 7d or a date")
    p.add_argument(
        "--caller", metavar="TEXT", help="only callers whose pid, name or program has TEXT"
    )
    p.add_argument("--path", metavar="TEXT", help="only memories whose path contains TEXT")
    p.add_argument("--json", action="store_true", help="one JSON object per event")
    p.add_argument(
        "--keep-days", type=int, metavar="N", help="with prune: the retention in days (default 90)"
    )
