"""Padded sizes: what a stored ciphertext's length may reveal of its plaintext.

A sealed value is 40 bytes longer than what it seals, so without padding the
file would tell every memory's exact size and every path's exact length.
Every sealed value is therefore padded to a bucket: a multiple of 128 bytes
below 1 KiB (so a path's length shows only to within 128 bytes, and an empty
file, a directory and a symlink all look alike), and Padmé above (at most
12% larger, leaking O(log log n) bits of the size: "about 40 KB", not
"40,211 bytes"). The one exception, a record's chunk vectors, is sealed at
its exact size: 12 bytes and 384 a chunk, it shows the number of chunks,
which these steps would show as well (sealing.py, seal_derived).
"""

from __future__ import annotations

import struct

SMALL_STEP = 128
_LENGTH = struct.Struct(">I")


def padme(n: int) -> int:
    """Padmé (Nikitin et al., PETS 2019): round n up, keeping only the top bits."""
    if n < 2:
        return n
    exponent = n.bit_length() - 1
    last_bits = exponent - exponent.bit_length()
    mask = (1 << last_bits) - 1
    return (n + mask) & ~mask


def bucket(n: int) -> int:
    """The padded size of an n-byte plaintext (never below SMALL_STEP)."""
    if n <= 8 * SMALL_STEP:
        return max(SMALL_STEP, -(-n // SMALL_STEP) * SMALL_STEP)
    return padme(n)


def frame(data: bytes) -> bytes:
    """``data`` with its length in front, for values whose size nothing else records."""
    return _LENGTH.pack(len(data)) + data


def unframe(plain: bytes | bytearray) -> bytes:
    """The data of a framed, padded plaintext; ValueError if it does not fit."""
    if len(plain) < _LENGTH.size:
        raise ValueError("padded value too short")
    (length,) = _LENGTH.unpack_from(plain)
    end = _LENGTH.size + length
    if end > len(plain):
        raise ValueError("padded value length out of range")
    return bytes(plain[_LENGTH.size : end])
