"""A record: one memory, directory or symlink, stored as a single LMDB value.

Layout of the value under ``records[record_id]``::

    u32 len(meta) || sealed meta (JSON) || sealed body (files only)

Both parts are sealed under the record's own data key. The meta carries the
path, so nothing in the LMDB key or layout reveals it. ``gen`` increases on
every change of the record and ``body_gen`` names the generation the body was
last written in; the body's associated data includes ``body_gen``, so an old
body spliced next to a newer meta fails to open.
"""

from __future__ import annotations

import json
import stat
import struct
from dataclasses import asdict, dataclass, field, replace

FILE = "file"
DIRECTORY = "dir"
SYMLINK = "symlink"
_TYPES = {FILE: stat.S_IFREG, DIRECTORY: stat.S_IFDIR, SYMLINK: stat.S_IFLNK}

DEFAULT_FILE_MODE = 0o600
DEFAULT_DIR_MODE = 0o700

_LEN = struct.Struct(">I")


class RecordFormatError(Exception):
    """A decrypted record does not have the expected structure."""


@dataclass(frozen=True)
class Meta:
    path: str
    type: str
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    gen: int
    body_gen: int
    uid: int = 0
    gid: int = 0
    target: str = ""
    xattrs: dict[str, str] = field(default_factory=dict)

    @property
    def is_dir(self) -> bool:
        return self.type == DIRECTORY

    @property
    def st_mode(self) -> int:
        return _TYPES[self.type] | (self.mode & 0o7777)

    def evolve(self, **changes) -> Meta:
        """A copy with ``changes`` applied and the generation bumped."""
        return replace(self, gen=self.gen + 1, **changes)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Meta:
        try:
            doc = json.loads(data)
            meta = cls(**doc)
        except (ValueError, TypeError) as exc:
            raise RecordFormatError(f"bad record metadata: {exc}") from exc
        if meta.type not in _TYPES:
            raise RecordFormatError(f"unknown record type {meta.type!r}")
        return meta


def pack(sealed_meta: bytes, sealed_body: bytes) -> bytes:
    return _LEN.pack(len(sealed_meta)) + sealed_meta + sealed_body


def unpack(value: bytes | memoryview) -> tuple[memoryview, memoryview]:
    """Split a stored record into its sealed meta and sealed body."""
    view = memoryview(value)
    if len(view) < _LEN.size:
        raise RecordFormatError("record too short")
    (meta_len,) = _LEN.unpack_from(view)
    end = _LEN.size + meta_len
    if end > len(view):
        raise RecordFormatError("record metadata length out of range")
    return view[_LEN.size : end], view[end:]
