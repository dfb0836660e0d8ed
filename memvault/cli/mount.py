"""Commands that mount and unmount: unlock (ask the passphrase, start the
daemon) and lock (ask the daemon to close the vault, wait until it has)."""

from __future__ import annotations

import argparse
import logging

from ..fs import lifecycle
from ..hardening import harden_process
from ..vault import Vault
from . import output
from .common import (
    DEFAULT_MOUNTPOINT,
    default_mountpoint,
    mountpoint_of,
    open_options,
    passphrase,
    vault_path,
)


def cmd_unlock(args: argparse.Namespace) -> int:
    path = vault_path(args)
    mountpoint = mountpoint_of(args)
    for done in lifecycle.prepare_mountpoint(path, mountpoint):
        output.note(f"{output.PREFIX}{done}")
    secret = passphrase(args)
    from ..fs import daemon  # pyfuse3 and trio: only imported by the commands that mount
    from ..fs.mount import serve

    if args.foreground:
        logging.basicConfig(level=logging.INFO, format="memvault: %(message)s")
        vault = Vault.open(path, secret, journal=True, **open_options(args))
        harden_process()
        output.note(f"Unlocked {path} at {mountpoint}; Ctrl-C (or `memvault lock`) locks it.")
        serve(vault, mountpoint, allow_other=args.allow_other)
        output.note("Locked.")
        return 0
    pid = daemon.start(path, mountpoint, secret, allow_other=args.allow_other, **open_options(args))
    output.note(f"Unlocked {path} at {mountpoint} (daemon pid {pid}); `memvault lock` locks it.")
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    if lifecycle.serving_daemon(vault_path(args)) is not None:
        output.note("Locking (finishing shreds and compaction)...")
    given = mountpoint_of(args) if args.mountpoint else None
    output.note(lifecycle.lock(vault_path(args), given, default_mountpoint()))
    return 0


def register(add) -> None:
    p = add("unlock", cmd_unlock, "ask the passphrase and mount the vault as a directory")
    p.add_argument(
        "mountpoint",
        metavar="MOUNTPOINT",
        nargs="?",
        help=f"an empty directory (default {DEFAULT_MOUNTPOINT}; created if missing)",
    )
    p.add_argument(
        "--foreground",
        action="store_true",
        help="stay attached and log to the terminal; Ctrl-C locks",
    )
    p.add_argument(
        "--allow-other",
        action="store_true",
        help="let other users reach the mount (off by default: owner only; "
        "needs user_allow_other in /etc/fuse.conf for non-root users)",
    )
    p = add(
        "lock",
        cmd_lock,
        "unmount, finish pending shreds and compaction, wipe the keys (returns when done)",
    )
    p.add_argument(
        "mountpoint",
        metavar="MOUNTPOINT",
        nargs="?",
        help="the mount to lock (default: wherever this vault is mounted)",
    )
