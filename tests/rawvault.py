"""Raw access to a closed vault file, as an attacker or a bad disk would have it."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import lmdb

from memvault.crypto import with_checksum, without_checksum
from memvault.vault import records, schema
from memvault.vault.journal import HEADER_SIZE


@contextmanager
def raw(path: Path, write: bool = False):
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=16, readonly=not write)
    dbs = {name: env.open_db(name.encode(), create=False) for name in schema.DB_NAMES}
    try:
        with env.begin(write=write) as txn:
            yield txn, dbs
    finally:
        env.close()


def raw_items(path: Path, db: str) -> list[tuple[bytes, bytes]]:
    with raw(path) as (txn, dbs):
        return [(bytes(k), bytes(v)) for k, v in txn.cursor(dbs[db])]


def record_ids(path: Path) -> list[bytes]:
    with raw(path) as (txn, dbs):
        return [bytes(k) for k, _ in txn.cursor(dbs["records"])]


def record_for(path: Path, vault_obj, memory_path: str) -> tuple[bytes, bytes, bytes]:
    """(record id, stored record value, wrapped data key) of a memory."""
    rid = vault_obj._tree.by_path[memory_path].record_id
    store = vault_obj._store  # the vault is open: read through its own environment
    with store.read() as txn:
        value = txn.get(rid, db="records")
        wrapped = txn.get(rid, db="keys")
        return rid, bytes(value), bytes(wrapped)


def split(value: bytes) -> tuple[bytes, bytes]:
    _, meta, body = records.unpack(value)
    return bytes(meta), bytes(body)


def repack(like: bytes, meta: bytes, body: bytes) -> bytes:
    """A record value with ``like``'s sealed generation and the given parts."""
    return records.pack(bytes(records.unpack(like)[0]), meta, body)


def edit_json(stored: bytes, change, fix_checksum: bool = True) -> bytes:
    """Change a checksummed JSON value (header or keyslot)."""
    import json

    doc = json.loads(without_checksum(stored))
    change(doc)
    data = json.dumps(doc, sort_keys=True).encode()
    return with_checksum(data) if fix_checksum else data + stored[-16:]


def flip_in_file(path: Path, needle: bytes, offset_in_needle: int, mask: int = 0x01) -> None:
    """Flip one byte of every copy of ``needle`` (old pages may hold stale copies)."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0, "the ciphertext is not in the file"
    while at >= 0:
        data[at + offset_in_needle] ^= mask
        at = data.find(needle, at + 1)
    path.write_bytes(bytes(data))


def drop_snapshot(path: Path) -> None:
    """Remove the sealed index snapshot so that the next unlock checks every record."""
    with raw(path, write=True) as (txn, dbs):
        txn.delete(b"snapshot", db=dbs["state"])


def journal_entry_ends(data: bytes) -> list[int]:
    """Where each entry of a journal file ends (its header first, zeros after the last)."""
    ends, at = [], HEADER_SIZE
    while at < len(data) and any(data[at : at + 12]):
        at += 12 + int.from_bytes(data[at : at + 4], "big") + 32
        ends.append(at)
    return ends


def journal_seqs(data: bytes) -> tuple[int, list[int]]:
    """The sequence number a journal file's header names, and each entry's."""
    header_seq = int.from_bytes(data[20:28], "big")  # after the magic and the boot id
    starts = [HEADER_SIZE, *journal_entry_ends(data)[:-1]]
    return header_seq, [int.from_bytes(data[at + 4 : at + 12], "big") for at in starts]


def journal_is_empty(path: Path) -> bool:
    """No entry in a journal file: everything in it was moved into the vault file."""
    with open(path, "rb") as f:
        return not any(f.read(HEADER_SIZE + 12)[HEADER_SIZE:])
