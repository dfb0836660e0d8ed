"""Reading an LMDB file whose structure LMDB itself refuses.

LMDB trusts its pages: one damaged node header (a key or value size that
points past its page) makes it fail on the whole file, although every other
key and value is intact. This module walks the B-trees the way LMDB would,
checking every offset and size before using it, and skips what does not fit.
What it returns is only ciphertext and still has to authenticate: the vault
decides what it is worth (see Store's salvage copy and Vault.repair).

The layout read here is LMDB 0.9's (format version 1), little-endian, as
written by py-lmdb on the platforms memvault runs on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
_NODE = struct.Struct("<HHHH")  # lo, hi, flags, key size
_P_BRANCH, _P_LEAF, _P_OVERFLOW, _P_META = 0x01, 0x02, 0x04, 0x08
_F_BIGDATA, _F_SUBDATA = 0x01, 0x02
_MAGIC = 0xBEEFC0DE
_MAIN_ROOT = 16 + 72 + 40  # page header, meta fields, then MDB_db[MAIN_DBI].md_root
_TXNID = 16 + 128
_PAGE_SIZES = (4096, 8192, 16384, 32768, 65536)
_MAX_KEY = 511  # LMDB's default largest key


def meta_page_ok(page: bytes, number: int) -> bool:
    """Whether ``page`` is a meta page LMDB would accept at position ``number``."""
    return (
        len(page) >= 64
        and _U64.unpack_from(page, 0)[0] == number
        and _U16.unpack_from(page, 10)[0] & _P_META
        and struct.unpack_from("<II", page, 16) == (_MAGIC, 1)
        and struct.unpack_from("<I", page, 40)[0] == len(page)
    )


def page_size(data: bytes) -> int | None:
    for start in (0, 4096):
        size = struct.unpack_from("<I", data, start + 40)[0] if len(data) >= start + 44 else 0
        if size in _PAGE_SIZES and len(data) >= 2 * size:
            return size
    return None


class _Reader:
    def __init__(self, data: bytes, psize: int) -> None:
        self.data = data
        self.psize = psize
        self.pages = len(data) // psize
        self.skipped = 0  # nodes or pages that did not fit

    def page(self, pgno: int) -> bytes | None:
        if not 2 <= pgno < self.pages:
            return None
        return self.data[pgno * self.psize : (pgno + 1) * self.psize]

    def walk(self, root: int) -> Iterator[tuple[bytes, bytes, int]]:
        """(key, value, node flags) of every leaf node reachable from ``root``."""
        stack, seen = [root], set()
        while stack:
            pgno = stack.pop()
            if pgno in seen:
                continue
            seen.add(pgno)
            page = self.page(pgno)
            if page is None:
                self.skipped += 1
                continue
            flags, lower, upper = struct.unpack_from("<HHH", page, 10)
            if not 16 <= lower <= upper <= self.psize or not flags & (_P_BRANCH | _P_LEAF):
                self.skipped += 1
                continue
            for i in range((lower - 16) // 2):
                at = _U16.unpack_from(page, 16 + 2 * i)[0]
                if not upper <= at <= self.psize - _NODE.size:
                    self.skipped += 1
                    continue
                lo, hi, node_flags, key_size = _NODE.unpack_from(page, at)
                key_at = at + _NODE.size
                if flags & _P_BRANCH:
                    stack.append(lo | hi << 16 | node_flags << 32)
                    continue
                found = self._leaf_value(page, key_at, key_size, lo | hi << 16, node_flags)
                if found is None:
                    self.skipped += 1
                    continue
                yield page[key_at : key_at + key_size], found, node_flags

    def _leaf_value(self, page, key_at, key_size, size, node_flags) -> bytes | None:
        value_at = key_at + key_size
        if node_flags & _F_BIGDATA:
            if value_at + 8 > self.psize:
                return None
            first = self.page(_U64.unpack_from(page, value_at)[0])
            if first is None or not _U16.unpack_from(first, 10)[0] & _P_OVERFLOW:
                return None
            start = _U64.unpack_from(page, value_at)[0] * self.psize + 16
            end = start + size
            return self.data[start:end] if end <= len(self.data) else None
        end = value_at + size
        return page[value_at:end] if end <= self.psize else None


def read_tolerantly(path: Path, names: tuple[str, ...]) -> tuple[dict[str, dict], int]:
    """The named databases' keys and values that can still be reached, and how many
    nodes or pages had to be skipped. Raises ValueError if no meta page is usable."""
    data = path.read_bytes()
    psize = page_size(data)
    if psize is None:
        raise ValueError("no usable page size")
    metas = [data[i * psize : (i + 1) * psize] for i in (0, 1)]
    usable = [m for i, m in enumerate(metas) if meta_page_ok(m, i)]
    if not usable:
        raise ValueError("no usable meta page")
    meta = max(usable, key=lambda m: _U64.unpack_from(m, _TXNID)[0])
    reader = _Reader(data, psize)
    roots = {}
    for key, value, flags in reader.walk(_U64.unpack_from(meta, _MAIN_ROOT)[0]):
        name = key.decode(errors="replace")
        if flags & _F_SUBDATA and name in names and len(value) >= 48:
            roots[name] = _U64.unpack_from(value, 40)[0]
    found: dict[str, dict] = {name: {} for name in names}
    for name, root in roots.items():
        if root == 0xFFFFFFFFFFFFFFFF:  # P_INVALID: an empty database
            continue
        for key, value, _ in reader.walk(root):
            if 0 < len(key) <= _MAX_KEY:
                found[name][bytes(key)] = bytes(value)
            else:
                reader.skipped += 1
    return found, reader.skipped
