"""Recovery keys: 160 random bits a person can copy onto paper and type back.

Shown once as 8 groups of 5 Crockford base32 characters (no I, L, O or U;
a typed I or L reads as 1, O as 0, case and dashes do not matter). The last
40 bits are a checksum of the first 160, so a typo is caught when the key is
read, before any Argon2id runs, and told apart from a wrong key.
"""

from __future__ import annotations

import hashlib
import hmac

from .secret import new_key, wipe

KEY_BYTES = 20
"""160 bits: beyond guessing even without Argon2id's cost."""
CHECK_BYTES = 5
GROUP = 5
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VALUES = {c: i for i, c in enumerate(ALPHABET)} | {"I": 1, "L": 1, "O": 0}
LENGTH = (KEY_BYTES + CHECK_BYTES) * 8 // 5


class RecoveryKeyTypo(ValueError):
    """The characters typed are not a recovery key (a wrong character, length or checksum)."""


def _checksum(key: bytes | bytearray) -> bytes:
    return hashlib.blake2b(bytes(key), digest_size=CHECK_BYTES, person=b"memvault.recover").digest()


def new_recovery_key() -> tuple[bytearray, str]:
    """(the key's bytes, which a recovery slot is wrapped under; its printed form)."""
    key = new_key(KEY_BYTES)
    number = int.from_bytes(bytes(key) + _checksum(key), "big")
    chars = [ALPHABET[(number >> (5 * i)) & 31] for i in reversed(range(LENGTH))]
    groups = ["".join(chars[i : i + GROUP]) for i in range(0, LENGTH, GROUP)]
    return key, "-".join(groups)


def parse_recovery_key(typed: bytes | bytearray | str) -> bytearray:
    """The key's bytes from what was typed; RecoveryKeyTypo if it cannot be one."""
    text = typed.decode(errors="replace") if isinstance(typed, bytes | bytearray) else typed
    cleaned = "".join(c for c in text.upper() if c not in " -\t")
    if len(cleaned) != LENGTH:
        raise RecoveryKeyTypo(f"it has {len(cleaned)} characters, not {LENGTH}")
    number = 0
    for c in cleaned:
        if c not in _VALUES:
            raise RecoveryKeyTypo(f"{c!r} is not a character of recovery keys")
        number = number << 5 | _VALUES[c]
    raw = bytearray(number.to_bytes(KEY_BYTES + CHECK_BYTES, "big"))
    key, check = raw[:KEY_BYTES], bytes(raw[KEY_BYTES:])
    wipe(raw)
    if not hmac.compare_digest(check, _checksum(key)):
        wipe(key)
        raise RecoveryKeyTypo("its checksum does not match")
    return key
