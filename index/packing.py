"""Byte strings and arrays laid end to end, each preceded by its length: how
the search index is written into the vault (sealed there by the owner)."""

from __future__ import annotations

import struct

import numpy as np

_LENGTH = struct.Struct(">Q")


def pack(*parts: bytes | np.ndarray) -> bytes:
    out = bytearray()
    for part in parts:
        raw = part if isinstance(part, bytes) else np.ascontiguousarray(part).tobytes()
        out += _LENGTH.pack(len(raw)) + raw
    return bytes(out)


def unpack(data: bytes, count: int) -> list[np.ndarray]:
    """The ``count`` parts of ``pack`` as uint8 arrays (views of ``data``);
    ValueError if ``data`` is not exactly that."""
    view = np.frombuffer(data, np.uint8)
    parts, at = [], 0
    for _ in range(count):
        if at + _LENGTH.size > len(view):
            raise ValueError("truncated")
        (length,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size
        if at + length > len(view):
            raise ValueError("truncated")
        parts.append(view[at : at + length])
        at += length
    if at != len(view):
        raise ValueError("trailing bytes")
    return parts
