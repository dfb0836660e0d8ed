"""Copies of the vault file: backup (a consistent copy, mounted or not), restore
(check one and put it in place), verify (a copy's signature and structure,
without the passphrase), and signing at lock (`lock --sign`)."""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from .. import signing
from ..errors import (
    CheckFailed,
    CopyNotFound,
    DestinationExists,
    MemvaultError,
    UsageError,
    VaultNotFound,
)
from ..fs import control
from ..fs.runtime import MountError
from ..vault import Vault, read_info
from ..vault.journal import journal_path
from ..vault.lockfile import lock_path
from ..vault.store import fsync_dir, fsync_file, reserve_path
from ..vault.structure import check_structure
from . import output
from .common import daemon_of, open_in_process, open_options, secret, vault_path
from .integrity import problems_of


def signed_sentence(answer: dict) -> str:
    return (
        f"Signed it: {answer['signature']} (key {answer['fingerprint']}, "
        f"generation {answer['generation']}); `memvault verify` checks it without the passphrase."
    )


def sign_locked(args: argparse.Namespace) -> dict:
    """Sign the locked vault file as it is (the passphrase opens its signing key)."""
    with open_in_process(args) as vault:
        seed = vault.signing_seed(create=True)
        vault_id = vault.header.vault_id
    # closed: the file is final now (closing may have settled or compacted it)
    return signing.sign_and_wipe(vault.path, seed, vault_id, vault.generation)


# -- backup ---------------------------------------------------------------------


def backup_destination(dest: Path, vault: Path) -> Path:
    """DEST itself, or a dated name inside it if it is a directory; never an existing
    file (the vault itself included)."""
    dest = dest.expanduser().absolute()
    if dest.is_dir():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        dest = dest / f"{vault.stem}-{stamp}{vault.suffix or '.vault'}"
    if dest.exists() or dest.is_symlink():
        raise DestinationExists(dest)
    if not dest.parent.is_dir():
        raise UsageError(f"{dest.parent} is not a directory; create it first.")
    return dest


def cmd_backup(args: argparse.Namespace) -> int:
    path = vault_path(args)
    dest = backup_destination(Path(args.dest), path)
    record = daemon_of(args)
    if record is not None:
        answer = control.ask(
            record.control_path, "backup", pid=record.pid, dest=str(dest), sign=args.sign
        )
    else:
        if not path.exists():
            raise VaultNotFound(path)
        with open_in_process(args) as vault:
            answer = signing.backup(vault, dest, sign=args.sign)
    output.data(f"{dest}\n")
    output.note(
        f"Backed up {path} at generation {answer['generation']} to {dest} (mode 0600); "
        "`memvault restore` puts it back."
    )
    if args.sign:
        output.note(signed_sentence(answer))
    return 0


# -- verify ----------------------------------------------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    path = Path(args.file).expanduser()
    if not path.is_file():
        raise CopyNotFound(path)
    verified = _check_copy(path, args.key)
    if verified is None:
        output.note(
            f"{path}: its storage structure, header and keyslot checksums hold. It is not "
            "signed, so a deliberate edit cannot be detected without the passphrase "
            "(`memvault check` decrypts every record)."
        )
    else:
        s = verified.statement
        output.note(
            f"{path}: signed {s.signed_at} at generation {s.generation} by key "
            f"{verified.fingerprint} (trusted by {verified.trusted_by}); every byte is as "
            "signed and its storage structure holds."
        )
    return 0


def _check_copy(path: Path, key: str | None) -> signing.Verified | None:
    """The copy's signature (if it has one: a --key then requires it) and structure."""
    verified = None
    if signing.signature_path(path).exists():
        verified = signing.verify_signature(path, key)
    elif key is not None:
        raise signing.SignatureInvalid(path, signing.signature_path(path), "there is none")
    check_structure(path)
    vault_id = read_info(path).header.vault_id.hex()
    if verified is not None and verified.statement.vault_id != vault_id:
        raise signing.SignatureInvalid(
            path, signing.signature_path(path), "it was made for another vault"
        )
    return verified


