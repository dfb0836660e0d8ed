"""The journal: changes that are committed but not yet in LMDB.

A mounted vault must not lose a closed file if its daemon is killed, but an
fsync per close would make every small file cost a disk flush. So each change
is appended to ``<vault>-journal`` with one write() (it is then in the
kernel's page cache and survives the death of the process), applied to the
in-memory overlay, and moved into LMDB in batches: one commit and one fsync
per batch, after which the journal is emptied. fsync() on a file, lock and
close flush at once; an unlock replays what a killed daemon left.

Entries hold exactly what the LMDB commit would have held (random record ids
and sealed values), each with a sequence number and a BLAKE2b MAC keyed from
the master key. The MAC covers every value whole except a file's chunks of 4
KiB or more, which it covers by their length, last 16 bytes and a CRC-32 of
a sample of them: a chunk is one XChaCha20-Poly1305 seal under its record's
key, bound to its record, index and generation, so that tag authenticates
it, and the sample catches a chunk torn by a power cut. A power cut tears a
file at disk sectors (512 bytes or more); the sample holds 8 bytes of every
256, so each sector a chunk fills holds at least 8 sampled bytes, and a
sector left unwritten (zeros, or older ciphertext) changes them. The MAC
then reads a thirty-second of a chunk instead of hashing every byte a second
time (a chunk changed outside its sample fails its own authentication when
read, as it would with any checksum forged to match). A header at the
start of the file, MAC'd too and rewritten after every entry (on the mount's
hot paths once it has replied, see append), names the boot it was written in
and the last sequence number appended. Within one boot the page cache cannot
lose a write, so a journal that ends before its header says, or whose last
entry fails its MAC, was damaged or cut on purpose; only after a restart (a
power cut) may its tail be torn. The store decides what to accept (see Store.attach_journal).

Once an fsync() asks for the journal's durability, zeros are written ahead of
its entries, a PREALLOCATED step at a time, and the journal is emptied by
overwriting its entries with zeros (the file keeps up to PREALLOCATED_MAX
bytes): an entry appended among the zeros changes no file size, so the
fdatasync behind fsync() commits no file system metadata (on ext4, about half
its cost). A zero entry header ends the journal as the end of the file does.
Zeros only serve fsync: a journal emptied after a while without one is cut
back to its header, so a burst of writes that nobody fsyncs writes no zeros
and syncs none.
"""

from __future__ import annotations

import hmac
import os
import struct
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..crypto.mac import KeyedBlake2b
from .schema import CHUNKS, DB_NAMES

_HEAD = struct.Struct(">IQ")  # payload length, sequence number
_OP = struct.Struct(">BBHI")  # database index, op, key length, value length
_FILE_HEAD = struct.Struct(">4s16sQ")  # magic, boot id, last sequence number
_MAGIC = b"MVJ4"
_WHOLE_CRC_MAGIC = b"MVJ3"
"""The previous format, whose summaries hold a CRC-32 of the whole chunk: still replayed."""
_FULL_MAC_MAGIC = b"MVJ2"
"""The one before, whose MACs hash large values whole: still replayed."""
_SUMMARY = struct.Struct(">QI")  # a large value's length and CRC-32, then its tag
_TAG_SIZE = 16
_MAC_SIZE = 32
HEADER_SIZE = _FILE_HEAD.size + _MAC_SIZE
_IOV_MAX = os.sysconf("SC_IOV_MAX")
PUT, DELETE = 1, 2
PREALLOCATED = 64 << 10
"""Zeros written ahead of the entries at a time (while fsyncs come): the fsync
after each step commits a size change and the step's zeros (1 MiB made the
first fsync after a quiet while take 3-4 ms where 64 KiB took 1.2-2.3)."""
PREALLOCATED_MAX = 1 << 20
"""What the file keeps when it is emptied (a larger one shrinks back to it). More
would serve longer bursts, but emptying it writes every zero again: 16 MiB made
a burst of new files 6 µs a write slower, in the flush's pauses."""
_ROOM_FOR_ZEROS = 64 << 20
"""Free disk space below which no zeros are written ahead."""

_SCHEMES = (_MAGIC, _WHOLE_CRC_MAGIC, _FULL_MAC_MAGIC)
"""The formats replayed, by their magic."""

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
NO_BOOT = bytes(16)
"""The boot id recorded when no journaled session is open."""


