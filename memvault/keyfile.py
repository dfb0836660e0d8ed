"""The keyfile of a vault with 2FA: any file (a new one is 32 random bytes),
named by --keyfile or $MEMVAULT_KEYFILE. Only its hash is used
(crypto/keyslot.py); the file is best kept on another device than the vault."""

from __future__ import annotations

import os
from pathlib import Path

from .crypto.keyslot import keyfile_hash
from .crypto.secret import new_key, wipe
from .errors import KeyfileExists, KeyfileUnreadable

ENV_VAR = "MEMVAULT_KEYFILE"
NEW_KEYFILE_BYTES = 32


def chosen_keyfile(given: str | None) -> Path | None:
    """--keyfile, else $MEMVAULT_KEYFILE, else None."""
    chosen = given or os.environ.get(ENV_VAR)
    return Path(chosen).expanduser() if chosen else None


def read_keyfile(path: Path) -> bytes:
    """The keyfile's hash."""
    try:
        content = bytearray(path.read_bytes())
    except OSError as exc:
        raise KeyfileUnreadable(path, exc.strerror or type(exc).__name__) from None
    try:
        return keyfile_hash(content)
    finally:
        wipe(content)


def create_keyfile(path: Path) -> bytes:
    """Write a new keyfile (mode 0600, never over an existing file); return its hash."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise KeyfileExists(path) from None
    except OSError as exc:
        raise KeyfileUnreadable(path, exc.strerror or type(exc).__name__) from None
    content = new_key(NEW_KEYFILE_BYTES)
    try:
        with open(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        return keyfile_hash(content)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise KeyfileUnreadable(path, exc.strerror or type(exc).__name__) from None
    finally:
        wipe(content)
