"""XChaCha20-Poly1305 (IETF) sealing with a fresh random nonce per message.

A sealed message is ``nonce (24) || ciphertext || tag (16)``. The key is passed
to libsodium straight from its buffer, so it is never copied into ``bytes``.

Messages of LARGE_MESSAGE bytes or more (file chunks) take a second road to
the same bytes: XChaCha20-Poly1305 is, by definition, ChaCha20-Poly1305
(RFC 8439) under the subkey HChaCha20(key, nonce[:16]) with the nonce
``0000 || nonce[16:]``. libsodium derives the subkey; OpenSSL's
ChaCha20-Poly1305 (AVX-512 here: 2.5 times libsodium's AVX2 code on 64 KiB)
does the rest. Both roads read and write each other's messages (tested).
The subkey opens that one message only; it is handed to OpenSSL as ``bytes``.
"""

from __future__ import annotations

import cffi
import nacl._sodium as _sodium
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

NONCE_SIZE = 24
TAG_SIZE = 16
OVERHEAD = NONCE_SIZE + TAG_SIZE

_ffi = _sodium.ffi
_lib = _sodium.lib
# Looked up once: a small seal is mostly call overhead (a third less this way).
_from_buffer = _ffi.from_buffer
_randombytes = _lib.randombytes
_encrypt = _lib.crypto_aead_xchacha20poly1305_ietf_encrypt
_NULL = _ffi.NULL

# libsodium must be initialised before use: it then picks the fastest code for
# this CPU (AVX2 ChaCha20 and Poly1305: three times the reference code here)
# and makes randombytes thread-safe. nacl.bindings does it on import; this
# module calls libsodium directly, so it does it itself.
if _lib.sodium_init() < 0:  # pragma: no cover - only on a broken libsodium
    raise ImportError("libsodium could not be initialised")

LARGE_MESSAGE = 16 << 10
"""From this size on, OpenSSL's ChaCha20-Poly1305 is faster despite its setup."""
_IETF_NONCE_PREFIX = bytes(4)


def _load_hchacha20():
    """libsodium's HChaCha20 (PyNaCl's bindings leave it out; its library has it)."""
    ffi = cffi.FFI()
    ffi.cdef(
        "int crypto_core_hchacha20(unsigned char *out, const unsigned char *in,"
        " const unsigned char *k, const unsigned char *c);"
    )
    try:
        return ffi, ffi.dlopen(_sodium.__file__).crypto_core_hchacha20
    except (OSError, AttributeError):  # pragma: no cover - a PyNaCl built otherwise
        return ffi, None


_hffi, _hchacha20 = _load_hchacha20()


def _ietf(key: bytes | bytearray, nonce: bytes | memoryview) -> tuple[ChaCha20Poly1305, bytes]:
    """The RFC 8439 cipher and nonce that XChaCha20-Poly1305 is under ``nonce``."""
    subkey = bytearray(32)
    _hchacha20(
        _hffi.from_buffer(subkey), _hffi.from_buffer(nonce[:16]), _hffi.from_buffer(key), _hffi.NULL
    )
    cipher = ChaCha20Poly1305(bytes(subkey))
    subkey[:] = bytes(32)
    return cipher, _IETF_NONCE_PREFIX + bytes(nonce[16:NONCE_SIZE])


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
) -> bytes | bytearray:
    """Encrypt and authenticate ``plaintext``, binding it to ``ad``.

    ``padded_len`` (at least len(plaintext)) seals the plaintext followed by
    zeros up to that length, so the ciphertext's size shows only the padded
    one. The plaintext is copied once into the output and encrypted in place.
    A large message comes back in the bytearray it was sealed into: copying
    it into ``bytes`` took a tenth of the time of a large write.
    """
    _check_key(key)
    n = len(plaintext)
    size = n if padded_len is None else padded_len
    if size < n:
        raise ValueError("padded length is shorter than the plaintext")
    out = bytearray(NONCE_SIZE + size + TAG_SIZE)
    if size >= LARGE_MESSAGE and _hchacha20 is not None:
        _randombytes(_from_buffer(out), NONCE_SIZE)
        if size > n:
            plaintext = bytes(plaintext) + bytes(size - n)
        cipher, nonce = _ietf(key, memoryview(out)[:NONCE_SIZE])
        cipher.encrypt_into(nonce, plaintext, ad, memoryview(out)[NONCE_SIZE:])
        return out
    out[NONCE_SIZE : NONCE_SIZE + n] = plaintext
    out_buf = _from_buffer(out)
    _randombytes(out_buf, NONCE_SIZE)
    text = out_buf + NONCE_SIZE
    # in place (libsodium allows m == c); the ciphertext length is known: size + TAG_SIZE
    if _encrypt(text, _NULL, text, size, ad, len(ad), _NULL, out_buf, _from_buffer(key)):
        raise RuntimeError("XChaCha20-Poly1305 encryption failed")  # pragma: no cover
    return bytes(out)


def open_sealed(
    key: bytes | bytearray,
    sealed: bytes | memoryview,
    ad: bytes,
    out: bytearray | memoryview | None = None,
) -> bytearray:
    """Authenticate and decrypt a sealed message; raise DecryptionError if anything differs.

    The plaintext is returned in a bytearray so that callers holding key
    material can wipe it, or written into ``out`` (a writable buffer of exactly
    the plaintext's length, such as part of a larger one), which is returned.
    """
    _check_key(key)
    if len(sealed) < OVERHEAD:
        raise DecryptionError("sealed message is shorter than its nonce and tag")
    plain_len = len(sealed) - OVERHEAD
    if out is None:
        out = bytearray(plain_len)
    elif len(out) != plain_len:
        raise ValueError("output buffer has the wrong size")
    if plain_len >= LARGE_MESSAGE and _hchacha20 is not None:
        view = memoryview(sealed)
        cipher, nonce = _ietf(key, view[:NONCE_SIZE])
        try:
            cipher.decrypt_into(nonce, view[NONCE_SIZE:], ad, out)
        except InvalidTag:
            out[:] = bytes(plain_len)  # whatever a forgery decrypted to is not kept
            raise DecryptionError("authentication failed") from None
        return out
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