def current_boot_id() -> bytes:
    """This boot's id (16 bytes); all ones if the kernel does not say."""
    try:
        with open(BOOT_ID_PATH) as f:
            return uuid.UUID(f.read().strip()).bytes
    except (OSError, ValueError):
        return b"\xff" * 16


class Op(NamedTuple):
    """One change of one key (a tuple: several are made for every commit)."""

    db: int
    kind: int
    key: bytes
    value: bytes = b""


@dataclass(frozen=True, slots=True)
class Ref:
    """Where a journaled value lies in the journal file: the store keeps this,
    not the value, for values of REF_MIN bytes or more (a large file's chunks
    would otherwise sit in the daemon's memory until they reach LMDB). The
    epoch counts the journal's resets: once it moved on, the value is in LMDB."""

    epoch: int
    offset: int
    length: int


class StaleRef(Exception):
    """The journal was emptied since: the value is in LMDB now."""


REF_MIN = 4096
SUMMARY_MIN = 4096
"""Chunks from this size are MAC'd by their summary (length, CRC-32, tag)."""
_LARGE = min(REF_MIN, SUMMARY_MIN)
"""From this size on, a value may be summarised for the MAC or kept as a Ref."""
_CHUNKS_DB = DB_NAMES.index(CHUNKS)


@dataclass
class Contents:
    """What a journal file holds, as far as it verifies."""

    boot_id: bytes | None  # None: the header is missing or fails its MAC
    last_seq: int
    entries: list[tuple[int, list[Op]]] = field(default_factory=list)
    clean_end: bool = True  # False: the file goes on after the last entry that verifies
    end: int = HEADER_SIZE  # where the last entry that verifies ends


def journal_path(vault: Path) -> Path:
    return vault.with_name(vault.name + "-journal")


def _encode(ops: list[Op]) -> list[bytes]:
    """The payload as parts, not joined: a 256 MiB value is not copied."""
    parts = []
    for op in ops:
        parts.append(_OP.pack(op.db, op.kind, len(op.key), len(op.value)))
        parts.append(op.key)
        parts.append(op.value)
    return parts


_SAMPLE_STRIDE = 256
_SAMPLE_SIZE = 8


