"""Where a secret comes from: a no-echo prompt, a line of stdin, or an
environment variable (the weakest: the environment of a process is visible
to other processes of the same user).

With --passphrase-stdin every secret a command needs is one line of
standard input, in the order the command asks for them: the current
passphrase (or recovery key) first, then a new passphrase once (no
confirmation line). Without it, the current one comes from
$MEMVAULT_PASSPHRASE (a recovery key from $MEMVAULT_RECOVERY_KEY), a new one
from $MEMVAULT_NEW_PASSPHRASE, else a prompt (a new one is asked twice).
"""

from __future__ import annotations

import getpass
import os
import sys

from .crypto.recovery import RecoveryKeyTypo as _Typo
from .crypto.recovery import parse_recovery_key
from .crypto.secret import wipe
from .errors import PassphraseError, RecoveryKeyTypo

ENV_VAR = "MEMVAULT_PASSPHRASE"
NEW_ENV_VAR = "MEMVAULT_NEW_PASSPHRASE"
RECOVERY_ENV_VAR = "MEMVAULT_RECOVERY_KEY"
SYNC_ENV_VAR = "MEMVAULT_SYNC_PASSPHRASE"


def read_passphrase(*, from_stdin: bool, confirm: bool = False) -> bytearray:
    """Return the passphrase as UTF-8 in a wipeable buffer."""
    return _read(from_stdin, ENV_VAR, "Passphrase", confirm, "passphrase")


def read_new_passphrase(*, from_stdin: bool) -> bytearray:
    """A new passphrase: the next line of stdin, $MEMVAULT_NEW_PASSPHRASE, or asked twice."""
    return _read(from_stdin, NEW_ENV_VAR, "New passphrase", True, "new passphrase")


def read_sync_passphrase(*, from_stdin: bool, confirm: bool = False) -> bytearray:
    """A sync group's passphrase: the next line of stdin, $MEMVAULT_SYNC_PASSPHRASE,
    or asked (twice for a new group)."""
    return _read(from_stdin, SYNC_ENV_VAR, "Sync group passphrase", confirm, "sync passphrase")


def read_recovery_key(*, from_stdin: bool) -> bytearray:
    """The recovery key's bytes; a typo (its checksum) is refused here, before any KDF."""
    typed = _read(from_stdin, RECOVERY_ENV_VAR, "Recovery key", False, "recovery key")
    try:
        return parse_recovery_key(typed)
    except _Typo as exc:
        raise RecoveryKeyTypo(str(exc)) from None
    finally:
        wipe(typed)


def _read(from_stdin: bool, env_var: str, prompt: str, confirm: bool, what: str) -> bytearray:
    if from_stdin:
        line = sys.stdin.buffer.readline()
        if not line:
            raise PassphraseError(
                f"--passphrase-stdin was given but standard input has no line for the {what}."
            )
        secret = bytearray(line.rstrip(b"\r\n"))
    elif os.environ.get(env_var):
        secret = bytearray(os.environ[env_var].encode())
    else:
        secret = _prompt(prompt, confirm, env_var)
    if not secret:
        raise PassphraseError(f"The {what} is empty.")
    return secret


def _prompt(prompt: str, confirm: bool, env_var: str) -> bytearray:
    try:
        tty = open("/dev/tty")  # noqa: SIM115 - closed below; getpass needs a stream
    except OSError:
        raise PassphraseError(
            "No passphrase: there is no terminal to ask on; "
            f"use --passphrase-stdin or set {env_var}."
        ) from None
    with tty:
        first = getpass.getpass(f"{prompt}: ", stream=sys.stderr)
        if confirm:
            again = getpass.getpass(f"{prompt} (again): ", stream=sys.stderr)
            if again != first:
                raise PassphraseError("The two passphrases do not match; nothing was changed.")
    return bytearray(first.encode())
