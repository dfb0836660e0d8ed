"""Where a passphrase comes from: a no-echo prompt, one line of stdin, or
MEMVAULT_PASSPHRASE (the weakest: the environment of a process is visible to
other processes of the same user)."""

from __future__ import annotations

import getpass
import os
import sys

from .errors import PassphraseError

ENV_VAR = "MEMVAULT_PASSPHRASE"


def read_passphrase(*, from_stdin: bool, confirm: bool = False) -> bytearray:
    """Return the passphrase as UTF-8 in a wipeable buffer."""
    if from_stdin:
        line = sys.stdin.buffer.readline()
        if not line:
            raise PassphraseError("--passphrase-stdin was given but standard input is empty.")
        secret = bytearray(line.rstrip(b"\r\n"))
    elif os.environ.get(ENV_VAR):
        secret = bytearray(os.environ[ENV_VAR].encode())
    else:
        secret = _prompt(confirm)
    if not secret:
        raise PassphraseError("The passphrase is empty.")
    return secret


def _prompt(confirm: bool) -> bytearray:
    try:
        tty = open("/dev/tty")  # noqa: SIM115 - closed below; getpass needs a stream
    except OSError:
        raise PassphraseError(
            "No passphrase: there is no terminal to ask on; "
            f"use --passphrase-stdin or set {ENV_VAR}."
        ) from None
    with tty:
        first = getpass.getpass("Passphrase: ", stream=sys.stderr)
        if confirm:
            again = getpass.getpass("Passphrase (again): ", stream=sys.stderr)
            if again != first:
                raise PassphraseError("The two passphrases do not match; nothing was created.")
    return bytearray(first.encode())
