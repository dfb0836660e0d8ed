"""Sealing under the master key and each record's data key, with associated data.

Every sealed value is bound (crypto/context.py) to this vault, its kind, the
record it belongs to and, for bodies and derived data, the generation of the
body: a value moved to another record, kind or version fails to open.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct

from ..crypto import (
    Binding,
    DecryptionError,
    KdfParams,
    Keyslot,
    Kind,
    new_key,
    open_sealed,
    seal,
    wipe,
)
from . import padding, records
from .header import Header
from .records import Meta, RecordFormatError
from .schema import ID_SIZE
from .tree import Entry

POOLED_RECORDS = 2048
"""New records made ahead (prepare_records) at most: a burst of creates that size
finds them ready."""

FreshRecord = tuple[bytes, bytearray, bytes]
"""A random record id, a new data key, and that key wrapped (bound to the id)."""


class Damaged(Exception):
    """A record that cannot be decrypted (the reason is the message)."""


_EXACT = b"\x01"
"""The first byte of a derived value sealed at its exact length."""


class Sealer:
    """The master key of an unlocked vault and what is sealed with it."""

    def __init__(self, header: Header, master_key: bytearray) -> None:
        self._master = master_key
        self._header = header
        self._binding = Binding(header.version, header.vault_id)
        self._subkeys: list[bytearray] = []
        self._prepared: list[FreshRecord] = []

    def derive(self, purpose: bytes) -> bytearray:
        """A subkey of the master key for one purpose (keyed BLAKE2b)."""
        digest = hashlib.blake2b(person=purpose[:16], key=self._master, digest_size=32).digest()
        key = bytearray(digest)
        self._subkeys.append(key)
        return key

    def ad(self, kind: Kind, object_id: bytes = b"", generation: int = 0) -> bytes:
        return self._binding(kind, object_id, generation)

    # -- under the master key ----------------------------------------------------

    def seal(self, kind: Kind, plaintext: bytes, object_id: bytes = b"", *, pad: bool = False):
        """Seal a vault-level value; ``pad`` hides its exact length (see padding.py)."""
        padded_to = padding.bucket(len(plaintext)) if pad else None
        return seal(self._master, plaintext, self.ad(kind, object_id), padded_to)

    def open(self, kind: Kind, sealed, object_id: bytes = b"") -> bytearray:
        return open_sealed(self._master, sealed, self.ad(kind, object_id))

    def keyslot(
        self,
        index: int,
        secret: bytearray,
        kdf: KdfParams,
        kind: str,
        keyfile: bytes | None,
    ) -> Keyslot:
        """The master key wrapped in a new keyslot (the secret is not wiped)."""
        header = self._header
        return Keyslot.create(
            index,
            self._master,
            secret,
            kdf,
            header.version,
            header.vault_id,
            kind=kind,
            keyfile=keyfile,
        )

    def is_master(self, key: bytes | bytearray) -> bool:
        return hmac.compare_digest(bytes(key), bytes(self._master))

    def new_data_key(self, record_id: bytes) -> tuple[bytearray, bytes]:
        """A fresh data key for a record and its wrapped (stored) form."""
        data_key = new_key()
        return data_key, seal(self._master, data_key, self.ad(Kind.DATA_KEY, record_id))

    def fresh_record(self) -> FreshRecord:
        """A new record's id and keys: one made ahead if any is left, else made now."""
        try:
            return self._prepared.pop()
        except IndexError:
            return self._new_record()

    def prepare_records(self, count: int) -> None:
        """Make up to ``count`` new records' ids and keys ahead (POOLED_RECORDS at
        most in all): a burst of creates then skips a key's making and wrapping,
        a few µs each. They are as random as those made at once, live only in
        memory until used, and are wiped at lock."""
        for _ in range(min(count, POOLED_RECORDS - len(self._prepared))):
            self._prepared.append(self._new_record())

    def _new_record(self) -> FreshRecord:
        record_id = os.urandom(ID_SIZE)
        return (record_id, *self.new_data_key(record_id))

    # -- records -----------------------------------------------------------------

    def seal_body(self, entry: Entry, data: bytes | bytearray) -> bytes:
        ad = self.ad(Kind.BODY, entry.record_id, entry.meta.body_gen)
        return seal(entry.data_key, data, ad, padding.bucket(len(data)))

    def open_body(self, entry: Entry, value, *, length: int | None = None) -> bytearray:
        """A record's plaintext body without its padding: ``length`` bytes, by default
        the file's size (DecryptionError, RecordFormatError)."""
        _, _, sealed_body = records.unpack(value)
        ad = self.ad(Kind.BODY, entry.record_id, entry.meta.body_gen)
        plain = open_sealed(entry.data_key, sealed_body, ad)
        length = entry.meta.size if length is None else length
        if len(plain) < length:
            raise DecryptionError("body shorter than its size")
        del plain[length:]
        return plain

    def seal_chunk(
        self, entry: Entry, index: int, gen: int, data: bytes | bytearray | memoryview
    ) -> bytes | bytearray:
        ad = self.ad(Kind.CHUNK, entry.record_id + index.to_bytes(4, "big"), gen)
        return seal(entry.data_key, data, ad, padding.bucket(len(data)))

    def open_chunk(self, entry: Entry, index: int, gen: int, stored, out: memoryview | None = None):
        """A chunk's plaintext, still padded with zeros, in ``out`` if given: a
        writable buffer exactly that long (DecryptionError)."""
        ad = self.ad(Kind.CHUNK, entry.record_id + index.to_bytes(4, "big"), gen)
        return open_sealed(entry.data_key, stored, ad, out)

    def pack_record(self, entry: Entry, sealed_body: bytes) -> bytes:
        """A record's stored value: its sealed generation, metadata and the given body."""
        rid = entry.record_id
        meta = entry.meta.encode()
        sealed_meta = seal(entry.data_key, meta, self.ad(Kind.META, rid), padding.bucket(len(meta)))
        sealed_gen = seal(
            self._master, records.GEN.pack(entry.meta.gen), self.ad(Kind.GENERATION, rid)
        )
        return records.pack(sealed_gen, sealed_meta, sealed_body)

    def decode_entry(self, record_id: bytes, wrapped_key: bytes | None, value) -> Entry:
        """Unwrap a record's data key and open its metadata (Damaged if either fails)."""
        if wrapped_key is None:
            raise Damaged("its data key is missing")
        try:
            data_key = open_sealed(self._master, wrapped_key, self.ad(Kind.DATA_KEY, record_id))
        except DecryptionError:
            raise Damaged("its data key failed authentication") from None
        try:
            _, sealed_meta, _ = records.unpack(value)
            meta_bytes = open_sealed(data_key, sealed_meta, self.ad(Kind.META, record_id))
            meta = Meta.decode(meta_bytes)
        except (DecryptionError, RecordFormatError, ValueError) as exc:
            wipe(data_key)
            raise Damaged(f"its metadata failed authentication ({exc})") from None
        return Entry(record_id, meta, data_key)

    def sealed_gen(self, record_id: bytes, value) -> int | None:
        """A stored record's generation from its own seal (None if that is damaged too)."""
        try:
            sealed_gen, _, _ = records.unpack(value)
            plain = self.open(Kind.GENERATION, sealed_gen, record_id)
            return records.GEN.unpack(plain)[0]
        except (DecryptionError, RecordFormatError, struct.error):
            return None

    def seal_derived(self, entry: Entry, blob: bytes) -> bytes:
        """Sealed at its exact length, after a marker byte. The derived data are
        a record's vectors, 12 bytes and 384 a chunk: padded to 128-byte steps
        they would show the number of chunks all the same, and unpadded eight
        fit an LMDB page instead of seven."""
        ad = self.ad(Kind.VECTOR, entry.record_id, entry.meta.body_gen)
        return seal(entry.data_key, _EXACT + blob, ad, None)

    def open_derived(self, entry: Entry, stored: bytes) -> bytes:
        ad = self.ad(Kind.VECTOR, entry.record_id, entry.meta.body_gen)
        plain = open_sealed(entry.data_key, stored, ad)
        if plain[:1] == _EXACT:
            return bytes(plain[1:])
        return padding.unframe(plain)  # sealed before 2026-12-04: framed (first byte 0), padded

    def wipe(self) -> None:
        wipe(self._master)
        for key in self._subkeys:
            wipe(key)
        for _, data_key, _ in self._prepared:
            wipe(data_key)
        self._prepared.clear()


def header_binding(header: Header, slots: list[Keyslot]) -> bytes:
    """What the authenticated header commits to: the header and every slot's KDF
    (and kind, but for passphrase slots, bound as they always were)."""
    parts = [header.encode()]
    for slot in sorted(slots, key=lambda s: s.index):
        parts.append(slot.binding().encode())
    return b"\n".join(parts)
