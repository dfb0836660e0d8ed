"""Reading a vault: its header and keyslots, unlocking, and loading every record.

Unlocking decrypts all metadata once (or the sealed index snapshot, when it
matches the file exactly) and checks that what was read adds up to the sealed
integrity sum: records removed, duplicated or rolled back outside memvault
are refused, damaged ones are named (the rest opens read-only; see repair).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from ..crypto import DecryptionError, Keyslot, Kind, SlotChecksumError, wipe
from ..errors import (
    NotAVault,
    UnsupportedFormat,
    VaultCorrupted,
    VaultNotFound,
    VaultTampered,
)
from . import padding, records, snapshot
from .accumulator import Accumulator
from .damage import Damage
from .header import READABLE_VERSIONS, Header, HeaderError
from .lockfile import writer_pid
from .records import Meta, RecordFormatError
from .schema import (
    COMPACTION_OWED_KEY,
    HEADER_AUTH_KEY,
    HEADER_KEY,
    KEYS,
    META,
    RECORDS,
    ROOT_ID,
    ROOT_KEY,
    SEARCH_INDEX_KEY,
    SLOTS,
    SNAPSHOT_KEY,
    STATE,
    STATE_KEY,
    STRUCTURE_ID,
)
from .sealing import Damaged, Sealer, header_binding
from .state import VaultState
from .store import Store
from .structure import check_structure
from .tree import Entry, PathTree
from .txn import ReadTxn


@dataclass(frozen=True)
class VaultInfo:
    """What can be known about a vault without its passphrase."""

    path: Path
    header: Header
    slots: list[Keyslot]
    file_size: int
    writer_pid: int | None


class DamagedSlot:
    """Placeholder for a keyslot whose stored bytes fail their checksum."""

    def __init__(self, key: bytes) -> None:
        self.index = int.from_bytes(key, "big") if key else -1


def read_info(path: Path) -> VaultInfo:
    """Read the header and keyslots of a vault (no passphrase, no write lock)."""
    path = Path(path)
    if not path.exists():
        raise VaultNotFound(path)
    pid = writer_pid(path)
    try:  # what is read here is checked, not every byte of the file
        check_structure(path, databases=(META, SLOTS))
        store = Store(path, readonly=True, shared_lock=False, check=False)
    except (NotAVault, VaultCorrupted):  # a damaged meta page restored, or read around
        store = Store(path, readonly=True, shared_lock=False)
    try:
        header, slots = read_header_and_slots(store)
    finally:
        store.close()
    return VaultInfo(path, header, slots, path.stat().st_size, pid)


def read_header_and_slots(store: Store) -> tuple[Header, list[Keyslot]]:
    with store.read() as txn:
        raw_header = txn.get(HEADER_KEY, db=META)
        raw_slots = [(bytes(k), bytes(v)) for k, v in txn.items(SLOTS)]
    if raw_header is None:
        raise NotAVault(store.path)
    try:
        header = Header.decode(bytes(raw_header))
    except HeaderError as exc:
        raise VaultCorrupted(store.path, f"its header is damaged: {exc}") from exc
    if header.version not in READABLE_VERSIONS:
        raise UnsupportedFormat(
            store.path, header.version, " and ".join(map(str, READABLE_VERSIONS))
        )
    slots = []
    for key, value in raw_slots:
        try:
            slots.append(Keyslot.decode(value))
        except SlotChecksumError:
            slots.append(DamagedSlot(key))
    if not slots:
        raise VaultCorrupted(store.path, "it has no keyslots")
    return header, slots


def open_state(sealer: Sealer, state_key: bytearray, sealed, path: Path) -> VaultState:
    """The sealed vault state (VaultCorrupted if it is missing or fails)."""
    try:
        if sealed is None:
            raise DecryptionError("missing")
        return VaultState.decode(state_key, sealer.open(Kind.STATE, sealed))
    except (DecryptionError, ValueError, struct.error):
        raise VaultCorrupted(path, "its record state is damaged") from None


@dataclass
class Loaded:
    """What loading found besides the tree and the damage."""

    acc: Accumulator
    root: Meta | None = None
    compaction_owed: bool = False
    snapshot_stored: bool = False
    search_index_stored: bool = False
    generation: int = 0
    audit_head: tuple[int, bytes] = (0, bytes(32))


class Loader:
    """Fills a PathTree and a Damage report from a store (once, at unlock)."""

    def __init__(
        self,
        store: Store,
        sealer: Sealer,
        state_key: bytearray,
        tree: PathTree,
        damage: Damage,
        *,
        trust_snapshot: bool = True,
    ) -> None:
        self.trust_snapshot = trust_snapshot
        self.store = store
        self.sealer = sealer
        self.state_key = state_key
        self.tree = tree
        self.damage = damage
        self.path = store.path

    def load(
        self, header: Header, slots: list[Keyslot], new_dir: Callable[[str], object]
    ) -> Loaded:
        """Check the authenticated header and state, then decrypt every record's metadata.

        ``new_dir`` makes the stand-in for a damaged directory (see check_tree).
        """
        store, damage = self.store, self.damage
        with store.read() as txn:
            auth = txn.get(HEADER_AUTH_KEY, db=META)
            try:
                if auth is None:
                    raise DecryptionError("missing")
                expected = self.sealer.open(Kind.HEADER, auth)
            except DecryptionError:
                raise VaultTampered(
                    self.path, "its header or keyslot parameters were changed"
                ) from None
            if bytes(expected) != header_binding(header, slots):
                raise VaultTampered(self.path, "its header or keyslot parameters were changed")
            stored = open_state(
                self.sealer, self.state_key, txn.get(STATE_KEY, db=STATE), self.path
            )
            stored_acc = stored.acc
            self._count_unsealed(txn, stored_acc)
            loaded = Loaded(Accumulator(self.state_key, *stored_acc.state()))
            # changes past the stored state's generation: newer than it (rollback.py)
            loaded.generation = stored.generation + (1 if self.store.replayed_tail else 0)
            loaded.audit_head = (stored.audit_seq, stored.audit_link)
            sealed_root = txn.get(ROOT_KEY, db=STATE)
            if sealed_root is not None:
                try:
                    loaded.root = Meta.decode(self.sealer.open(Kind.META, sealed_root, ROOT_ID))
                except (DecryptionError, RecordFormatError):
                    damage.mark(ROOT_ID, "the root directory's attributes are damaged")
            if store.salvaged:  # read around a damaged structure: something may be missing
                damage.mark(
                    STRUCTURE_ID,
                    "LMDB could not read it; what remains was read around it",
                    "the file's storage structure",
                )
            if txn.get(COMPACTION_OWED_KEY, db=STATE) is not None:
                loaded.compaction_owed = True  # an earlier session never compacted
            known_paths: dict[bytes, str] = {}
            loaded.search_index_stored = txn.get(SEARCH_INDEX_KEY, db=STATE) is not None
            sealed_snapshot = txn.get(SNAPSHOT_KEY, db=STATE)
            if sealed_snapshot is not None:
                loaded.snapshot_stored = True
                if self._load_snapshot(txn, bytes(sealed_snapshot), stored_acc, known_paths):
                    return loaded
            loaded.acc = self._load_every_record(txn, known_paths)
        if loaded.acc != stored_acc:
            if not (damage.unverified or store.salvaged):
                raise VaultTampered(
                    self.path,
                    "records were removed, duplicated or replaced by older copies outside memvault",
                )
            damage.unexplained = True
            loaded.acc = stored_acc  # kept as stored until `repair` accepts what is left
        self.check_tree(new_dir)
        return loaded

    def _count_unsealed(self, txn: ReadTxn, acc: Accumulator) -> None:
        """Add to the stored accumulator the changes journaled after the last sealed
        state (a killed daemon's last commits): the journal's MAC vouches for
        them, and each record's sealed generation, before and after, says what
        they changed."""
        for record_id, before in self.store.replayed_unsealed.items():
            for value, change in ((before, acc.remove), (txn.get(record_id, db=RECORDS), acc.add)):
                if value is None:
                    continue
                gen = self.sealer.sealed_gen(record_id, value)
                if gen is None:  # the sum cannot be checked: a repair decides
                    self.damage.unverified = True
                    self.damage.mark(record_id, "its generation failed authentication")
                else:
                    change(record_id, gen)

    def _load_every_record(self, txn: ReadTxn, known_paths: dict[bytes, str]) -> Accumulator:
        """Decrypt every record's key and metadata; return the accumulator they add up to.

        A record that fails still counts, through its separately sealed
        generation. A record stored under a damaged id is found again by
        trying the keys left without a record (its key and metadata are bound
        to its true id). Only a record whose generation cannot be read either
        leaves the accumulator unverifiable.
        """
        damage, sealer = self.damage, self.sealer
        acc = Accumulator(self.state_key)
        wrapped = {bytes(k): bytes(v) for k, v in txn.items(KEYS)}
        unused_keys: dict[bytes, bytes] = {}  # keys whose own record failed
        orphans: list[tuple[bytes, bytes]] = []
        for key, value in txn.items(RECORDS):
            record_id = bytes(key)
            wrapped_key = wrapped.pop(record_id, None)
            try:
                entry = sealer.decode_entry(record_id, wrapped_key, value)
            except Damaged as exc:
                if wrapped_key is not None:
                    unused_keys[record_id] = wrapped_key
                damage.mark(record_id, str(exc), known_paths.get(record_id))
                gen = sealer.sealed_gen(record_id, value)
                if gen is not None:
                    acc.add(record_id, gen)
                else:
                    orphans.append((record_id, bytes(value)))
                continue
            acc.add(record_id, entry.meta.gen)
            if not entry.meta.orphan and entry.meta.path in self.tree.by_path:
                raise VaultTampered(self.path, "two records claim the same path")
            self.tree.add(entry)
        unused_keys.update(wrapped)
        for stored_id, value in orphans:
            for true_id, key in list(unused_keys.items()):
                try:
                    entry = sealer.decode_entry(true_id, key, value)
                except Damaged:
                    continue
                del unused_keys[true_id]
                wrapped.pop(true_id, None)
                acc.add(true_id, entry.meta.gen)
                wipe(entry.data_key)
                damage.misfiled[stored_id] = (true_id, key, value)
                damage.mark(
                    stored_id,
                    "stored under a damaged record id; `repair` recovers it",
                    entry.meta.path,
                )
                break
            else:
                damage.unverified = True
        for record_id in wrapped:
            damage.mark(record_id, "a data key without a record", known_paths.get(record_id))
        return acc

    def _load_snapshot(
        self, txn: ReadTxn, sealed: bytes, stored_acc: Accumulator, known_paths: dict[bytes, str]
    ) -> bool:
        """Index from the sealed snapshot if it matches the file exactly; else False.

        Even a snapshot that no longer matches (or is not trusted) names the
        records it knew (``known_paths``), so that damage can be reported by path.
        """
        try:
            plain = bytearray(padding.unframe(self.sealer.open(Kind.SNAPSHOT, sealed)))
        except (DecryptionError, ValueError):
            return False
        entries: list[Entry] = []
        stamps: list[tuple[bytes, bytes]] = []
        usable = False
        try:
            state, rows = snapshot.decode(plain)
            for record_id, stamp, gen, data_key, meta in rows:
                entries.append(Entry(record_id, Meta.decode(meta), data_key))
                stamps.append((record_id, stamp))
                known_paths[record_id] = entries[-1].meta.path
                if entries[-1].meta.gen != gen:
                    return False
            if state != stored_acc.encode() or not self.trust_snapshot:
                return False
            stored = ((bytes(k), bytes(v[: records.STAMP_SIZE])) for k, v in txn.items(RECORDS))
            usable = all(a == b for a, b in zip_longest(stored, stamps))
        except (snapshot.SnapshotFormatError, RecordFormatError):
            return False
        finally:
            wipe(plain)
            if not usable:
                for entry in entries:
                    wipe(entry.data_key)
        if not usable:
            return False
        for entry in entries:
            self.tree.add(entry)
        return True

    def check_tree(self, new_dir: Callable[[str], object]) -> None:
        """Every record's parent must be a directory record.

        A parent can only be missing if its record is damaged; it is then
        stood in for in memory by ``new_dir(path)`` (a write the caller makes,
        default mode) so that its children stay reachable, and `repair`
        stores it.
        """
        missing, below_file = self.tree.missing_parents()
        if below_file:
            raise VaultTampered(self.path, "a record lies below a file")
        if not missing:
            return
        if not self.damage:
            raise VaultTampered(self.path, "a record's parent directory is missing")
        self.damage.recreated = [new_dir(d) for d in sorted(missing)]
        for write in self.damage.recreated:
            self.tree.add(write.entry)


def seal_snapshot(store: Store, sealer: Sealer, tree: PathTree, acc: Accumulator) -> bytes:
    """The sealed index snapshot: every entry with its key, so unlocking skips the records."""
    rows = sorted(tree.by_id.values(), key=lambda e: e.record_id)
    with store.read() as txn:
        stamps = [bytes(txn.get(e.record_id, db=RECORDS)[: records.STAMP_SIZE]) for e in rows]
    plain = snapshot.encode(
        acc.encode(),
        (
            (e.record_id, stamp, e.meta.gen, e.data_key, e.meta.encode())
            for e, stamp in zip(rows, stamps, strict=True)
        ),
    )
    try:
        return sealer.seal(Kind.SNAPSHOT, padding.frame(plain), pad=True)
    finally:
        wipe(plain)