# -- restore ---------------------------------------------------------------------


def cmd_restore(args: argparse.Namespace) -> int:
    backup = Path(args.backup).expanduser().absolute()
    target = vault_path(args).expanduser().absolute()
    if not backup.is_file():
        raise CopyNotFound(backup)
    if backup == target:
        raise UsageError("That backup is the vault itself; name the copy to restore.")
    if daemon_of(args) is not None:
        raise MountError(f"The vault {target} is unlocked; lock it before restoring over it.")
    verified = _check_copy(backup, args.key)
    backup_id = read_info(backup).header.vault_id
    if target.exists() and _vault_id_of(target) not in (None, backup_id):
        raise UsageError(
            f"{target} holds another vault than {backup}; move it away first "
            "or restore with --vault to a new path."
        )
    # The copy to install is checked, not the backup itself: every record
    # decrypted and authenticated, the restore recorded in its audit trail.
    # Opening it with the rollback accepted records its generation as the one
    # this machine now expects.
    staged = target.with_name(f".{target.name}.{os.getpid()}.restoring")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        _copy_private(backup, staged)
        with Vault.open(
            staged,
            lambda: secret(args),
            compact_delay=None,
            verify_every_record=True,
            **{**open_options(args), "accept_rollback": True},
        ) as copy:
            problems, files, _ = problems_of(copy)
            if problems:
                output.data("".join(f"{problem}\n" for problem in problems))
                raise CheckFailed(backup, len(problems))
            copy.note("restore", f"from {backup}")
        generation = copy.generation
        aside = _install(staged, target)
    finally:
        for leftover in (staged, lock_path(staged), reserve_path(staged)):
            leftover.unlink(missing_ok=True)
    how = f"signed by {verified.fingerprint}, " if verified else ""
    output.note(
        f"Restored {target} from {backup} ({how}{files} memories, generation {generation}); "
        "the next unlock accepts it as the rollback it is."
    )
    if aside:
        output.note(f"The vault it replaced is kept as {aside}; delete it when you are sure.")
    return 0


def _vault_id_of(path: Path) -> bytes | None:
    """The vault id of the file a restore replaces; None if it is too damaged to say
    (the backup then replaces it, and it is kept aside all the same)."""
    try:
        return read_info(path).header.vault_id
    except MemvaultError:
        return None


def _copy_private(source: Path, dest: Path) -> None:
    shutil.copyfile(source, dest)
    os.chmod(dest, 0o600)


def _install(staged: Path, target: Path) -> Path | None:
    """Put ``staged`` in place of ``target`` atomically (fsynced); the replaced file,
    and a journal left beside it, move aside. Returns where the old vault went."""
    fsync_file(staged)
    aside = None
    if target.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        aside = target.with_name(f"{target.name}.before-restore-{stamp}")
        os.link(target, aside)
        journal = journal_path(target)
        if journal.exists():  # it belongs to the replaced file, never to the backup
            os.replace(journal, journal_path(aside))
    os.replace(staged, target)
    fsync_dir(target.parent)
    return aside


def add_key_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--key",
        metavar="FINGERPRINT",
        help="the signing key to trust (as `memvault status` shows it); "
        "default: the keys this machine signed with",
    )


def register(add) -> None:
    p = add(
        "backup",
        cmd_backup,
        "write a consistent copy of the vault (mounted or not) to DEST, mode 0600",
    )
    p.add_argument("dest", metavar="DEST", help="a new file, or a directory to put a dated one in")
    p.add_argument("--sign", action="store_true", help="also write DEST.sig (Ed25519)")
    p = add(
        "restore",
        cmd_restore,
        "check a backup (signature, every record) and put it in place of the vault",
    )
    p.add_argument("backup", metavar="BACKUP", help="the backup file (BACKUP.sig is checked too)")
    add_key_option(p)
    p = add(
        "verify",
        cmd_verify,
        "check a vault file's signature and structure without the passphrase",
    )
    p.add_argument("file", metavar="FILE", help="a vault file or backup (FILE.sig if signed)")
    add_key_option(p)
