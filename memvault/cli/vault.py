"""Commands on the vault itself: init, status, put, get, ls, rm, mv, compact,
repair. Each works whether or not the vault is unlocked (through the mount's
daemon when it is), except repair, which needs it locked."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .. import signing
from ..crypto import DEFAULT_KDF
from ..errors import TooLarge, VaultExists
from ..fs import control
from ..fs.runtime import MountRecord
from ..vault import MAX_MEMORY_SIZE, Vault, read_info
from ..vault.store import compaction_owed
from . import output
from .common import (
    add_kdf_options,
    kdf_from,
    locked_vault_path,
    open_in_process,
    open_memories,
    passphrase,
    vault_path,
)

STATUS_TIMEOUT_S = 10.0


def cmd_init(args: argparse.Namespace) -> int:
    path = vault_path(args)
    kdf = kdf_from(args) or DEFAULT_KDF
    if path.exists():
        raise VaultExists(path)
    secret = passphrase(args, confirm=True)
    Vault.create(path, secret, kdf=kdf, compact_delay=None).close()
    output.note(f"Created the vault {path} ({kdf.describe()}).")
    output.note(
        "No recovery key was made: if the passphrase is forgotten, the memories are lost. "
        "`memvault recovery enable` prints one to keep away from this machine; "
        "`memvault 2fa enable` adds a keyfile as second factor."
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    report = status_report(args)
    if args.json:
        output.data_json(report)
        return 0
    lines = [
        f"vault:     {report['vault']}",
        f"format:    memvault format {report['format']}",
        f"vault id:  {report['vault_id']}",
        f"created:   {report['created']}",
        f"size:      {output.human(report['size'])} ({report['size']} bytes)",
        f"state:     {_describe_state(report)}",
    ]
    daemon = report.get("daemon") or {}
    if "memories" in daemon:
        lines.append(f"memories:  {daemon['memories']}")
        lines.append(f"pending shreds: {daemon['pending_shreds']}")
        lines.append(f"search index: {daemon['search_index']}")
        jobs = daemon.get("housekeeping") or ["none"]
        lines.append(f"background work: {', '.join(jobs)}")
    elif "error" in daemon:
        lines.append(f"daemon:    {daemon['error']}")
    elif report["compaction_owed"]:
        lines.append(
            "pending shreds: shredded or overwritten memories are still in the file; "
            "the next unlock (or any writing command) finishes them"
        )
    lines.append(
        f"signing key: {report['signing_key'] or 'none yet (`memvault lock --sign` makes one)'}"
    )
    lines.append(f"keyslots:  {len(report['keyslots'])}")
    lines += [f"  slot {s['index']}: {s['kdf']}, {s['kind']}" for s in report["keyslots"]]
    output.data("\n".join(lines) + "\n")
    return 0


def status_report(args: argparse.Namespace) -> dict[str, Any]:
    """What `status` shows: the file's header (no passphrase), and the daemon's
    answer when the vault is unlocked."""
    info = read_info(vault_path(args))
    created = time.gmtime(info.header.created_ns / 1e9)
    report: dict[str, Any] = {
        "vault": str(info.path),
        "format": info.header.version,
        "vault_id": info.header.vault_id.hex(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", created),
        "size": info.file_size,
        "writer_pid": info.writer_pid,
        "compaction_owed": False,
        "keyslots": [
            {"index": s.index, "kind": getattr(s, "kind", "damaged"), "kdf": _slot_kdf(s)}
            for s in info.slots
        ],
    }
    record = MountRecord.load(info.path)
    if record is not None and record.alive:
        report["state"] = "unlocked"
        report["mountpoint"], report["daemon_pid"] = record.mountpoint, record.pid
        try:
            report["daemon"] = control.ask(
                record.control_path, "status", pid=record.pid, timeout=STATUS_TIMEOUT_S
            )
        except (control.DaemonUnreachable, control.DaemonFailed) as exc:
            report["daemon"] = {"error": str(exc)}
        except TimeoutError:
            report["daemon"] = {
                "error": f"The daemon did not answer within {STATUS_TIMEOUT_S:g} s."
            }
        report["signing_key"] = report["daemon"].get("signing_key")
    elif record is not None:
        report["state"] = "dead daemon"
    else:
        report["state"] = "locked" if info.writer_pid is None else "open"
        report["compaction_owed"] = compaction_owed(info.path)
    if not report.get("signing_key"):  # locked: the key this machine signed with, if any
        report["signing_key"] = signing.signer_of(info.header.vault_id)
    return report


def _describe_state(report: dict[str, Any]) -> str:
    if report["state"] == "unlocked":
        return f"unlocked, mounted at {report['mountpoint']} by process {report['daemon_pid']}"
    if report["state"] == "dead daemon":
        return "a daemon died without locking; `memvault lock` cleans up its mount"
    if report["state"] == "open":
        return f"open for writing by process {report['writer_pid']}"
    return "locked (no process has it open)"


def _slot_kdf(slot) -> str:
    """A slot's KDF as stored: nothing vouches for it until a passphrase opens it."""
    if not hasattr(slot, "kdf"):
        return "damaged"
    try:
        slot.kdf.validate()
    except ValueError:
        return f"{slot.kdf.describe()} (outside the limits: unlock will refuse it)"
    return f"{slot.kdf.describe()} (unverified until unlock)"


