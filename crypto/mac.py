"""Keyed BLAKE2b over many parts: hashlib's for short messages, libsodium's for long ones.

Both compute the same standard keyed BLAKE2b, so the result never depends on
the path taken. libsodium's AVX2 code is half again as fast on long inputs
(950 against 640 MB/s here), which matters for the journal: it MACs every
byte written through the mount. hashlib's wins below a few KiB, where
libsodium's per-call setup through cffi dominates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import nacl._sodium as _sodium

from . import aead  # noqa: F401 - initialises libsodium

_ffi = _sodium.ffi
_lib = _sodium.lib

LONG = 16 << 10
"""Bytes from which libsodium computes the MAC."""
_ALIGN = 64  # libsodium's BLAKE2b state is 64-byte aligned


class KeyedBlake2b:
    """MACs under one key (kept by reference: the owner wipes it)."""

    def __init__(self, key: bytearray, digest_size: int) -> None:
        self._key = key
        self._size = digest_size
        self._short = hashlib.blake2b(key=key, digest_size=digest_size)

    def mac(self, parts: Sequence[bytes | bytearray | memoryview]) -> bytes:
        if sum(map(len, parts)) < LONG:
            mac = self._short.copy()
            for part in parts:
                mac.update(part)
            return mac.digest()
        return self._long(parts)

    def _long(self, parts: Sequence[bytes | bytearray | memoryview]) -> bytes:
        raw = _ffi.new("unsigned char[]", _lib.crypto_generichash_statebytes() + _ALIGN)
        offset = -int(_ffi.cast("uintptr_t", raw)) % _ALIGN
        state = _ffi.cast("crypto_generichash_blake2b_state *", raw + offset)
        key = _ffi.from_buffer(self._key)
        if _lib.crypto_generichash_blake2b_init_salt_personal(
            state, key, len(self._key), self._size, _ffi.NULL, _ffi.NULL
        ):  # pragma: no cover - only for sizes outside BLAKE2b's
            raise ValueError("BLAKE2b: bad key or digest size")
        for part in parts:
            if len(part):
                _lib.crypto_generichash_blake2b_update(state, _ffi.from_buffer(part), len(part))
        out = _ffi.new("unsigned char[]", self._size)
        _lib.crypto_generichash_blake2b_final(state, out, self._size)
        return bytes(_ffi.buffer(out, self._size))
