"""`memvault sync`: one memory on several devices, through an rclone remote that
only ever holds ciphertext (sync/)."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path

from ..crypto.kdf import DEFAULT_KDF
from ..errors import NotSynced, UsageError, VaultNotFound
from ..fs import control
from ..passphrase import read_sync_passphrase
from ..sync import group
from ..sync.engine import Report
from ..sync.remote import check_spec, rclone_remote
from ..sync.service import POLL_S, SyncServices
from ..vault import Vault
from . import output
from .common import (
    add_kdf_options,
    daemon_of,
    kdf_from,
    open_in_process,
    passphrase,
    vault_path,
)

SYNC_HELP = """\
Keep this vault in step with other devices (and nothing else) through any
rclone remote (S3, SFTP, WebDAV, ...): `sync init REMOTE:PATH` starts a group
with this vault as its first device, `sync join REMOTE:PATH` on another
machine adds that one, `sync` sends and receives once, `sync --watch` keeps
the mount syncing by itself (within seconds of a change), `sync status` shows
the devices. Everything on the remote is sealed and signed on the device;
the group's passphrase ($MEMVAULT_SYNC_PASSPHRASE, or asked) opens its key.
Changes made on two devices without seeing each other both survive: the
later keeps the name, the other becomes `name (conflict from DEVICE DATE).md`.
"""


def sync_config(args: argparse.Namespace) -> str | None:
    given = getattr(args, "rclone_config", None)
    return str(Path(given).expanduser().absolute()) if given else None


def _request(args: argparse.Namespace, action: str) -> dict:
    if action == "now" and args.watch is not None:
        action = "watch" if args.watch else "unwatch"
    return {"action": action, "compact": args.compact}


def _show(args: argparse.Namespace, answer: dict, *, mounted: bool) -> int:
    if "sentences" not in answer:
        return _show_status(args, answer)
    for sentence in answer["sentences"]:
        output.note(sentence)
    if args.watch and mounted:
        output.note(
            f"The mount now syncs by itself (every {POLL_S:g} s, and after each change), "
            "now and whenever it is unlocked again; `memvault sync --no-watch` stops that."
        )
    elif args.watch is False:
        output.note("The mount no longer syncs by itself.")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    action = args.sync_action
    if action in ("init", "join") and not args.remote:
        raise UsageError(f"`memvault sync {action}` needs REMOTE:PATH (an rclone remote).")
    if action == "devices":
        if args.remote != "remove" or not args.device:
            raise UsageError("Remove a device with `memvault sync devices remove NAME`.")
    elif action not in ("init", "join") and args.remote:
        raise UsageError(f"Unknown sync action {action!r}; see `memvault sync --help`.")
    if action != "now" and (args.watch is not None or args.compact):
        raise UsageError("--watch, --no-watch and --compact go with `memvault sync` alone.")
    if action == "init":
        return _init(args)
    if action == "join":
        return _join(args)
    if action == "devices":
        return _remove_device(args)
    mounted = daemon_of(args) is not None
    if args.watch and not mounted:
        with open_in_process(args) as vault:
            return _watch_here(vault)
    return _show(args, ask_groups(args, _request(args, action)), mounted=mounted)


def _create_for_join(args: argparse.Namespace) -> None:
    path = vault_path(args)
    if not path.parent.is_dir():
        raise VaultNotFound(path)
    secret = passphrase(args, confirm=True)
    Vault.create(path, secret, kdf=kdf_from(args) or DEFAULT_KDF, compact_delay=None).close()
    output.note(f"Created the vault {path} for this device.")


def _init(args: argparse.Namespace) -> int:
    secret = read_sync_passphrase(from_stdin=False, confirm=True)
    answer = ask_groups(args, entering(args, "create", secret))
    output.note(
        f"Started a sync group at {args.remote}; this vault is its device {answer['device']!r}. "
        f"{answer['sentence']}"
    )
    output.note(f"On another machine: `memvault sync join {args.remote}` with the same passphrase.")
    return 0


def _join(args: argparse.Namespace) -> int:
    """A new vault is made only once the group's passphrase opened the group: a typo
    creates nothing."""
    secret = read_sync_passphrase(from_stdin=False)
    if not vault_path(args).exists():
        with rclone_remote(args.remote, sync_config(args)) as remote:
            group.open_group(remote, secret)
        _create_for_join(args)
    answer = ask_groups(args, entering(args, "join", secret))
    output.note(
        f"Joined the sync group at {args.remote} as device {answer['device']!r}. "
        f"{answer['sentence']}"
    )
    return 0


def entering(
    args: argparse.Namespace, action: str, secret: bytearray, share: str | None = None
) -> dict:
    """A request to start (``create``) or join the personal group or a team space."""
    request = {
        "action": action,
        "share": share,
        "remote": check_spec(args.remote),
        "config": sync_config(args),
        "name": args.name,
        "secret": secret.decode(),
    }
    if share is None:  # a passphrase to stretch; a share code is random enough
        request["kdf"] = (kdf_from(args) or DEFAULT_KDF).as_dict()
    return request


def ask_groups(args: argparse.Namespace, request: dict) -> dict:
    """A request to the vault's sync groups: through the daemon if it is unlocked
    (the only writer), else answered here."""
    record = daemon_of(args)
    if record is not None:
        return control.ask(record.control_path, "sync", pid=record.pid, timeout=None, **request)
    with open_in_process(args) as vault:
        services = SyncServices(vault)
        services.start()
        try:
            return services.serve(request)
        finally:
            services.stop()


def _remove_device(args: argparse.Namespace) -> int:
    output.note(
        "The group gets a new key, wrapped under the group passphrase for devices that "
        "join later: give a new passphrase if the removed device's owner knows the old one."
    )
    secret = read_sync_passphrase(from_stdin=False, confirm=True)
    kdf = (kdf_from(args) or DEFAULT_KDF).as_dict()
    request = {"action": "remove", "device": args.device, "secret": secret.decode(), "kdf": kdf}
    ask_groups(args, request)
    output.note(
        f"Removed {args.device!r} from the sync group: it can read nothing written from now "
        "on, and its later changes count nowhere; what it already had stays with it."
    )
    return 0


def _watch_here(vault) -> int:
    """The vault is locked: sync in the foreground until interrupted."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())

    def say(report: Report) -> None:
        output.note(f"{time.strftime('%H:%M:%S')} {report.sentence()}")

    service = SyncServices(vault, on_report=say, watch=True)
    if not service.services:
        raise NotSynced()
    service.start()
    output.note(f"Syncing every {POLL_S:g} s and after each change until interrupted (Ctrl-C).")
    shown = None
    try:
        while not stop.wait(1.0):
            error = service.last_error
            if error and error != shown:
                output.note(f"{time.strftime('%H:%M:%S')} {error}")
            shown = error
    finally:
        service.stop()
    return 0