def cmd_put(args: argparse.Namespace) -> int:
    with open_memories(args) as vault:
        data = sys.stdin.buffer.read(MAX_MEMORY_SIZE + 1)  # no more than a memory may hold
        if len(data) > MAX_MEMORY_SIZE:
            raise TooLarge(args.path.strip("/"), f"more than {MAX_MEMORY_SIZE}", MAX_MEMORY_SIZE)
        meta = vault.put(args.path, data)
    output.note(f"Stored {meta.path} ({meta.size} bytes).")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with open_memories(args, readonly=True) as vault:
        content = vault.get(args.path)
    output.data(content)
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with open_memories(args, readonly=True) as vault:
        if args.recursive:
            root = args.directory.strip("/")
            vault.list(root)  # raises if it is not a directory
            prefix = root + "/" if root else ""
            rows = [(m.path[len(prefix) :], m) for m in vault.walk() if m.path.startswith(prefix)]
        else:
            rows = vault.list(args.directory)
    lines = []
    for name, meta in rows:
        shown = name + "/" if meta.is_dir else name
        if args.long:
            mtime = time.strftime("%Y-%m-%d %H:%M", time.localtime(meta.mtime_ns / 1e9))
            shown = f"{meta.size:>10}  {mtime}  {shown}"
        lines.append(shown + "\n")
    output.data("".join(lines))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    with open_memories(args) as vault:
        count = vault.delete(args.path, recursive=args.recursive)
        output.note(f"Shredded {args.path.strip('/')} ({count} record(s)); compacting...")
    return 0


def cmd_mv(args: argparse.Namespace) -> int:
    with open_memories(args) as vault:
        vault.rename(args.old, args.new)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    with open_memories(args) as vault:
        before, after = vault.compact()
    output.note(f"Compacted {vault_path(args)}: {output.human(before)} -> {output.human(after)}.")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    path = locked_vault_path(args, "repairing")
    with open_in_process(args, repair=True) as vault:
        done = vault.repair(accept_unverified=args.accept_unverified)
    for line in done:
        output.note(line)
    output.note(f"Repaired {path}." if done else f"Nothing to repair in {path}.")
    return 0


def register(add) -> None:
    p = add("init", cmd_init, "create a new vault (asks for the passphrase twice)")
    add_kdf_options(p)
    p = add(
        "status",
        cmd_status,
        "show the vault's format, size, keyslots and state (no passphrase needed)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = add("put", cmd_put, "store standard input as the memory at PATH")
    p.add_argument("path", metavar="PATH", help="e.g. projects/api.md")
    p = add("get", cmd_get, "write the memory at PATH to standard output")
    p.add_argument("path", metavar="PATH")
    p = add("ls", cmd_ls, "list a directory of the vault (directories end in /)")
    p.add_argument("directory", metavar="DIR", nargs="?", default="")
    p.add_argument("-l", "--long", action="store_true", help="show sizes and times")
    p.add_argument("-R", "--recursive", action="store_true", help="list the whole tree")
    p = add("rm", cmd_rm, "crypto-shred the memory at PATH (its key and bytes are destroyed)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("-r", "--recursive", action="store_true", help="shred a directory tree")
    p = add("mv", cmd_mv, "move or rename a memory or directory (replaces an existing file)")
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    add(
        "compact",
        cmd_compact,
        "rewrite the vault file now so no shredded byte remains (through the daemon when "
        "unlocked; returns when done)",
    )
    p = add(
        "repair",
        cmd_repair,
        "drop damaged records (recovering those it can) so a damaged vault opens for writing",
    )
    p.add_argument(
        "--accept-unverified",
        action="store_true",
        help="go on even when what can be read does not add up to the vault's integrity sum "
        "(records may have been removed or rolled back: the vault is accepted as it reads)",
    )
