"""A record: one memory, directory or symlink, stored as a single LMDB value.

Layout of the value under ``records[record_id]``::

    sealed gen (48) || u32 len(sealed meta) || sealed meta || sealed body

Meta and body are sealed under the record's own data key and padded (see
padding.py), and every record has a body (empty for directories and
symlinks), so the stored value shows neither the record's type, nor its exact
size, nor its path's length. The meta carries the path, the type and the
generations: ``gen`` increases on every change of the record (the vault's
accumulator counts it); ``body_gen`` names the generation the body was last
written in, and the body's associated data includes it, so an old body
spliced next to a newer meta fails to open. A file larger than one chunk
is ``chunked``: its body is then the table of its chunks (see bodies.py).

``gen`` is also sealed on its own, under the master key, first in the value:
when a record's key or metadata is damaged, the vault can still account for
it in the accumulator and open the rest. Nothing but the length of the sealed
meta is in the clear; no edit counter is readable.
"""

from __future__ import annotations

import json
import stat
import struct
from dataclasses import dataclass, field

FILE = "file"
DIRECTORY = "dir"
SYMLINK = "symlink"
_TYPES = {FILE: stat.S_IFREG, DIRECTORY: stat.S_IFDIR, SYMLINK: stat.S_IFLNK}

DEFAULT_FILE_MODE = 0o600
DEFAULT_DIR_MODE = 0o700


class RecordFormatError(Exception):
    """A decrypted record does not have the expected structure."""


@dataclass(slots=True)
class Meta:
    """A record's metadata. Treated as immutable: changes go through evolve()."""

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
    chunked: bool = False
    atime_ns: int = 0  # 0: never set, shown as the mtime (reads do not update it)
    orphan: bool = False  # unlinked while open: no name, shredded at the last close

    @property
    def is_dir(self) -> bool:
        return self.type == DIRECTORY

    @property
    def st_mode(self) -> int:
        return _TYPES[self.type] | (self.mode & 0o7777)

    @property
    def shown_atime_ns(self) -> int:
        return self.atime_ns or self.mtime_ns

    def evolve(self, **changes) -> Meta:
        """A copy with ``changes`` applied and the generation bumped."""
        return self.but(gen=self.gen + 1, **changes)

    def but(self, **changes) -> Meta:
        """A copy with ``changes`` applied (dataclasses.replace, without its cost)."""
        new = Meta(
            self.path,
            self.type,
            self.mode,
            self.size,
            self.mtime_ns,
            self.ctime_ns,
            self.gen,
            self.body_gen,
            self.uid,
            self.gid,
            self.target,
            self.xattrs,
            self.chunked,
            self.atime_ns,
            self.orphan,
        )
        for name, value in changes.items():
            setattr(new, name, value)
        return new

    def encode(self) -> bytes:
        """The binary metadata, unpadded (the vault pads it when sealing)."""
        path = self.path.encode()
        target = self.target.encode()
        xattrs = json.dumps(self.xattrs, separators=(",", ":")).encode() if self.xattrs else b""
        flags = (_CHUNKED if self.chunked else 0) | (_ORPHAN if self.orphan else 0)
        fixed = _META.pack(
            _META_VERSION,
            flags,
            _TYPE_CODES[self.type],
            self.mode,
            self.size,
            self.mtime_ns,
            self.ctime_ns,
            self.atime_ns,
            self.gen,
            self.body_gen,
            self.uid,
            self.gid,
            len(path),
            len(target),
            len(xattrs),
        )
        return b"".join((fixed, path, target, xattrs))

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Meta:
        """Parse metadata (a fixed struct, then path, link target, xattrs, then zero padding)."""
        try:
            version = data[0] if len(data) else None
            if version == 1:  # before chunks, atime and orphans
                fields = _META_V1.unpack_from(data)
                type_code, mode, size, mtime, ctime, gen, body_gen, uid, gid = fields[1:10]
                flags, atime, lengths, at = 0, 0, fields[10:], _META_V1.size
            elif version == _META_VERSION:
                fields = _META.unpack_from(data)
                flags, type_code, mode, size, mtime, ctime, atime = fields[1:8]
                gen, body_gen, uid, gid = fields[8:12]
                lengths, at = fields[12:], _META.size
            else:
                raise ValueError("unknown metadata version")
            path_len, target_len, xattrs_len = lengths
            if type_code >= len(_TYPE_NAMES) or flags & ~(_CHUNKED | _ORPHAN):
                raise ValueError("unknown metadata type or flags")
            end = at + path_len + target_len + xattrs_len
            if end > len(data):
                raise ValueError("metadata length mismatch")
            view = bytes(data)
            if view[end:].strip(b"\0"):
                raise ValueError("metadata padding is not zero")
            path = view[at : at + path_len].decode()
            target = view[at + path_len : at + path_len + target_len].decode()
            xattrs = json.loads(view[end - xattrs_len : end]) if xattrs_len else {}
        except (ValueError, struct.error) as exc:
            raise RecordFormatError(f"bad record metadata: {exc}") from exc
        return cls(
            path,
            _TYPE_NAMES[type_code],
            mode,
            size,
            mtime,
            ctime,
            gen,
            body_gen,
            uid,
            gid,
            target,
            xattrs,
            bool(flags & _CHUNKED),
            atime,
            bool(flags & _ORPHAN),
        )


_META_VERSION = 2
# version, flags, type, mode, size, mtime, ctime, atime, gen, body_gen, uid, gid,
# and the lengths of path (no limit but 4 GiB), link target and xattrs
_META = struct.Struct(">BBBHQqqqQQIIIHI")
_META_V1 = struct.Struct(">BBHQqqQQIIHHI")  # no flags, no atime, paths up to 64 KiB
_CHUNKED = 0x01
_ORPHAN = 0x02
_TYPE_NAMES = (FILE, DIRECTORY, SYMLINK)
_TYPE_CODES = {name: code for code, name in enumerate(_TYPE_NAMES)}


_LEN = struct.Struct(">I")
GEN = struct.Struct(">Q")
SEALED_GEN_SIZE = GEN.size + 40  # nonce and tag
STAMP_SIZE = 24
"""The random nonce every stored value starts with: new whenever the record changes."""


def pack(sealed_gen: bytes, sealed_meta: bytes, sealed_body: bytes) -> bytes:
    if len(sealed_gen) != SEALED_GEN_SIZE:
        raise ValueError("a sealed generation is 48 bytes")
    return b"".join((sealed_gen, _LEN.pack(len(sealed_meta)), sealed_meta, sealed_body))


def unpack(value: bytes | memoryview) -> tuple[memoryview, memoryview, memoryview]:
    """Split a stored record into its sealed generation, sealed meta and sealed body."""
    view = memoryview(value)
    start = SEALED_GEN_SIZE + _LEN.size
    if len(view) < start:
        raise RecordFormatError("record too short")
    (meta_len,) = _LEN.unpack_from(view, SEALED_GEN_SIZE)
    end = start + meta_len
    if end > len(view):
        raise RecordFormatError("record metadata length out of range")
    return view[:SEALED_GEN_SIZE], view[start:end], view[end:]