def _sample(value: bytes | bytearray | memoryview) -> bytes:
    """The last 8 bytes of every 256 of ``value`` (see the module docstring)."""
    whole = len(value) // _SAMPLE_STRIDE * _SAMPLE_STRIDE
    words = memoryview(value)[:whole].cast("Q")
    return words[_SAMPLE_STRIDE // _SAMPLE_SIZE - 1 :: _SAMPLE_STRIDE // _SAMPLE_SIZE].tobytes()


def _summarised(parts: list, *, sampled: bool = True) -> list:
    """The parts a MAC covers (op header, key, value for each operation): a
    large chunk by its length, the CRC-32 of its sample (of all of it in the
    previous format) and its tag, everything else whole."""
    covered = list(parts)
    for i in range(2, len(parts), 3):
        value = parts[i]
        if len(value) >= SUMMARY_MIN and parts[i - 2][0] == _CHUNKS_DB:
            crc = zlib.crc32(_sample(value) if sampled else value)
            covered[i] = _SUMMARY.pack(len(value), crc) + value[-_TAG_SIZE:]
    return covered


def _split(payload: bytes) -> list[memoryview]:
    """A payload cut back into the parts _encode made (struct.error if it does not parse)."""
    view, parts, at = memoryview(payload), [], 0
    while at < len(view):
        _, _, key_len, value_len = _OP.unpack_from(view, at)
        end = at + _OP.size + key_len + value_len
        if end > len(view):
            raise struct.error("an operation runs past its entry")
        parts += [
            view[at : at + _OP.size],
            view[at + _OP.size : end - value_len],
            view[end - value_len : end],
        ]
        at = end
    return parts


def _decode(payload: bytes) -> list[Op]:
    ops, at = [], 0
    while at < len(payload):
        db, kind, key_len, value_len = _OP.unpack_from(payload, at)
        at += _OP.size
        key = payload[at : at + key_len]
        at += key_len
        value = payload[at : at + value_len]
        at += value_len
        ops.append(Op(db, kind, key, value))
    return ops


def scan_unauthenticated(path: Path) -> Iterator[Op]:
    """Every operation in a journal file, without checking MACs (no key needed).

    Only for reporting (`lock`, `status`): what it finds is never applied.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return
    at = HEADER_SIZE
    while at + _HEAD.size <= len(data):
        length, seq = _HEAD.unpack_from(data, at)
        if not seq:  # the zeros past the last entry
            return
        end = at + _HEAD.size + length + _MAC_SIZE
        if end > len(data):
            return
        try:
            yield from _decode(data[at + _HEAD.size : end - _MAC_SIZE])
        except struct.error:
            return
        at = end


class Journal:
    def __init__(self, path: Path, key: bytearray, *, readonly: bool = False) -> None:
        self.path = path
        self._key = key
        self._boot = NO_BOOT
        flags = os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT
        self._fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
        self.length = os.fstat(self._fd).st_size  # of the file
        self.size = self.length  # where the next entry goes (see cut)
        self.epoch = 0  # bumped whenever the file is emptied: older Refs are stale
        self._fsynced = False  # since it was last emptied (see expect_fsyncs)
        self._keyed = KeyedBlake2b(key, _MAC_SIZE)
        self._header_due: int | None = None  # the sequence number the header must name next

    def _mac(self, *parts: bytes) -> bytes:
        return self._keyed.mac(parts)

    def _header(self, seq: int) -> bytes:
        head = _FILE_HEAD.pack(_MAGIC, self._boot, seq)
        return head + self._mac(b"header", head)

    def start(self, boot_id: bytes, seq: int) -> None:
        """Begin an empty journal for this boot, durably (its absence would mean loss)."""
        self._boot = boot_id
        self.epoch += 1
        self._header_due = None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, self._header(seq), 0)
        self.length = HEADER_SIZE
        os.fsync(self._fd)
        directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self.size = HEADER_SIZE

    def append(self, seq: int, ops: list[Op], *, header_later: bool = False) -> list[Op]:
        """Append one entry with a single write, then the header; on failure leave neither.

        ``header_later`` leaves the header to write_due_header, which the caller
        runs once it has replied (vault/later.py): a replay takes every entry
        that verifies, so the entry is kept either way, and a header rewritten
        a moment later still sees a cut made meanwhile. Returns the ops with
        each large value replaced by its Ref in the file.
        """
        parts = _encode(ops)
        length = sum(map(len, parts))
        head = _HEAD.pack(length, seq)
        large = max(map(len, parts[2::3]), default=0) >= _LARGE
        if large:  # not copied; chunks MAC'd by their summary
            entry = [head, *parts, self._mac(head, *_summarised(parts))]
            if len(entry) > _IOV_MAX:
                entry = [b"".join(entry)]
        else:  # small: one copy, MAC'd in one piece (the same MAC as part by part)
            body = b"".join((head, *parts))
            entry = [body, self._mac(body)]
        size = _HEAD.size + length + _MAC_SIZE
        if self._fsynced and self.size + size > self.length:
            self._zeros_ahead(self.size + size)
        try:
            if os.pwritev(self._fd, entry, self.size) != size:
                raise OSError(28, "short write to the journal")
            if header_later:
                self._header_due = seq
            else:
                os.pwrite(self._fd, self._header(seq), 0)
                self._header_due = None
        except OSError:  # the file as it was: its length, zeros past the entries
            os.ftruncate(self._fd, self.length)
            if self.length > self.size:
                os.pwrite(self._fd, bytes(min(size, self.length - self.size)), self.size)
            raise
        at = self.size + _HEAD.size
        self.size += size
        self.length = max(self.length, self.size)
        if not large:  # nothing to leave in the file: the ops as they are
            return ops
        kept = []
        for op in ops:
            at += _OP.size + len(op.key)
            if len(op.value) >= REF_MIN:
                op = Op(op.db, op.kind, op.key, Ref(self.epoch, at, len(op.value)))
            kept.append(op)
            at += len(op.value) if not isinstance(op.value, Ref) else op.value.length
        return kept

    def pread(self, ref: Ref) -> bytes:
        """A value appended earlier; StaleRef once the file was emptied (it is in LMDB)."""
        if ref.epoch != self.epoch:
            raise StaleRef
        data = os.pread(self._fd, ref.length, ref.offset)
        if len(data) != ref.length:
            raise OSError(5, "the journal is shorter than a value it holds")
        return data

    def read(self) -> Contents:
        """The header and the entries that verify, in order, up to the first that does
        not; the journal ends cleanly at the file's end or at a zero entry header."""
        data = os.pread(self._fd, self.length, 0)
        found = Contents(None, 0)
        schemes = _SCHEMES  # any, while the header says nothing
        if len(data) >= HEADER_SIZE:
            head, mac = data[: _FILE_HEAD.size], data[_FILE_HEAD.size : HEADER_SIZE]
            magic, boot, seq = _FILE_HEAD.unpack(head)
            if magic in _SCHEMES and hmac.compare_digest(mac, self._mac(b"header", head)):
                found.boot_id, found.last_seq = boot, seq
                schemes = (magic,)
        at = HEADER_SIZE
        while at + _HEAD.size <= len(data):
            length, seq = _HEAD.unpack_from(data, at)
            end = at + _HEAD.size + length + _MAC_SIZE
            if end > len(data) or not seq:
                break
            head = data[at : at + _HEAD.size]
            payload = data[at + _HEAD.size : end - _MAC_SIZE]
            mac = data[end - _MAC_SIZE : end]
            if not any(
                hmac.compare_digest(mac, self._entry_mac(head, payload, scheme))
                for scheme in schemes
            ):
                break
            found.entries.append((seq, _decode(payload)))
            at = end
        found.clean_end = not any(data[at : at + _HEAD.size])
        found.end = at
        return found

    def _entry_mac(self, head: bytes, payload: bytes, scheme: bytes) -> bytes:
        """The MAC an entry should carry in the format ``scheme`` names (a magic;
        b"" for a payload that does not parse)."""
        if scheme == _FULL_MAC_MAGIC:
            return self._mac(head, payload)
        try:
            parts = _split(payload)
        except struct.error:
            return b""
        return self._mac(head, *_summarised(parts, sampled=scheme == _MAGIC))

    def write_due_header(self) -> None:
        """The header an append left for later (see append)."""
        if self._header_due is not None:
            os.pwrite(self._fd, self._header(self._header_due), 0)
            self._header_due = None

    def cut(self, end: int) -> None:
        """Append after the entries that verify, which end at ``end``: what follows
        them (zeros, or a torn tail) is cleared, so a replay finds the next entry."""
        self._clear(end, self.length)
        self.size = end

    def expect_fsyncs(self) -> None:
        """An fsync() asks for the journal's durability: write zeros ahead of the
        entries now (this fdatasync commits the file's size, the next ones only
        once a step), and keep them until a flush finds no fsync since the last."""
        self._fsynced = True
        self._zeros_ahead(self.size)

    def reset(self, seq: int) -> bool:
        """Empty the journal (after its entries are durable in LMDB), so that no
        byte of them stays in the file: overwritten with zeros if an fsync came
        since it was last emptied, else cut off. True if zeros were written (to
        fdatasync now, not with the next fsync() of a file)."""
        self.epoch += 1
        self._header_due = None
        zeros, self._fsynced = self._fsynced, False
        self._clear(HEADER_SIZE, self.size, keep_zeros=zeros)
        os.pwrite(self._fd, self._header(seq), 0)
        self.size = HEADER_SIZE
        return zeros

    def _zeros_ahead(self, end: int) -> None:
        """Write zeros from the file's end to the PREALLOCATED step past ``end``,
        unless that passes PREALLOCATED_MAX (a large file's chunks are written
        once, not after zeros) or the disk is nearly full (they are only a
        speed-up: the entries then make the file longer, as they would anyway)."""
        target = -(-end // PREALLOCATED) * PREALLOCATED
        if not self.length < target <= PREALLOCATED_MAX:
            return
        disk = os.fstatvfs(self._fd)
        if disk.f_bavail * disk.f_frsize < _ROOM_FOR_ZEROS:
            return
        zeros = bytes(target - self.length)
        try:
            if os.pwrite(self._fd, zeros, self.length) == len(zeros):
                self.length = target
                return
        except OSError:
            pass
        os.ftruncate(self._fd, self.length)  # short of space after all

    def _clear(self, start: int, end: int, *, keep_zeros: bool = True) -> None:
        """Zeros over [start, end), where the file holds zeros from ``end`` on;
        what lies past PREALLOCATED_MAX (and ``start``) is cut off, and without
        ``keep_zeros`` everything past ``start``."""
        keep = max(start, min(self.length, PREALLOCATED_MAX if keep_zeros else 0))
        if self.length > keep:
            os.ftruncate(self._fd, keep)
            self.length = keep
        if min(end, keep) > start:
            os.pwrite(self._fd, bytes(min(end, keep) - start), start)

    def duplicate_fd(self) -> int:
        """A second descriptor of the journal file (to fdatasync it without the store's
        lock), its header written first."""
        self.write_due_header()
        return os.dup(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.write_due_header()
            os.close(self._fd)
            self._fd = -1
