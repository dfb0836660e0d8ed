"""Commands on the vault's keys: passwd, keyslot list|add|remove, 2fa
enable|disable|status, recovery enable|disable.

Each change works locked (in process) or unlocked (asked of the mount's
daemon, which checks the secret against its own keyslots); list and status
need no passphrase. Secrets never come from argv: with --passphrase-stdin
the current passphrase (or recovery key) is the first line of standard
input and a new passphrase the second; else $MEMVAULT_PASSPHRASE,
$MEMVAULT_RECOVERY_KEY, $MEMVAULT_NEW_PASSPHRASE, else prompts.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from .. import keys
from ..crypto.keyslot import Keyslot
from ..errors import KeyslotRefused
from ..fs import control
from ..keyfile import chosen_keyfile, create_keyfile, read_keyfile
from ..keys import KeyRequest
from ..passphrase import read_new_passphrase
from ..vault import read_info
from ..vault.keyslots import Factors, candidates
from . import output
from .common import (
    add_kdf_options,
    common_options,
    daemon_of,
    factors,
    kdf_from,
    open_in_process,
    secret,
    vault_path,
)

STDIN_LINES = (
    "With --passphrase-stdin, standard input holds one line per secret: the current "
    "passphrase (or recovery key) first, then the new passphrase."
)
REKEY_LIMIT = (
    "Copies of the vault file made before (backups, synced copies) still open with the old "
    "passphrase: a change of passphrase cannot reach them."
)


def _change(
    args: argparse.Namespace,
    action: str,
    *,
    fac: Factors | None = None,
    new_passphrase: bool = False,
    slot: int | None = None,
    kdf=None,
    new_keyfile: bytes | None = None,
    current: bytearray | None = None,
) -> dict[str, Any]:
    """Ask for the secrets, then make the change through the daemon or in process."""
    path = vault_path(args)
    fac = factors(args) if fac is None else fac
    if current is None:
        candidates(path, read_info(path).slots, fac)  # damage, a missing keyfile: before asking
        current = secret(args)
    request = KeyRequest(action, current, fac, kdf=kdf, slot=slot, new_keyfile=new_keyfile)
    try:
        if new_passphrase:
            request.new_secret = read_new_passphrase(
                from_stdin=getattr(args, "passphrase_stdin", False)
            )
        record = daemon_of(args)
        if record is not None:
            return control.ask(record.control_path, "keys", pid=record.pid, **request.to_wire())
        with open_in_process(args, given_secret=bytearray(current), factors=fac) as vault:
            return keys.perform(vault, request, vault.opened_with)
    finally:
        request.wipe()


# -- passwd ------------------------------------------------------------------------------


def cmd_passwd(args: argparse.Namespace) -> int:
    done = _change(args, "passwd", new_passphrase=True, slot=args.slot, kdf=kdf_from(args))
    extra = " (with its keyfile)" if done.get("kind") == "passphrase+keyfile" else ""
    output.note(
        f"Changed the passphrase of keyslot {done['slot']}{extra} of {vault_path(args)}; "
        f"the old one no longer opens it. {REKEY_LIMIT}"
    )
    if done.get("was") == "passphrase+keyfile" and done.get("kind") == "passphrase":
        output.warn(
            f"keyslot {done['slot']} opens with the passphrase alone now (no keyfile was "
            "given); `memvault 2fa enable` requires a keyfile again."
        )
    return 0


# -- keyslot list | add | remove ---------------------------------------------------------------


def slot_rows(path: Path) -> list[dict[str, Any]]:
    """What `keyslot list` shows: read from the file, no passphrase."""
    rows = []
    for slot in read_info(path).slots:
        if not isinstance(slot, Keyslot):
            rows.append({"index": slot.index, "kind": "damaged", "kdf": None, "created": None})
            continue
        created = None
        if slot.created_ns:
            created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(slot.created_ns / 1e9))
        rows.append(
            {
                "index": slot.index,
                "kind": slot.kind,
                "kdf": slot.kdf.describe(),
                "created": created,
            }
        )
    return rows


def cmd_keyslot_list(args: argparse.Namespace) -> int:
    rows = slot_rows(vault_path(args))
    if args.json:
        output.data_json(rows)
        return 0
    lines = [f"{'slot':<5} {'kind':<19} {'kdf':<30} created"]
    for r in rows:
        kdf, created = r["kdf"] or "-", r["created"] or "unknown"
        lines.append(f"{r['index']:<5} {r['kind']:<19} {kdf:<30} {created}")
    output.data("\n".join(lines) + "\n")
    return 0


def cmd_keyslot_add(args: argparse.Namespace) -> int:
    done = _change(args, "add", new_passphrase=True, kdf=kdf_from(args))
    output.note(f"Added keyslot {done['slot']}: the new passphrase opens {vault_path(args)} too.")
    slots = read_info(vault_path(args)).slots
    if any(isinstance(s, Keyslot) and s.needs_keyfile for s in slots):
        output.warn(
            f"keyslot {done['slot']} opens with its passphrase alone, without a keyfile; "
            "`memvault 2fa enable` with that passphrase makes it need one too."
        )
    return 0


def cmd_keyslot_remove(args: argparse.Namespace) -> int:
    _change(args, "remove", slot=args.index)
    output.note(
        f"Removed keyslot {args.index} of {vault_path(args)}; no byte of it is left in the file. "
        f"{REKEY_LIMIT}"
    )
    return 0


# -- 2fa ------------------------------------------------------------------------------------------


def cmd_2fa_enable(args: argparse.Namespace) -> int:
    path = vault_path(args)
    stored = read_info(path).slots
    slots = [s for s in stored if isinstance(s, Keyslot)]
    if slots and not any(s.kind == "passphrase" for s in slots):
        raise KeyslotRefused(
            "Every passphrase keyslot of the vault already needs a keyfile (2FA is on)."
        )
    no_keyfile = Factors()
    candidates(path, stored, no_keyfile)
    current = secret(args)
    keyfile = chosen_keyfile(getattr(args, "keyfile", None)) or Path(f"{path}.keyfile")
    created = not keyfile.exists()
    new_keyfile = create_keyfile(keyfile) if created else read_keyfile(keyfile)
    try:
        done = _change(
            args,
            "2fa-enable",
            fac=no_keyfile,
            kdf=kdf_from(args),
            new_keyfile=new_keyfile,
            current=current,
        )
    except BaseException:
        if created:
            keyfile.unlink(missing_ok=True)
        raise
    made = "a new keyfile, " if created else "the keyfile "
    output.note(
        f"Keyslot {done['slot']} now needs {made}{keyfile}, as well as its passphrase: give "
        "--keyfile PATH (or set MEMVAULT_KEYFILE) to every command that opens the vault. "
        "Keep the keyfile on another device than the vault (a USB key), with a copy somewhere "
        "safe: without it only a recovery key opens the vault."
    )
    if done.get("plain"):
        output.warn(
            f"keyslot(s) {', '.join(map(str, done['plain']))} still open the vault with a "
            "passphrase alone; `memvault keyslot remove N` removes them."
        )
    return 0


def cmd_2fa_disable(args: argparse.Namespace) -> int:
    done = _change(args, "2fa-disable", kdf=kdf_from(args))
    output.note(f"Keyslot {done['slot']} opens with its passphrase alone again.")
    return 0


def cmd_2fa_status(args: argparse.Namespace) -> int:
    slots = [s for s in read_info(vault_path(args)).slots if isinstance(s, Keyslot)]
    twofa = [str(s.index) for s in slots if s.needs_keyfile]
    plain = [str(s.index) for s in slots if s.kind == "passphrase"]
    if twofa and not plain:
        line = f"2FA is on: keyslot(s) {', '.join(twofa)} need a keyfile as well as a passphrase."
    elif twofa:
        line = (
            f"2FA is partial: keyslot(s) {', '.join(twofa)} need a keyfile, but keyslot(s) "
            f"{', '.join(plain)} open with a passphrase alone."
        )
    else:
        line = "2FA is off: no keyslot needs a keyfile (`memvault 2fa enable` adds one)."
    if any(s.is_recovery for s in slots):
        line += " A recovery key also opens the vault, without a keyfile."
    output.data(line + "\n")
    return 0


# -- recovery ------------------------------------------------------------------------------------


def cmd_recovery_enable(args: argparse.Namespace) -> int:
    done = _change(args, "recovery-enable", kdf=kdf_from(args))
    output.note(
        f"Added a recovery key (keyslot {done['slot']}), shown this once below. Write it down "
        "or print it, and keep it away from this machine: it opens the vault without the "
        "passphrase or keyfile (`memvault unlock --recovery`, `memvault passwd --recovery`)."
    )
    output.data(done["recovery_key"] + "\n")
    return 0


def cmd_recovery_disable(args: argparse.Namespace) -> int:
    done = _change(args, "recovery-disable")
    slots = ", ".join(map(str, done["slots"]))
    output.note(
        f"Removed the recovery key (keyslot {slots}); no byte of it is left in the file. "
        "Copies of the vault file made before still open with that recovery key."
    )
    return 0


# -- registering ---------------------------------------------------------------------------------


def _recovery_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--recovery",
        action="store_true",
        help=f"{what} with the recovery key instead of a passphrase",
    )


def register(add) -> None:
    p = add(
        "passwd",
        cmd_passwd,
        "change the passphrase: asks the current one, then the new one twice; the old "
        "keyslot's bytes leave the file",
    )
    p.epilog = STDIN_LINES + " " + REKEY_LIMIT
    _recovery_option(p, "open the vault (a forgotten passphrase)")
    p.add_argument(
        "--slot",
        type=int,
        metavar="N",
        help="the keyslot the new passphrase replaces (default: the one the current "
        "passphrase opens; with --recovery, the only passphrase keyslot)",
    )
    add_kdf_options(p)

    def group(name: str, help_text: str) -> Any:
        p = add(name, None, help_text)
        return p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def sub(actions, name: str, func, help_text: str) -> argparse.ArgumentParser:
        p = actions.add_parser(
            name, parents=[common_options()], help=help_text, description=help_text
        )
        p.set_defaults(func=func)
        return p

    actions = group("keyslot", "list, add or remove the vault's keyslots")
    p = sub(actions, "list", cmd_keyslot_list, "show each keyslot (no passphrase needed)")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = sub(
        actions,
        "add",
        cmd_keyslot_add,
        "add a passphrase: asks an existing one, then the new one twice",
    )
    p.epilog = STDIN_LINES
    _recovery_option(p, "open the vault")
    add_kdf_options(p)
    p = sub(
        actions,
        "remove",
        cmd_keyslot_remove,
        "remove keyslot N (asks the passphrase of another keyslot); its bytes leave the file",
    )
    p.add_argument("index", type=int, metavar="N")
    _recovery_option(p, "open the vault")

    actions = group("2fa", "require a keyfile as well as the passphrase")
    p = sub(
        actions,
        "enable",
        cmd_2fa_enable,
        "rewrap the passphrase's keyslot so the keyfile is needed too (a new 32-byte keyfile "
        "is made at --keyfile PATH, default VAULT.keyfile, unless that file exists)",
    )
    add_kdf_options(p, "the keyslot's own")
    p = sub(actions, "disable", cmd_2fa_disable, "let the keyslot open with its passphrase alone")
    add_kdf_options(p, "the keyslot's own")
    sub(actions, "status", cmd_2fa_status, "say which keyslots need a keyfile (no passphrase)")

    actions = group("recovery", "an optional recovery key, kept away from this machine")
    p = sub(
        actions,
        "enable",
        cmd_recovery_enable,
        "add a recovery slot and print its key once (asks the passphrase)",
    )
    add_kdf_options(p)
    p = sub(actions, "disable", cmd_recovery_disable, "remove the recovery slot and its bytes")
    _recovery_option(p, "open the vault")
