"""Commands that mount and unmount: unlock (ask the passphrase, start the
daemon) and lock (ask the daemon to close the vault, wait until it has)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .. import paths
from ..errors import MemvaultError, NotUnlocked, UsageError
from ..fs import lifecycle
from ..hardening import harden_process
from ..mounted import MountedVault
from ..vault import Vault, read_info
from ..vault.keyslots import candidates
from . import output
from .common import (
    DEFAULT_MOUNTPOINT,
    FIRST_USE,
    daemon_of,
    default_mountpoint,
    first_use_here,
    mountpoint_of,
    open_options,
    vault_path,
)
from .common import secret as read_secret


def cmd_unlock(args: argparse.Namespace) -> int:
    path = vault_path(args)
    mountpoint = mountpoint_of(args)
    if args.subtree is not None:
        return _unlock_view(args, mountpoint)
    if args.read_only:
        raise UsageError("--read-only is for a view: give --subtree DIR too.")
    for done in lifecycle.prepare_mountpoint(path, mountpoint):
        output.note(f"{output.PREFIX}{done}")
    options = open_options(args)
    info = read_info(path)  # a missing keyfile or recovery slot: said before asking
    candidates(path, info.slots, options["factors"])
    secret = read_secret(args)
    from ..fs import daemon  # pyfuse3 and trio: only imported by the commands that mount
    from ..fs.mount import serve

    if args.foreground:
        logging.basicConfig(level=logging.INFO, format="memvault: %(message)s")
        vault = Vault.open(path, secret, journal=True, **options)
        harden_process()
        output.note(f"Unlocked {path} at {mountpoint}; Ctrl-C (or `memvault lock`) locks it.")
        serve(vault, mountpoint, allow_other=args.allow_other, xattrs=args.xattrs)
        output.note("Locked.")
        return 0
    first = first_use_here(path)
    pid = daemon.start(
        path, mountpoint, secret, allow_other=args.allow_other, xattrs=args.xattrs, **options
    )
    output.note(f"Unlocked {path} at {mountpoint} (daemon pid {pid}); `memvault lock` locks it.")
    if first:
        output.note(FIRST_USE)
    return 0


def _unlock_view(args: argparse.Namespace, mountpoint) -> int:
    """A directory of the unlocked vault at a mountpoint of its own (fs/view.py)."""
    if args.xattrs:
        raise UsageError(
            "--xattrs is for the vault's own mount: a view has no extended attributes."
        )
    from ..fs import view

    record = daemon_of(args)
    if record is None:
        raise NotUnlocked(vault_path(args))
    try:
        subtree = paths.normalize(args.subtree)
    except MemvaultError as exc:
        raise UsageError(f"--subtree: {exc}") from None
    with MountedVault(record) as mounted:
        try:
            mounted.list(subtree)
        except MemvaultError:
            raise UsageError(f"--subtree: {subtree} is not a directory of the vault.") from None
    view.start(Path(record.mountpoint), subtree, mountpoint, record.pid, args.read_only)
    kind = "read-only view" if args.read_only else "view"
    output.note(
        f"Mounted {subtree}/ of the vault at {mountpoint} ({kind}); "
        f"`memvault lock {mountpoint}` unmounts it, and locking the vault ends it too."
    )
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    if args.mountpoint:
        from ..fs import view

        if view.is_view(mountpoint_of(args)):
            view.unmount(mountpoint_of(args))
            output.note(f"Unmounted the view at {mountpoint_of(args)}.")
            return 0
    if lifecycle.serving_daemon(vault_path(args)) is not None:
        output.note("Locking (finishing shreds and compaction)...")
    given = mountpoint_of(args) if args.mountpoint else None
    done, answer = lifecycle.lock(vault_path(args), given, default_mountpoint(), sign=args.sign)
    output.note(done)
    if args.sign:
        from . import copies

        output.note(copies.signed_sentence(answer or copies.sign_locked(args)))
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
        "--subtree",
        metavar="DIR",
        help="mount only this directory of the already unlocked vault (a view for an agent)",
    )
    p.add_argument(
        "--read-only", action="store_true", help="with --subtree: a view that refuses writes"
    )
    p.add_argument(
        "--recovery",
        action="store_true",
        help="unlock with the recovery key instead of the passphrase (asked, or the first "
        "line of stdin with --passphrase-stdin, or $MEMVAULT_RECOVERY_KEY)",
    )
    p.add_argument(
        "--allow-other",
        action="store_true",
        help="let other users reach the mount (off by default: owner only; "
        "needs user_allow_other in /etc/fuse.conf for non-root users)",
    )
    p.add_argument(
        "--xattrs",
        action="store_true",
        help="serve user.* extended attributes (off by default: the mount then answers "
        "'not supported', and every write costs one kernel request less; "
        "attributes stored earlier are kept either way)",
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
    p.add_argument(
        "--sign",
        action="store_true",
        help="then sign the locked file: FILE.sig (Ed25519, the vault's own key), "
        "checked by `memvault verify` without the passphrase",
    )
