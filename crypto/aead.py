"""XChaCha20-Poly1305 (IETF) sealing with a fresh random nonce per message.

A sealed message is ``nonce (24) || ciphertext || tag (16)``. The key is passed
to libsodium straight from its buffer, so it is never copied into ``bytes``.
"""

from __future__ import annotations

import nacl._sodium as _sodium

NONCE_SIZE = 24
TAG_SIZE = 16
OVERHEAD = NONCE_SIZE + TAG_SIZE

_ffi = _sodium.ffi
_lib = _sodium.lib

# libsodium must be initialised before use: it then picks the fastest code for
# this CPU (AVX2 ChaCha20 and Poly1305: three times the reference code here)
# and makes randombytes thread-safe. nacl.bindings does it on import; this
# module calls libsodium directly, so it does it itself.
if _lib.sodium_init() < 0:  # pragma: no cover - only on a broken libsodium
    raise ImportError("libsodium could not be initialised")


class DecryptionError(Exception):
    """The ciphertext, its nonce or its associated data failed authentication."""


def _check_key(key: bytes | bytearray) -> None:
    if len(key) != 32:
        raise ValueError("XChaCha20-Poly1305 keys are 32 bytes")


def seal(
    key: bytes | bytearray,
    plaintext: bytes | bytearray | memoryview,
    ad: bytes,
    padded_len: int | None = None,
) -> bytes:
    """Encrypt and authenticate ``plaintext``, binding it to ``ad``.

    ``padded_len`` (at least len(plaintext)) seals the plaintext followed by
    zeros up to that length, so the ciphertext's size shows only the padded
    one. The plaintext is copied once into the output and encrypted in place.
    """
    _check_key(key)
    size = len(plaintext) if padded_len is None else padded_len
    if size < len(plaintext):
        raise ValueError("padded length is shorter than the plaintext")
    out = bytearray(NONCE_SIZE + size + TAG_SIZE)
    out[NONCE_SIZE : NONCE_SIZE + len(plaintext)] = plaintext
    out_buf = _ffi.from_buffer(out)
    _lib.randombytes(out_buf, NONCE_SIZE)
    rc = _lib.crypto_aead_xchacha20poly1305_ietf_encrypt(
        out_buf + NONCE_SIZE,
        _ffi.NULL,  # the ciphertext length is known: size + TAG_SIZE
        out_buf + NONCE_SIZE,  # in place (libsodium allows m == c)
        size,
        ad,
        len(ad),
        _ffi.NULL,
        out_buf,
        _ffi.from_buffer(key),
    )
    if rc != 0:  # pragma: no cover - libsodium only fails on absurd lengths
        raise RuntimeError("XChaCha20-Poly1305 encryption failed")
    return bytes(out)


def open_sealed(
    key: bytes | bytearray, sealed: bytes | memoryview, ad: bytes, out: bytearray | None = None
) -> bytearray:
    """Authenticate and decrypt a sealed message; raise DecryptionError if anything differs.

    The plaintext is returned in a bytearray (``out`` if given) so that callers
    holding key material can wipe it.
    """
    _check_key(key)
    if len(sealed) < OVERHEAD:
        raise DecryptionError("sealed message is shorter than its nonce and tag")
    plain_len = len(sealed) - OVERHEAD
    if out is None:
        out = bytearray(plain_len)
    elif len(out) != plain_len:
        raise ValueError("output buffer has the wrong size")
    sealed_buf = _ffi.from_buffer(sealed)
    rc = _lib.crypto_aead_xchacha20poly1305_ietf_decrypt(
        _ffi.from_buffer(out) if plain_len else _ffi.NULL,
        _ffi.NULL,  # the plaintext length is known: len(sealed) - OVERHEAD
        _ffi.NULL,
        sealed_buf + NONCE_SIZE,
        len(sealed) - NONCE_SIZE,
        ad,
        len(ad),
        sealed_buf,
        _ffi.from_buffer(key),
    )
    if rc != 0:
        raise DecryptionError("authentication failed")
    return out
