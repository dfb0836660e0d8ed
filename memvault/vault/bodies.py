"""A file's content: inline in its record, or in sealed chunks.

A file of at most one chunk's size keeps its content in its record's body,
sealed under the record's data key and bound to its ``body_gen`` (as
records.py describes). A larger file is ``chunked``: its record's body is the
chunk table, one 64-bit generation per chunk (0 for a hole, which is
read as zeros and stored nowhere), and chunk ``i`` is stored in the CHUNKS
database under a keyed hash of (record id, i), sealed under the same data
key with associated data binding the record, ``i`` and the generation the
table names. So a chunk moved to another index, another file or another
version, an old chunk put back, or a chunk dropped is an explicit error, and
a read decrypts only the chunks it touches. A write re-seals only the chunks
it changes, plus the table (8 bytes a chunk).

The chunk keys are deterministic (a new version of chunk ``i`` replaces the
old under the same key), and unlinkable without the master key: they do not
say which file a chunk belongs to. Where chunks lie roughly does: they are
stored as they are written, and a compaction keeps them in place, so that a
file is read back from disk in long runs (store.py, _in_place).

A vault's chunk size follows its format (chunk_size_of): 256 KiB from format
3 on, 64 KiB in format 2, whose vaults keep it. Every chunk costs the same
few µs of bookkeeping besides its encryption (its key, its seal's set-up, its
journal operation): a 1 MiB write() took 931 µs in 64 KiB chunks, 745 in 256
KiB ones. What a larger chunk costs is paid by a small write into a large
file (it re-seals up to 256 KiB, ~70 µs) and a small read of one (it
decrypts as much).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..crypto import OVERHEAD, DecryptionError
from .records import RecordFormatError
from .schema import CHUNKS
from .sealing import Sealer
from .tree import Entry

CHUNK_SIZE = 256 << 10
"""The chunk size of vaults created now (format 3)."""
_CHUNK_SIZES = {2: 64 << 10, 3: CHUNK_SIZE}


def chunk_size_of(format_version: int) -> int:
    """The chunk size of a vault of this format."""
    return _CHUNK_SIZES[format_version]


def chunk_length(size: int, index: int, chunk_size: int) -> int:
    """How many bytes of the file chunk ``index`` holds."""
    return max(0, min(chunk_size, size - index * chunk_size))


class ChunkMissing(Exception):
    """A chunk the table names is not stored (or does not authenticate)."""


@dataclass
class BodyChange:
    """What storing a new version of a file's content writes, besides its record."""

    sealed_body: bytes  # the inline content, or the chunk table
    puts: dict[bytes, bytes] = field(default_factory=dict)  # chunk key -> sealed chunk
    deletes: list[bytes] = field(default_factory=list)  # chunk keys no longer used


