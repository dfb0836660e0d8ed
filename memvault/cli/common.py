"""What every command group shares: which vault, the passphrase, and opening
the vault in process or through its live mount."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..api import Memories
from ..fs.lifecycle import serving_daemon
from ..fs.runtime import MountRecord
from ..locations import DEFAULT_MOUNTPOINT, DEFAULT_VAULT, VAULT_ENV_VAR, chosen_vault
from ..mounted import MountedVault
from ..passphrase import ENV_VAR, read_passphrase
from ..vault import Vault
from . import output


def common_options() -> argparse.ArgumentParser:
    """Options every command takes (given before or after the command name)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--vault",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"the vault file (default: ${VAULT_ENV_VAR}, else {DEFAULT_VAULT})",
    )
    common.add_argument(
        "--passphrase-stdin",
        action="store_true",
        default=argparse.SUPPRESS,
        help="read the passphrase from the first line of standard input "
        f"(otherwise: ${ENV_VAR}, else a prompt)",
    )
    common.add_argument(
        "--accept-journal-loss",
        action="store_true",
        default=argparse.SUPPRESS,
        help="open a vault whose journal was damaged or cut, with the changes that verify "
        "(the rest are lost)",
    )
    return common


def vault_path(args: argparse.Namespace) -> Path:
    return chosen_vault(getattr(args, "vault", None))


def daemon_of(args: argparse.Namespace) -> MountRecord | None:
    """The live daemon serving the chosen vault, if it is unlocked."""
    return serving_daemon(vault_path(args))


def passphrase(args: argparse.Namespace, *, confirm: bool = False) -> bytearray:
    return read_passphrase(from_stdin=getattr(args, "passphrase_stdin", False), confirm=confirm)


def open_options(args: argparse.Namespace) -> dict:
    return {"accept_journal_loss": getattr(args, "accept_journal_loss", False)}


def open_in_process(args: argparse.Namespace, *, readonly: bool = False, **options) -> Vault:
    """The vault opened by this process (asking the passphrase only if it must)."""
    vault = Vault.open(
        vault_path(args),
        lambda: passphrase(args),
        readonly=readonly,
        compact_delay=None,
        **open_options(args),
        **options,
    )
    if vault.damaged:
        output.warn(
            f"{len(vault.damaged)} record(s) of the vault are damaged and cannot be read: "
            f"{vault.describe_damage()}. `memvault repair` drops them."
        )
    return vault


def open_memories(args: argparse.Namespace, *, readonly: bool = False) -> Memories:
    """The vault itself, or its mount if a daemon serves it (the only writer)."""
    record = daemon_of(args)
    if record is not None:
        return MountedVault(record)
    return open_in_process(args, readonly=readonly)


def default_mountpoint() -> Path:
    return Path(DEFAULT_MOUNTPOINT).expanduser().absolute()


def mountpoint_of(args: argparse.Namespace) -> Path:
    """The MOUNTPOINT argument, else the default."""
    if not args.mountpoint:
        return default_mountpoint()
    return Path(args.mountpoint).expanduser().absolute()