def _show_status(args: argparse.Namespace, report: dict) -> int:
    """The personal group, then each team space."""
    if args.json:
        output.data_json(report)
        return 0
    blocks = [report] if "remote" in report else []
    blocks += report.get("shares", [])
    text = "\n".join(_status_lines(block) for block in blocks)
    output.data(text)
    return 0


def _status_lines(report: dict) -> str:
    title = f"team space shared/{report['share']}" if report.get("share") else "personal"
    lines = [
        f"{title}",
        f"remote:    {report['remote']}",
        f"device:    {report['device']}",
        "devices:",
    ]
    for d in report["devices"]:
        when = (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(d["last_change_ms"] / 1000))
            if d.get("last_change_ms")
            else "no change yet"
        )
        mark = " (this one)" if d["this"] else ""
        lines.append(f"  {d['name']}{mark}: {d['changes']} change(s), last {when}")
    lines.append(f"pending:   {report['pending']} change(s) to send")
    lines.append(f"watching:  {'yes' if report['watching'] else 'no'}")
    if report.get("last_error"):
        lines.append(f"last error: {report['last_error']}")
    lines.append(f"conflicts: {len(report['conflicts'])}")
    lines += [f"  {path}" for path in report["conflicts"]]
    return "\n".join(lines) + "\n"


def register(add) -> None:
    p = add("sync", cmd_sync, "sync this vault with other devices through an rclone remote")
    p.description = SYNC_HELP
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "sync_action",
        nargs="?",
        choices=("now", "init", "join", "status", "devices"),
        default="now",
        metavar="ACTION",
        help="now (the default: send and receive once), init REMOTE:PATH, join REMOTE:PATH, "
        "status, or devices remove NAME",
    )
    p.add_argument("remote", nargs="?", metavar="REMOTE:PATH", help="with init and join")
    p.add_argument("device", nargs="?", metavar="NAME", help="with devices remove")
    p.add_argument("--name", help="this device's name in the group (default: the host name)")
    p.add_argument(
        "--rclone-config",
        metavar="FILE",
        help="the rclone configuration that defines REMOTE (default: rclone's own)",
    )
    p.add_argument(
        "--watch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep syncing: an unlocked vault's mount syncs by itself from now on (and "
        "after every unlock) until --no-watch; a locked vault syncs in the foreground "
        "until interrupted",
    )
    p.add_argument(
        "--compact",
        action="store_true",
        help="rewrite this device's whole log on the remote now, without the content of "
        "replaced versions (otherwise done as the log grows)",
    )
    p.add_argument("--json", action="store_true", help="with status: a JSON object")
    add_kdf_options(p)
