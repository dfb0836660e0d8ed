"""Commands that look at the whole vault: check (is every byte what memvault
wrote?) and salvage (copy what can still be read into a new vault). Both need
the vault locked: they read the file itself, every record of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..crypto import wipe
from ..errors import CheckFailed, MemvaultError, VaultExists, VaultTampered
from ..transfer import import_memories, memories_of
from ..vault import Vault
from ..vault.records import FILE
from . import output
from .common import add_kdf_options, kdf_from, locked_vault_path, open_in_process, secret


def problems_of(vault: Vault) -> tuple[list[str], int, int]:
    """What fails in a vault opened with verify_every_record, a sentence each; and
    how many memories and directories it has."""
    problems = [f"{vault.damage.name(rid)}: {why}" for rid, why in vault.damaged.items()]
    if vault.unexplained:
        problems.append("the integrity sum does not match the records that could be read")
    files = directories = 0
    for meta in vault.walk():
        if meta.type != FILE:
            directories += meta.is_dir
            continue
        files += 1
        try:
            vault.get(meta.path)  # every chunk of it, authenticated
        except MemvaultError as exc:
            problems.append(f"{meta.path}: {exc}")
    problems += vault.check_derived()
    try:
        seed = vault.signing_seed()
        if seed is not None:
            wipe(seed)
    except VaultTampered as exc:
        problems.append(str(exc))
    broken, _, _ = vault.audit_problem()
    if broken:
        problems.append(f"the audit trail: {broken}")
    return problems, files, directories


def cmd_check(args: argparse.Namespace) -> int:
    path = locked_vault_path(args, "checking")
    with open_in_process(args, readonly=True, verify_every_record=True, warn_damage=False) as vault:
        problems, files, directories = problems_of(vault)
    if problems:
        output.data("".join(f"{problem}\n" for problem in problems))
        raise CheckFailed(path, len(problems))
    output.note(
        f"{path} checks out: {files} memories and {directories} directories, every record's "
        "key, metadata and content authenticated, the integrity sum matching, the audit "
        "trail's chain unbroken."
    )
    return 0


def cmd_salvage(args: argparse.Namespace) -> int:
    path = locked_vault_path(args, "salvaging")
    out = Path(args.out).expanduser()
    if out.exists():
        raise VaultExists(out)
    passphrase = secret(args)  # the new vault's too
    with open_in_process(
        args, readonly=True, given_secret=bytearray(passphrase), warn_damage=False
    ) as damaged:
        lost = [f"{damaged.damage.name(rid)} ({why})" for rid, why in damaged.damaged.items()]
        saved = list(memories_of(damaged, damaged.walk(), unreadable=lost))
    options = {"kdf": kdf} if (kdf := kdf_from(args)) else {}
    with Vault.create(out, passphrase, compact_delay=None, **options) as new:
        import_memories(new, saved)
    output.data("".join(f"not saved: {what}\n" for what in lost))
    output.note(
        f"Saved {len(saved)} memories of {path} into {out} (same passphrase); "
        + (f"{len(lost)} could not be read (listed)." if lost else "nothing was lost.")
    )
    return 0


def register(add) -> None:
    add(
        "check",
        cmd_check,
        "decrypt and authenticate every record of the (locked) vault; exit 7 on any problem",
    )
    p = add(
        "salvage",
        cmd_salvage,
        "copy every memory that can still be read into a new vault at OUT, listing the rest",
    )
    p.add_argument("out", metavar="OUT", help="the new vault's file (must not exist)")
    add_kdf_options(p)
