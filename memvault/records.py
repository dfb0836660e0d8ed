"""A record: one memory, directory or symlink, stored as a single LMDB value.

Layout of the value under ``records[record_id]``::

    u64 gen || u32 len(meta) || sealed meta (JSON) || sealed body (files only)

Both parts are sealed under the record's own data key. The meta carries the
path, so nothing in the LMDB key or layout reveals it. ``gen`` increases on
every change of the record; it is stored in the clear too (and bound into the
meta's associated data) so that the vault's accumulator can account for a
record even when its metadata is damaged. ``body_gen`` names the generation
the body was last written in; the body's associated data includes it, so an
old body spliced next to a newer meta fails to open.
"""

from __future__ import annotations

import json
import stat
import struct
from dataclasses import dataclass, field, replace

FILE = "file"
DIRECTORY = "dir"
SYMLINK = "symlink"
_TYPES = {FILE: stat.S_IFREG, DIRECTORY: stat.S_IFDIR, SYMLINK: stat.S_IFLNK}

DEFAULT_FILE_MODE = 0o600
DEFAULT_DIR_MODE = 0o700

_HEAD = struct.Struct(">QI")


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
        path = self.path.encode()
        target = self.target.encode()
        xattrs = json.dumps(self.xattrs, separators=(",", ":")).encode() if self.xattrs else b""
        fixed = _META.pack(
            _META_VERSION, _TYPE_CODES[self.type], self.mode, self.size, self.mtime_ns,
            self.ctime_ns, self.gen, self.body_gen, self.uid, self.gid,
            len(path), len(target), len(xattrs),
        )  # fmt: skip
        return b"".join((fixed, path, target, xattrs))

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Meta:
        """Parse metadata (binary: a fixed struct, then path, link target, xattrs)."""
        try:
            (version, type_code, mode, size, mtime, ctime, gen, body_gen, uid, gid,
             path_len, target_len, xattrs_len) = _META.unpack_from(data)  # fmt: skip
            if version != _META_VERSION or type_code >= len(_TYPE_NAMES):
                raise ValueError("unknown metadata version or type")
            at = _META.size
            end = at + path_len + target_len + xattrs_len
            if end != len(data):
                raise ValueError("metadata length mismatch")
            view = bytes(data)
            path = view[at : at + path_len].decode()
            target = view[at + path_len : at + path_len + target_len].decode()
            xattrs = json.loads(view[end - xattrs_len : end]) if xattrs_len else {}
        except (ValueError, struct.error) as exc:
            raise RecordFormatError(f"bad record metadata: {exc}") from exc
        return cls(
            path, _TYPE_NAMES[type_code], mode, size, mtime, ctime, gen, body_gen, uid, gid,
            target, xattrs,
        )  # fmt: skip


_META_VERSION = 1
_META = struct.Struct(">BBHQqqQQIIHHI")
_TYPE_NAMES = (FILE, DIRECTORY, SYMLINK)
_TYPE_CODES = {name: code for code, name in enumerate(_TYPE_NAMES)}


def pack(gen: int, sealed_meta: bytes, sealed_body: bytes) -> bytes:
    return _HEAD.pack(gen, len(sealed_meta)) + sealed_meta + sealed_body


def stored_gen(value: bytes | memoryview) -> int:
    """The generation a stored record claims (authenticated only via its meta)."""
    if len(value) < _HEAD.size:
        raise RecordFormatError("record too short")
    return _HEAD.unpack_from(value)[0]


def unpack(value: bytes | memoryview) -> tuple[int, memoryview, memoryview]:
    """Split a stored record into its generation, sealed meta and sealed body."""
    view = memoryview(value)
    if len(view) < _HEAD.size:
        raise RecordFormatError("record too short")
    gen, meta_len = _HEAD.unpack_from(view)
    end = _HEAD.size + meta_len
    if end > len(view):
        raise RecordFormatError("record metadata length out of range")
    return gen, view[_HEAD.size : end], view[end:]
