"""What every command group shares: which vault, the passphrase, and opening
the vault in process or through its live mount."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..api import Memories
from ..crypto import DEFAULT_KDF, KdfParams
from ..crypto import kdf as kdf_limits
from ..errors import MemvaultError, UsageError
from ..fs.lifecycle import serving_daemon
from ..fs.runtime import MountError, MountRecord
from ..keyfile import ENV_VAR as KEYFILE_ENV_VAR
from ..keyfile import chosen_keyfile, read_keyfile
from ..locations import DEFAULT_MOUNTPOINT, DEFAULT_VAULT, VAULT_ENV_VAR, chosen_vault
from ..mounted import MountedVault
from ..passphrase import ENV_VAR, read_passphrase, read_recovery_key
from ..vault import Vault, read_info, rollback
from ..vault.keyslots import Factors
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
        f"(otherwise: ${ENV_VAR}, else a prompt); a command that also needs a new "
        "passphrase reads it from the next line",
    )
    common.add_argument(
        "--keyfile",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"the keyfile of a vault with 2FA (default: ${KEYFILE_ENV_VAR})",
    )
    common.add_argument(
        "--accept-journal-loss",
        action="store_true",
        default=argparse.SUPPRESS,
        help="open a vault whose journal was damaged or cut, with the changes that verify "
        "(the rest are lost)",
    )
    common.add_argument(
        "--accept-rollback",
        action="store_true",
        default=argparse.SUPPRESS,
        help="open a vault older than the last one this machine saw (a backup restored "
        "on purpose); from then on it is the one remembered",
    )
    return common


def vault_path(args: argparse.Namespace) -> Path:
    return chosen_vault(getattr(args, "vault", None))


def daemon_of(args: argparse.Namespace) -> MountRecord | None:
    """The live daemon serving the chosen vault, if it is unlocked."""
    return serving_daemon(vault_path(args))


def locked_vault_path(args: argparse.Namespace, doing: str) -> Path:
    """The chosen vault, which must be locked for ``doing`` it (it reads the file itself)."""
    path = vault_path(args)
    if daemon_of(args) is not None:
        raise MountError(f"The vault {path} is unlocked; lock it before {doing} it.")
    return path


def passphrase(args: argparse.Namespace, *, confirm: bool = False) -> bytearray:
    return read_passphrase(from_stdin=getattr(args, "passphrase_stdin", False), confirm=confirm)


def secret(args: argparse.Namespace) -> bytearray:
    """The passphrase, or with --recovery the recovery key's bytes (a typo refused here)."""
    if getattr(args, "recovery", False):
        return read_recovery_key(from_stdin=getattr(args, "passphrase_stdin", False))
    return passphrase(args)


def factors(args: argparse.Namespace) -> Factors:
    """The keyfile (--keyfile, $MEMVAULT_KEYFILE) and whether --recovery was given."""
    path = chosen_keyfile(getattr(args, "keyfile", None))
    return Factors(
        read_keyfile(path) if path is not None else None,
        str(path or ""),
        bool(getattr(args, "recovery", False)),
    )


def open_options(args: argparse.Namespace, given: Factors | None = None) -> dict:
    """Vault.open's options from the command line (``given`` factors instead of --keyfile's)."""
    return {
        "accept_journal_loss": getattr(args, "accept_journal_loss", False),
        "accept_rollback": getattr(args, "accept_rollback", False),
        "factors": factors(args) if given is None else given,
    }


def add_kdf_options(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--kdf-time, --kdf-memory, --kdf-parallelism; ``default`` says what applies when
    none is given, if not memvault's defaults."""
    dflt = DEFAULT_KDF

    def said(value: int) -> str:
        return f"default {default}" if default else f"default {value}"

    p.add_argument(
        "--kdf-time",
        type=int,
        metavar="N",
        help=f"Argon2id passes ({said(dflt.time_cost)}, at most {kdf_limits.MAX_TIME_COST})",
    )
    p.add_argument(
        "--kdf-memory",
        type=int,
        metavar="MIB",
        help=f"Argon2id memory in MiB ({said(dflt.memory_kib // 1024)}, "
        f"{kdf_limits.MIN_MEMORY_KIB // 1024} to {kdf_limits.MAX_MEMORY_KIB // 1024})",
    )
    p.add_argument(
        "--kdf-parallelism",
        type=int,
        metavar="N",
        help=f"Argon2id lanes ({said(dflt.parallelism)}, at most {kdf_limits.MAX_PARALLELISM})",
    )


def kdf_from(args: argparse.Namespace) -> KdfParams | None:
    """The --kdf-* options (missing ones from the defaults), checked; None if none was given."""
    given = (args.kdf_time, args.kdf_memory, args.kdf_parallelism)
    if given == (None, None, None):
        return None
    dflt = DEFAULT_KDF
    kdf = KdfParams(
        dflt.time_cost if args.kdf_time is None else args.kdf_time,
        dflt.memory_kib if args.kdf_memory is None else args.kdf_memory * 1024,
        dflt.parallelism if args.kdf_parallelism is None else args.kdf_parallelism,
    )
    try:
        kdf.validate()
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None
    return kdf


FIRST_USE = (
    "First use of this vault on this machine: from now on an older copy of it is "
    "refused (rollback detection)."
)


def first_use_here(path: Path) -> bool:
    """No record of the vault at ``path`` on this machine yet, asked before a daemon
    opens it (in process, the vault says so itself; a missing or broken file says
    so when it is opened)."""
    try:
        return not rollback.known_here(read_info(path).header.vault_id)
    except MemvaultError:
        return False


def open_in_process(
    args: argparse.Namespace,
    *,
    readonly: bool = False,
    given_secret: bytearray | None = None,
    warn_damage: bool = True,
    **options,
) -> Vault:
    """The vault opened by this process (asking the secret only if it must, unless
    ``given_secret``); ``options`` go to Vault.open (``factors`` replaces --keyfile's)."""
    options = {**open_options(args, options.pop("factors", None)), **options}
    vault = Vault.open(
        vault_path(args),
        (lambda: secret(args)) if given_secret is None else given_secret,
        readonly=readonly,
        compact_delay=None,
        **options,
    )
    if vault.first_seen_here:
        output.note(FIRST_USE)
    if vault.damaged and warn_damage:
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
