"""Secret key material kept in mutable buffers so it can be wiped.

Python copies immutable ``bytes`` freely, so keys live in ``bytearray`` objects
that are handed to libsodium and libargon2 without copies and zeroed when they
are no longer needed. This is best effort: the interpreter may still hold
transient copies (a passphrase typed at a prompt arrives as a ``str``).
"""

from __future__ import annotations

import nacl._sodium as _sodium

KEY_SIZE = 32

_ffi = _sodium.ffi
_lib = _sodium.lib


def new_key(size: int = KEY_SIZE) -> bytearray:
    """Return ``size`` bytes from the OS CSPRNG (libsodium) in a wipeable buffer."""
    key = bytearray(size)
    _lib.randombytes(_ffi.from_buffer(key), size)
    return key


def wipe(buf: bytearray | None) -> None:
    """Overwrite a secret buffer with zeros (sodium_memzero cannot be optimised away)."""
    if buf:
        _lib.sodium_memzero(_ffi.from_buffer(buf), len(buf))