class Bodies:
    """Reads and plans writes of file contents for one unlocked vault.

    ``stored_record(txn, record_id)`` finds a record's stored value (the
    vault's, which also finds records whose LMDB key was damaged).
    """

    TABLES_KEPT = 16

    def __init__(self, sealer: Sealer, stored_record: Callable, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self._sealer = sealer
        self._stored_record = stored_record
        self._key = sealer.derive(b"memvault.chunks")
        # Decrypted chunk tables by (record, body_gen): a sequential read or write
        # of a large file opens its table once, not once a chunk.
        self._tables: OrderedDict[tuple[bytes, int], array] = OrderedDict()

    def count(self, size: int) -> int:
        """How many chunks a file of ``size`` bytes has."""
        return -(-size // self.chunk_size)

    def chunk_key(self, record_id: bytes, index: int) -> bytes:
        data = record_id + index.to_bytes(4, "big")
        return hashlib.blake2b(data, key=self._key, digest_size=16).digest()

    def chunk_keys_of(self, entry: Entry) -> list[bytes]:
        """Every key a file's chunks may be stored under (none for an inline body)."""
        if not entry.meta.chunked:
            return []
        return self.chunk_keys_for(entry.record_id, self.count(entry.meta.size))

    def chunk_keys_for(self, record_id: bytes, count: int, *, start: int = 0) -> list[bytes]:
        return [self.chunk_key(record_id, i) for i in range(start, count)]

    # -- reading ---------------------------------------------------------------

    def table(self, txn, entry: Entry) -> array:
        """The chunk generations of a chunked file (DecryptionError if its record fails).

        A copy: the caller may change it."""
        key = (entry.record_id, entry.meta.body_gen)
        gens = self._tables.get(key)
        if gens is None:
            count = self.count(entry.meta.size)
            plain = self._sealer.open_body(entry, self._record(txn, entry), length=8 * count)
            gens = array("Q")
            gens.frombytes(bytes(plain))
            self._keep_table(key, gens)
        self._tables.move_to_end(key)
        return array("Q", gens)

    def _keep_table(self, key: tuple[bytes, int], gens: array) -> None:
        self._tables[key] = gens
        while len(self._tables) > self.TABLES_KEPT:
            self._tables.popitem(last=False)

    def forget(self, record_id: bytes) -> None:
        """A shredded record's tables go with it."""
        for key in [k for k in self._tables if k[0] == record_id]:
            del self._tables[key]

    def read_all(self, txn, entry: Entry) -> bytearray:
        if not entry.meta.chunked:
            return self._sealer.open_body(entry, self._record(txn, entry))
        gens = self.table(txn, entry)
        out = bytearray()
        for index, gen in enumerate(gens):
            out += self._chunk(txn, entry, index, gen)
        return out

    def read_chunk(self, txn, entry: Entry, index: int, gens: array | None = None) -> bytearray:
        """Chunk ``index`` of a file, exactly as long as the file says (zeros for a hole)."""
        if not entry.meta.chunked:
            body = self._sealer.open_body(entry, self._record(txn, entry))
            return body[index * self.chunk_size : (index + 1) * self.chunk_size]
        if gens is None:
            gens = self.table(txn, entry)
        if index >= len(gens):
            return bytearray()
        return self._chunk(txn, entry, index, gens[index])

    def read_span(self, txn, entry: Entry, first: int, count: int) -> bytearray:
        """Chunks ``first`` to ``first + count - 1`` of a chunked file in one buffer,
        as long as the file says (zeros for holes).

        A large sequential read asks for 1 MiB of chunks at once: one table lookup,
        and each whole chunk decrypted straight into its place in the buffer,
        not into a buffer of its own copied after (read 100 MB on a mount:
        129 against 192 ms).
        """
        gens = self.table(txn, entry)
        size = entry.meta.size
        chunk_size = self.chunk_size
        start = first * chunk_size
        out = bytearray(max(0, min(size, (first + count) * chunk_size) - start))
        view = memoryview(out)
        for index in range(first, min(first + count, len(gens))):
            gen, length = gens[index], chunk_length(size, index, chunk_size)
            at = index * chunk_size - start
            if gen == 0 or length == 0:
                continue  # a hole: zeros
            stored = txn.get(self.chunk_key(entry.record_id, index), db=CHUNKS)
            if stored is None or len(stored) - OVERHEAD != length:  # missing, padded or short
                view[at : at + length] = self._open_chunk(entry, index, gen, stored, length)
                continue
            try:
                self._sealer.open_chunk(entry, index, gen, stored, view[at : at + length])
            except DecryptionError:
                raise ChunkMissing(f"chunk {index} failed authentication") from None
        return out

    def _chunk(self, txn, entry: Entry, index: int, gen: int) -> bytearray:
        length = chunk_length(entry.meta.size, index, self.chunk_size)
        if gen == 0:
            return bytearray(length)
        stored = txn.get(self.chunk_key(entry.record_id, index), db=CHUNKS)
        return self._open_chunk(entry, index, gen, stored, length)

    def _open_chunk(self, entry: Entry, index: int, gen: int, stored, length: int) -> bytearray:
        """A stored chunk's plaintext, ``length`` bytes (ChunkMissing)."""
        if stored is None:
            raise ChunkMissing(f"chunk {index} is missing")
        try:
            plain = self._sealer.open_chunk(entry, index, gen, stored)
        except DecryptionError:
            raise ChunkMissing(f"chunk {index} failed authentication") from None
        if len(plain) < length:
            plain.extend(bytes(length - len(plain)))  # stored before the file grew past it
        del plain[length:]
        return plain

    def _record(self, txn, entry: Entry):
        value = self._stored_record(txn, entry.record_id)
        if value is None:
            raise RecordFormatError("the record is missing")
        return value

    # -- writing ---------------------------------------------------------------

    def change(
        self,
        txn,
        old: Entry | None,
        new: Entry,
        chunks: Mapping[int, bytes | bytearray],
    ) -> BodyChange:
        """The writes that give ``new`` (its size, chunked flag and body_gen already
        set) the content of ``old`` with ``chunks`` replaced.

        ``chunks`` maps a chunk index to that chunk's new content (at most
        chunk_size bytes; shorter is zero-extended when read). Chunks neither
        given nor kept read as zeros; chunks past the new size are dropped. A
        shrinking write must give the new last chunk, cut to the new size.
        """
        size = new.meta.size
        old_chunked = old is not None and old.meta.chunked
        count = self.count(size)
        if not new.meta.chunked:
            content = chunks.get(0)
            if content is None:
                content = self.read_all(txn, old) if old is not None else bytearray()
            content = bytearray(content[:size])
            content.extend(bytes(size - len(content)))
            change = BodyChange(self._sealer.seal_body(new, content))
            if old_chunked:
                change.deletes = self.chunk_keys_for(old.record_id, self.count(old.meta.size))
            return change
        given = dict(chunks)
        if old_chunked:
            gens = self.table(txn, old)
        else:
            gens = array("Q")
            if old is not None and old.meta.size and 0 not in given:
                given[0] = self.read_all(txn, old)  # the inline content becomes chunk 0
        old_count = len(gens)
        gens.extend([0] * max(0, count - len(gens)))
        del gens[count:]
        change = BodyChange(b"")
        for index, content in given.items():
            if index >= count:
                continue
            gens[index] = new.meta.gen
            key = self.chunk_key(new.record_id, index)
            change.puts[key] = self._sealer.seal_chunk(new, index, new.meta.gen, content)
        change.deletes = self.chunk_keys_for(new.record_id, old_count, start=count)
        change.sealed_body = self._sealer.seal_body(new, gens.tobytes())
        self._keep_table((new.record_id, new.meta.body_gen), gens)  # kept if the commit holds
        return change
