"""The Vault: encrypted memories in one LMDB file, addressed by path.

Key hierarchy (see crypto/SECURITY.md): passphrase --Argon2id--> keyslot key,
which wraps the random master key; the master key wraps one random data key
per record and seals the vault-level state; each data key seals its record's
metadata and body. LMDB keys are random record ids. The path of every record
lives inside its sealed metadata, so unlocking decrypts all metadata once and
keeps a path index in memory.

The Vault is thread-safe: every operation holds one lock. Operations are
short (microseconds to a few milliseconds) and LMDB runs without its own
locking (see store.py), so this is also what keeps readers and the writer
apart.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path

from .. import paths
from ..crypto import (
    DEFAULT_KDF,
    Binding,
    DecryptionError,
    KdfParams,
    Keyslot,
    Kind,
    SlotChecksumError,
    new_key,
    open_sealed,
    seal,
    wipe,
)
from ..errors import (
    AlreadyExists,
    CompactionPending,
    DirectoryNotEmpty,
    DiskFull,
    InvalidMove,
    IsADirectory,
    MemoryCorrupted,
    MemoryNotFound,
    MemvaultError,
    NotADirectory,
    NotAVault,
    ReadOnlyVault,
    TooLarge,
    UnreasonableKdf,
    UnsupportedFormat,
    VaultCorrupted,
    VaultDamaged,
    VaultExists,
    VaultNotFound,
    VaultTampered,
    WrongPassphrase,
)
from . import padding, records, snapshot
from .accumulator import Accumulator
from .header import FORMAT_VERSION, Header, HeaderError
from .journal import NO_BOOT, current_boot_id
from .records import DIRECTORY, FILE, SYMLINK, Meta, RecordFormatError
from .state import VaultState
from .store import COMPACTION_OWED_KEY, Store, writer_pid

log = logging.getLogger("memvault")

MAX_MEMORY_SIZE = 256 << 20
"""Largest memory the vault stores (the filesystem answers EFBIG above it)."""

DEFAULT_COMPACT_DELAY = 5.0
"""Seconds of quiet after a shred or a replaced record before the vault compacts itself."""
FLUSH_DELAY = 0.5
"""Seconds a journaled change may wait before it is moved into LMDB (one fsync per batch)."""
FLUSH_BYTES = 32 << 20
"""Journaled bytes past which the journal is moved into LMDB at once."""

_HEADER_KEY = b"header"
_HEADER_AUTH_KEY = b"header-auth"
_STATE_KEY = b"accumulator"
_SNAPSHOT_KEY = b"snapshot"
_ROOT_KEY = b"root"
_MODEL_KEY = b"embedding-model"
_ROOT_ID = b"root"
_STRUCTURE_ID = b"structure"  # stands for damage to LMDB's own pages in `damaged`
_ID_SIZE = 16


@dataclass
class Entry:
    """One live record as the unlocked vault knows it."""

    record_id: bytes
    meta: Meta
    data_key: bytearray


@dataclass(frozen=True)
class VaultInfo:
    """What can be known about a vault without its passphrase."""

    path: Path
    header: Header
    slots: list[Keyslot]
    file_size: int
    writer_pid: int | None


@dataclass
class _Write:
    entry: Entry
    old_gen: int | None  # None for a record that does not exist yet
    sealed_body: bytes | None  # None keeps the stored body
    wrapped_key: bytes | None = None  # set for new records


def read_info(path: Path) -> VaultInfo:
    """Read the header and keyslots of a vault (no passphrase, no write lock)."""
    path = Path(path)
    if not path.exists():
        raise VaultNotFound(path)
    pid = writer_pid(path)
    store = Store(path, readonly=True, shared_lock=False)
    try:
        header, slots = _read_header_and_slots(store)
    finally:
        store.close()
    return VaultInfo(path, header, slots, path.stat().st_size, pid)


def _read_header_and_slots(store: Store) -> tuple[Header, list[Keyslot]]:
    with store.read() as txn:
        raw_header = txn.get(_HEADER_KEY, db=store.dbs["meta"])
        raw_slots = [(bytes(k), bytes(v)) for k, v in store.items(txn, "slots")]
    if raw_header is None:
        raise NotAVault(store.path)
    try:
        header = Header.decode(bytes(raw_header))
    except HeaderError as exc:
        raise VaultCorrupted(store.path, f"its header is damaged: {exc}") from exc
    if header.version != FORMAT_VERSION:
        raise UnsupportedFormat(store.path, header.version, FORMAT_VERSION)
    slots = []
    for key, value in raw_slots:
        try:
            slots.append(Keyslot.decode(value))
        except SlotChecksumError:
            slots.append(_DamagedSlot(key))
    if not slots:
        raise VaultCorrupted(store.path, "it has no keyslots")
    return header, slots


class _DamagedSlot:
    """Placeholder for a keyslot whose stored bytes fail their checksum."""

    def __init__(self, key: bytes) -> None:
        self.index = int.from_bytes(key, "big") if key else -1


class Vault:
    """An unlocked vault. Create with :meth:`create`, open with :meth:`open`."""

    def __init__(
        self,
        store: Store,
        header: Header,
        slots: list[Keyslot],
        master_key: bytearray,
        *,
        compact_delay: float | None,
    ) -> None:
        self._store = store
        self.path = store.path
        self.header = header
        self.slots = slots
        self._master = master_key
        self._subkeys: list[bytearray] = []
        self._binding = Binding(header.version, header.vault_id)
        self._state_key = self._derive(b"memvault.state")
        self._lock = threading.RLock()
        self._by_path: dict[str, Entry] = {}
        self._by_id: dict[bytes, Entry] = {}
        self._children: dict[str, dict[str, Entry]] = {paths.ROOT: {}}
        self._acc = Accumulator(self._state_key)
        self.damaged: dict[bytes, str] = {}
        """Records that cannot be read, by stored id: what is wrong with each."""
        self._damaged_paths: dict[bytes, str] = {}  # their paths, where known
        self._misfiled: dict[bytes, tuple[bytes, bytes, bytes]] = {}
        """Records stored under a damaged id: stored id -> (true id, wrapped key, value)."""
        self._recreated: list[_Write] = []  # directories standing in for damaged ones
        self._unverified = False  # some record's generation is unreadable (see _load)
        self.unexplained = False
        """The integrity sum does not match what could be read: damage cannot be told
        from removed or rolled-back records (repair then needs explicit acceptance)."""
        self._journal_boot = NO_BOOT  # written into every state while a journal is on
        self.pending_shreds = 0
        self.compaction_owed = False
        """Shredded or replaced bytes are still in the file (a compaction will remove them)."""
        self._root: Meta | None = None
        self.kdf_seconds = 0.0  # how long unlocking spent in Argon2id
        self._dirty = False  # memories changed this session: compact at close
        self._wrote = False  # anything written this session: settle the meta pages at close
        self._snapshot_stored = False
        self._compact_delay = compact_delay
        self._compact_timer: threading.Timer | None = None
        self._flush_timer: threading.Timer | None = None
        self._listeners: list[Callable[[str, bytes, str, bytes | None], None]] = []
        self._closed = False

    def _derive(self, purpose: bytes) -> bytearray:
        """A subkey of the master key for one purpose (keyed BLAKE2b)."""
        digest = hashlib.blake2b(person=purpose[:16], key=self._master, digest_size=32).digest()
        key = bytearray(digest)
        self._subkeys.append(key)
        return key

    # -- creating and opening ------------------------------------------------

    @classmethod
    def create(
        cls,
        path: Path | str,
        passphrase: bytes | bytearray,
        *,
        kdf: KdfParams = DEFAULT_KDF,
        map_size: int | None = None,
        compact_delay: float | None = DEFAULT_COMPACT_DELAY,
    ) -> Vault:
        path = Path(path).expanduser()
        if path.exists():
            raise VaultExists(path)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        kdf.validate()
        store = Store(path, create=True, map_size=map_size)
        master = new_key()
        try:
            os.chmod(path, 0o600)
            header = Header(FORMAT_VERSION, os.urandom(_ID_SIZE), time.time_ns())
            slot = Keyslot.create(
                0, master, bytearray(passphrase), kdf, header.version, header.vault_id
            )
            vault = cls(store, header, [slot], master, compact_delay=compact_delay)
            auth = vault._seal_master(Kind.HEADER, vault._header_binding())

            def txn_fn(txn):
                txn.put(_HEADER_KEY, header.encode(), db=store.dbs["meta"])
                txn.put(_HEADER_AUTH_KEY, auth, db=store.dbs["meta"])
                txn.put(bytes([0]), slot.encode(), db=store.dbs["slots"])

            vault._write(txn_fn)
            return vault
        except BaseException:
            wipe(master)
            store.close()
            path.unlink(missing_ok=True)
            raise

    @classmethod
    def open(
        cls,
        path: Path | str,
        passphrase: bytes | bytearray | Callable[[], bytearray],
        *,
        readonly: bool = False,
        map_size: int | None = None,
        compact_delay: float | None = DEFAULT_COMPACT_DELAY,
        journal: bool = False,
        accept_journal_loss: bool = False,
        repair: bool = False,
    ) -> Vault:
        """Unlock a vault.

        ``journal=True`` (the mount daemon) makes each change cost one write()
        to the journal instead of an fsync; see journal.py. Whatever a killed
        writer left in the journal is replayed either way; a journal that was
        damaged or shortened within this boot is an error unless
        ``accept_journal_loss`` (then what verifies is applied, the rest lost).

        A vault with damaged records opens read-only; opening it for writing
        raises VaultDamaged unless ``repair`` (then call :meth:`repair`).
        A writer finishes what an earlier one left owed: compaction after
        shreds and replaced records.
        """
        path = Path(path).expanduser()
        if not path.exists():
            raise VaultNotFound(path)
        store = Store(path, readonly=readonly, map_size=map_size)
        try:
            header, slots = _read_header_and_slots(store)
            # A callable is asked only now, once the file is known to be a
            # readable vault: nobody types a passphrase for a broken file.
            secret = passphrase() if callable(passphrase) else bytearray(passphrase)
            kdf_started = time.perf_counter()
            master = _unlock(path, header, slots, secret)
            kdf_seconds = time.perf_counter() - kdf_started
            vault = cls(store, header, slots, master, compact_delay=compact_delay)
            vault.kdf_seconds = kdf_seconds
            applied = vault._read_state_from_lmdb()
            store.attach_journal(
                vault._derive(b"memvault.journal"),
                applied=applied.journal_seq,
                session_boot=applied.journal_boot,
                accept_loss=accept_journal_loss,
            )
            # Loading allocates tens of thousands of long-lived objects; the
            # cyclic GC would rescan them all repeatedly for nothing.
            gc.disable()
            try:
                vault._load()
            finally:
                gc.enable()
            if not readonly:
                if vault.damaged and not repair:
                    raise VaultDamaged(path, len(vault.damaged), vault.describe_damage())
                vault._begin_session(journal=journal, previous=applied)
            return vault
        except BaseException:
            store.close()
            raise

    def _begin_session(self, *, journal: bool, previous: VaultState) -> None:
        """Mark in the sealed state whether a journal is on, then finish owed work.

        The journal file exists (fsynced) before the state says a session is
        open, and the state says it is closed before the file goes: a journal
        is never missing while the state says one is open, except by damage.
        """
        store = self._store
        if journal:
            self._journal_boot = current_boot_id()
            store.open_journal_session(self._journal_boot)
            self._write(_no_change, bookkeeping=True)  # straight into LMDB: journal still off
            store.sync()
            store.journal_writes(True)
        else:
            if previous.session_open:  # a killed daemon's session: closed now
                self._write(_no_change, bookkeeping=True)
                store.sync()
            if not store.salvaged:  # on a salvage copy the journal waits for the rebuild
                store.close_journal()
        if self.compaction_owed and not self.damaged:
            try:
                self.compact()
            except DiskFull:
                log.warning("compaction owed by an earlier session waits: the disk is full")

    def _header_binding(self) -> bytes:
        """What the authenticated header commits to: the header and every slot's KDF."""
        parts = [self.header.encode()]
        for slot in sorted(self.slots, key=lambda s: s.index):
            parts.append(f"{slot.index}:{slot.kdf.describe()}:{slot.salt.hex()}".encode())
        return b"\n".join(parts)

    def _read_state_from_lmdb(self) -> VaultState:
        """The sealed state as LMDB has it (before any journal is replayed)."""
        with self._store.env.begin(buffers=True) as txn:
            return self._open_state(txn.get(_STATE_KEY, db=self._store.dbs["state"]))

    def _open_state(self, sealed) -> VaultState:
        try:
            if sealed is None:
                raise DecryptionError("missing")
            return VaultState.decode(self._state_key, self._open_master(Kind.STATE, sealed))
        except (DecryptionError, ValueError, struct.error):
            raise VaultCorrupted(self.path, "its record state is damaged") from None

    def _load(self) -> None:
        """Check the authenticated header and state, then decrypt every record's metadata."""
        store = self._store
        with store.read() as txn:
            auth = txn.get(_HEADER_AUTH_KEY, db=store.dbs["meta"])
            try:
                if auth is None:
                    raise DecryptionError("missing")
                expected = self._open_master(Kind.HEADER, auth)
            except DecryptionError:
                raise VaultTampered(
                    self.path, "its header or keyslot parameters were changed"
                ) from None
            if bytes(expected) != self._header_binding():
                raise VaultTampered(self.path, "its header or keyslot parameters were changed")
            stored_acc = self._open_state(txn.get(_STATE_KEY, db=store.dbs["state"])).acc
            self._acc = Accumulator(self._state_key, *stored_acc.state())
            sealed_root = txn.get(_ROOT_KEY, db=store.dbs["state"])
            if sealed_root is not None:
                try:
                    root = self._open_master_with(Kind.META, _ROOT_ID, sealed_root)
                    self._root = Meta.decode(root)
                except (DecryptionError, RecordFormatError):
                    self.damaged[_ROOT_ID] = "the root directory's attributes are damaged"
            if store.salvaged:  # read around a damaged structure: something may be missing
                self._mark_damaged(
                    _STRUCTURE_ID, "LMDB could not read it; what remains was read around it",
                    "the file's storage structure",
                )  # fmt: skip
            if txn.get(COMPACTION_OWED_KEY, db=store.dbs["state"]) is not None:
                self.compaction_owed = True  # an earlier session never compacted
                self.pending_shreds = 1
            known_paths: dict[bytes, str] = {}
            sealed_snapshot = txn.get(_SNAPSHOT_KEY, db=store.dbs["state"])
            if sealed_snapshot is not None:
                self._snapshot_stored = True
                if self._load_snapshot(txn, bytes(sealed_snapshot), stored_acc, known_paths):
                    return
            self._acc = self._load_every_record(txn, known_paths)
        if self._acc != stored_acc:
            if not (self._unverified or store.salvaged):
                raise VaultTampered(
                    self.path,
                    "records were removed, duplicated or replaced by older copies outside memvault",
                )
            self.unexplained = True
            self._acc = stored_acc  # kept as stored until `repair` accepts what is left
        self._check_tree()

    def _load_every_record(self, txn, known_paths: dict[bytes, str]) -> Accumulator:
        """Decrypt every record's key and metadata; return the accumulator they add up to.

        A record that fails still counts, through its separately sealed
        generation. A record stored under a damaged id is found again by
        trying the keys left without a record (its key and metadata are bound
        to its true id). Only a record whose generation cannot be read either
        leaves the accumulator unverifiable (``_unverified``).
        """
        acc = Accumulator(self._state_key)
        wrapped = {bytes(k): bytes(v) for k, v in self._store.items(txn, "keys")}
        unused_keys: dict[bytes, bytes] = {}  # keys whose own record failed
        orphans: list[tuple[bytes, bytes]] = []
        for key, value in self._store.items(txn, "records"):
            record_id = bytes(key)
            wrapped_key = wrapped.pop(record_id, None)
            try:
                entry = self._decode_entry(record_id, wrapped_key, value)
            except _Damaged as exc:
                if wrapped_key is not None:
                    unused_keys[record_id] = wrapped_key
                self._mark_damaged(record_id, str(exc), known_paths.get(record_id))
                gen = self._sealed_gen(record_id, value)
                if gen is not None:
                    acc.add(record_id, gen)
                else:
                    orphans.append((record_id, bytes(value)))
                continue
            acc.add(record_id, entry.meta.gen)
            if entry.meta.path in self._by_path:
                raise VaultTampered(self.path, "two records claim the same path")
            self._index(entry)
        unused_keys.update(wrapped)
        for stored_id, value in orphans:
            for true_id, key in list(unused_keys.items()):
                try:
                    entry = self._decode_entry(true_id, key, value)
                except _Damaged:
                    continue
                del unused_keys[true_id]
                wrapped.pop(true_id, None)
                acc.add(true_id, entry.meta.gen)
                wipe(entry.data_key)
                self._misfiled[stored_id] = (true_id, key, value)
                self._mark_damaged(
                    stored_id, "stored under a damaged record id; `repair` recovers it",
                    entry.meta.path,
                )  # fmt: skip
                break
            else:
                self._unverified = True
        for record_id in wrapped:
            self._mark_damaged(record_id, "a data key without a record", known_paths.get(record_id))
        return acc

    def _mark_damaged(self, record_id: bytes, reason: str, path: str | None = None) -> None:
        self.damaged[record_id] = reason
        if path is not None:
            self._damaged_paths[record_id] = path

    def _sealed_gen(self, record_id: bytes, value) -> int | None:
        """A stored record's generation from its own seal (None if that is damaged too)."""
        try:
            sealed_gen, _, _ = records.unpack(value)
            plain = open_sealed(self._master, sealed_gen, self._ad(Kind.GENERATION, record_id))
            return records.GEN.unpack(plain)[0]
        except (DecryptionError, RecordFormatError, struct.error):
            return None

    def _load_snapshot(
        self, txn, sealed: bytes, stored_acc: Accumulator, known_paths: dict[bytes, str]
    ) -> bool:
        """Index from the sealed snapshot if it matches the file exactly; else False.

        Even a snapshot that no longer matches names the records it knew
        (``known_paths``), so that damage can be reported by path.
        """
        try:
            plain = bytearray(padding.unframe(self._open_master(Kind.SNAPSHOT, sealed)))
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
            if state != stored_acc.encode():
                return False
            stored = (
                (bytes(k), bytes(v[: records.STAMP_SIZE]))
                for k, v in self._store.items(txn, "records")
            )
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
            self._index(entry)
        return True

    def _write_snapshot(self) -> None:
        rows = sorted(self._by_id.values(), key=lambda e: e.record_id)
        with self._store.read() as txn:
            db = self._store.dbs["records"]
            stamps = [bytes(txn.get(e.record_id, db=db)[: records.STAMP_SIZE]) for e in rows]
        plain = snapshot.encode(
            self._acc.encode(),
            (
                (e.record_id, stamp, e.meta.gen, e.data_key, e.meta.encode())
                for e, stamp in zip(rows, stamps, strict=True)
            ),
        )
        try:
            framed = padding.frame(plain)
            sealed = seal(
                self._master, framed, self._ad(Kind.SNAPSHOT), padding.bucket(len(framed))
            )
        finally:
            wipe(plain)
        dbs = self._store.dbs
        self._write(lambda txn: txn.put(_SNAPSHOT_KEY, sealed, db=dbs["state"]), bookkeeping=True)
        self._snapshot_stored = True

    def _decode_entry(self, record_id: bytes, wrapped_key: bytes | None, value) -> Entry:
        if wrapped_key is None:
            raise _Damaged("its data key is missing")
        try:
            data_key = open_sealed(self._master, wrapped_key, self._ad(Kind.DATA_KEY, record_id))
        except DecryptionError:
            raise _Damaged("its data key failed authentication") from None
        try:
            _, sealed_meta, _ = records.unpack(value)
            meta_bytes = open_sealed(data_key, sealed_meta, self._ad(Kind.META, record_id))
            meta = Meta.decode(meta_bytes)
        except (DecryptionError, RecordFormatError, ValueError) as exc:
            wipe(data_key)
            raise _Damaged(f"its metadata failed authentication ({exc})") from None
        return Entry(record_id, meta, data_key)

    def describe_damage(self, limit: int = 5) -> str:
        """The damaged records, for a message: paths where known, else record ids."""
        shown = [
            f"{self._damaged_paths.get(rid) or 'record ' + rid.hex()[:12]} ({reason})"
            for rid, reason in list(self.damaged.items())[:limit]
        ]
        more = len(self.damaged) - len(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        if self.unexplained:
            text += (
                "; and what can be read does not add up to the vault's integrity sum, so "
                "records may also be missing or rolled back"
            )
        return text

    def _check_tree(self) -> None:
        """Every record's parent must be a directory record.

        A parent can only be missing if its record is damaged; it is then
        stood in for in memory (empty metadata, default mode) so that its
        children stay reachable, and `repair` stores it.
        """
        missing = set()
        for path in self._by_path:
            parent = paths.parent(path)
            found = self._by_path.get(parent)
            if found is None and parent != paths.ROOT:
                missing.add(parent)
                missing.update(a for a in paths.ancestors(parent) if a not in self._by_path)
            elif found is not None and not found.meta.is_dir:
                raise VaultTampered(self.path, "a record lies below a file")
        if not missing:
            return
        if not self.damaged:
            raise VaultTampered(self.path, "a record's parent directory is missing")
        now = time.time_ns()
        self._recreated = [self._new_record(self._dir_meta(d, now)) for d in sorted(missing)]
        for write in self._recreated:
            self._index(write.entry)

    def repair(self, *, accept_unverified: bool = False) -> list[str]:
        """Re-file what was stored under a damaged id, drop what is damaged, and compact.

        Returns one line per action. Everything happens in one rewrite of the
        file (an atomic rename): a repair killed half-way changes nothing.
        Afterwards the vault is whole again, its accumulator re-sealed over
        the records that verify. When what could be read does not add up to
        the old accumulator, damage cannot be told from removed or rolled-back
        records, and only ``accept_unverified`` goes on.
        """
        with self._lock:
            self._check_writable()
            if self.unexplained and not accept_unverified:
                raise VaultTampered(
                    self.path,
                    "what can be read does not add up to its integrity sum, so damage cannot "
                    "be told from removed or rolled-back records; `memvault repair "
                    "--accept-unverified` accepts the vault as it now reads",
                )
            refiled = [
                (stored_id, self._decode_entry(true_id, wrapped, value), value)
                for stored_id, (true_id, wrapped, value) in self._misfiled.items()
            ]
            refiled_ids = {entry.record_id for _, entry, _ in refiled}
            dropped = [
                rid
                for rid in self.damaged
                if rid not in self._misfiled
                and rid not in refiled_ids
                and rid not in (_ROOT_ID, _STRUCTURE_ID)
            ]
            # Damaged entries are left out of the rewritten file rather than
            # deleted: a damaged key may be one LMDB cannot even look up.
            leave_out = {(db, rid) for rid in dropped for db in ("records", "keys", "derived")}
            leave_out |= {("records", sid) for sid, _, _ in refiled if sid not in refiled_ids}
            leave_out.add(("state", _SNAPSHOT_KEY))
            extra = {("records", entry.record_id): value for _, entry, value in refiled}
            for w in self._recreated:
                extra[("records", w.entry.record_id)] = self._pack_record(w, w.sealed_body)
                extra[("keys", w.entry.record_id)] = w.wrapped_key
            if _ROOT_ID in self.damaged:
                plain = self.root_meta().encode()
                extra[("state", _ROOT_KEY)] = seal(
                    self._master, plain, self._ad(Kind.META, _ROOT_ID), padding.bucket(len(plain))
                )
            acc = Accumulator(self._state_key)
            for entry in [*self._by_id.values(), *(e for _, e, _ in refiled)]:
                acc.add(entry.record_id, entry.meta.gen)
            extra[("state", _STATE_KEY)] = self._sealed_state(acc)
            self.compact(leave_out, extra)
            self._acc = acc
            self._snapshot_stored = False
            done = []
            for _, entry, _ in refiled:
                self._index(entry)
                done.append(f"recovered {entry.meta.path}")
            done += [
                f"dropped {self._damaged_paths.get(rid) or 'record ' + rid.hex()[:12]}"
                f" ({self.damaged[rid]})"
                for rid in dropped
            ]
            done += [f"recreated the directory {w.entry.meta.path}" for w in self._recreated]
            if _STRUCTURE_ID in self.damaged:
                done.append("rebuilt the file's storage structure from what could be read")
            if _ROOT_ID in self.damaged:
                done.append("reset the root directory's attributes")
            if self.unexplained:
                done.append("accepted the vault as it now reads (its integrity sum did not match)")
            self.damaged.clear()
            self._damaged_paths.clear()
            self._misfiled.clear()
            self._recreated = []
            self._unverified = self.unexplained = False
            self._store.close_journal()  # a salvaged journal is in the rebuilt file now
            return done

    # -- crypto helpers --------------------------------------------------------

    def _ad(self, kind: Kind, object_id: bytes = b"", generation: int = 0) -> bytes:
        return self._binding(kind, object_id, generation)

    def _seal_master(self, kind: Kind, plaintext: bytes) -> bytes:
        return seal(self._master, plaintext, self._ad(kind))

    def _open_master(self, kind: Kind, sealed) -> bytearray:
        return open_sealed(self._master, sealed, self._ad(kind))

    def _open_master_with(self, kind: Kind, object_id: bytes, sealed) -> bytearray:
        return open_sealed(self._master, sealed, self._ad(kind, object_id))

    def _seal_body(self, entry: Entry, data: bytes) -> bytes:
        ad = self._ad(Kind.BODY, entry.record_id, entry.meta.body_gen)
        return seal(entry.data_key, data, ad, padding.bucket(len(data)))

    # -- in-memory index -------------------------------------------------------

    def _index(self, entry: Entry) -> None:
        path = entry.meta.path
        self._by_path[path] = entry
        self._by_id[entry.record_id] = entry
        self._children.setdefault(paths.parent(path), {})[paths.basename(path)] = entry
        if entry.meta.is_dir:
            self._children.setdefault(path, {})

    def _unindex(self, entry: Entry) -> None:
        path = entry.meta.path
        del self._by_path[path]
        del self._by_id[entry.record_id]
        self._children.get(paths.parent(path), {}).pop(paths.basename(path), None)
        if entry.meta.is_dir and not self._children.get(path):
            self._children.pop(path, None)

    # -- change notifications (the search index keeps up through them) ----------

    def add_listener(self, listener: Callable[[str, bytes, str, bytes | None], None]) -> None:
        """Call ``listener(kind, record_id, path, data)`` after each change.

        kind is "put" (a file's new content), "delete" (a record shredded) or
        "move" (a file renamed to ``path``, content unchanged: whether it is
        indexed may change with its name, e.g. a temporary renamed to `x.md`).
        Listeners run after the vault's lock is released, in the writer's thread.
        """
        self._listeners.append(listener)

    def _notify(self, events: list[tuple[str, bytes, str, bytes | None]]) -> None:
        for event in events:
            for listener in self._listeners:
                listener(*event)

    # -- queries ----------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for e in self._by_path.values() if e.meta.type == FILE)

    @property
    def readonly(self) -> bool:
        return self._store.readonly

    @property
    def record_count(self) -> int:
        """Files, directories and symlinks (O(1), unlike len(), which counts files)."""
        return len(self._by_id)

    def exists(self, path: str) -> bool:
        with self._lock:
            norm = paths.normalize(path, allow_root=True)
            return norm == paths.ROOT or norm in self._by_path

    def stat(self, path: str) -> Meta:
        with self._lock:
            norm = paths.normalize(path, allow_root=True)
            if norm == paths.ROOT:
                return self.root_meta()
            return self._entry(norm).meta

    def root_meta(self) -> Meta:
        """The root directory's attributes (it has no record; see set_attrs)."""
        if self._root is not None:
            return self._root
        created = self.header.created_ns
        return Meta("", DIRECTORY, 0o700, 0, created, created, 0, 0, os.getuid(), os.getgid())

    def list(self, directory: str = paths.ROOT) -> list[tuple[str, Meta]]:
        """The entries of a directory, sorted by name."""
        with self._lock:
            norm = paths.normalize(directory, allow_root=True)
            if norm != paths.ROOT:
                entry = self._entry(norm)
                if not entry.meta.is_dir:
                    raise NotADirectory(norm)
            children = self._children.get(norm, {})
            return sorted((name, e.meta) for name, e in children.items())

    def walk(self) -> list[Meta]:
        """Every record's metadata, sorted by path."""
        with self._lock:
            return sorted((e.meta for e in self._by_path.values()), key=lambda m: m.path)

    def get(self, path: str) -> bytes:
        with self._lock:
            return self._read_body(self._entry(paths.normalize(path)))

    def get_record(self, record_id: bytes) -> bytes:
        """The content of a file record wherever it lives now (MemoryNotFound once gone)."""
        with self._lock:
            entry = self._by_id.get(record_id)
            if entry is None:
                raise MemoryNotFound(record_id.hex())
            return self._read_body(entry)

    def _read_body(self, entry: Entry) -> bytes:
        norm = entry.meta.path
        if entry.meta.is_dir:
            raise IsADirectory(norm)
        with self._store.read() as txn:
            value = self._stored_record(txn, entry.record_id)
            if value is None:
                raise MemoryCorrupted(norm)
            try:
                _, _, sealed_body = records.unpack(value)
                ad = self._ad(Kind.BODY, entry.record_id, entry.meta.body_gen)
                plain = open_sealed(entry.data_key, sealed_body, ad)
            except (DecryptionError, RecordFormatError):
                raise MemoryCorrupted(norm) from None
        if len(plain) < entry.meta.size:
            raise MemoryCorrupted(norm)
        del plain[entry.meta.size :]  # the padding
        return bytes(plain)

    def _stored_record(self, txn, record_id: bytes):
        """A record's stored value; found by a scan if a damaged key broke the B-tree's order.

        LMDB finds keys by binary search: one damaged key can hide its
        neighbours from lookups while a cursor still walks past them.
        """
        db = self._store.dbs["records"]
        value = txn.get(record_id, db=db)
        if value is None and self.damaged:
            for key, found in self._store.items(txn, "records"):
                if bytes(key) == record_id:
                    return found
        return value

    def readlink(self, path: str) -> str:
        with self._lock:
            entry = self._entry(paths.normalize(path))
            if entry.meta.type != SYMLINK:
                raise InvalidMove(path, path, "not a symbolic link")
            return entry.meta.target

    def _entry(self, norm: str) -> Entry:
        entry = self._by_path.get(norm)
        if entry is None:
            raise MemoryNotFound(norm)
        return entry

    # -- changes ----------------------------------------------------------------

    def put(
        self,
        path: str,
        data: bytes,
        *,
        mode: int | None = None,
        mtime_ns: int | None = None,
    ) -> Meta:
        """Store ``data`` at ``path``, creating missing parent directories."""
        return self.put_many([(path, data)], mode=mode, mtime_ns=mtime_ns)[0]

    def put_many(
        self,
        items: Iterable[tuple[str, bytes]],
        *,
        mode: int | None = None,
        mtime_ns: int | None = None,
    ) -> list[Meta]:
        """Store several memories in one transaction (one fsync): all or none.

        A path given twice keeps its last content.
        """
        batch = {}
        for path, data in items:
            if len(data) > MAX_MEMORY_SIZE:
                raise TooLarge(path, len(data), MAX_MEMORY_SIZE)
            batch[paths.normalize(path)] = data
        with self._lock:
            self._check_writable()
            now = time.time_ns()
            mtime = now if mtime_ns is None else mtime_ns
            new_dirs: dict[str, _Write] = {}
            writes: list[_Write] = []
            metas = []
            events = []
            for norm, data in batch.items():
                writes += self._parent_dirs(norm, now, new_dirs)
                existing = self._by_path.get(norm)
                if norm in new_dirs or (existing is not None and existing.meta.is_dir):
                    raise IsADirectory(norm)
                write = self._file_write(norm, existing, data, now, mtime, mode)
                writes.append(write)
                metas.append(write.entry.meta)
                events.append(("put", write.entry.record_id, norm, data))
            self._commit(writes)
        self._notify(events)
        return metas

    def put_record(self, record_id: bytes, data: bytes | bytearray) -> Meta:
        """Store ``data`` as the content of a file record, wherever it lives now.

        The filesystem commits through this: a path read before the vault's
        lock may name another record by then (rm, mv), a record id cannot.
        Raises MemoryNotFound once the record is gone (shredded).
        """
        with self._lock:
            self._check_writable()
            entry = self._by_id.get(record_id)
            if entry is None:
                raise MemoryNotFound(record_id.hex())
            norm = entry.meta.path
            if entry.meta.type != FILE:
                raise IsADirectory(norm)
            if len(data) > MAX_MEMORY_SIZE:
                raise TooLarge(norm, len(data), MAX_MEMORY_SIZE)
            now = time.time_ns()
            write = self._file_write(norm, entry, data, now, now, None)
            self._commit([write])
        self._notify([("put", record_id, norm, data)])
        return write.entry.meta

    def _file_write(
        self,
        norm: str,
        existing: Entry | None,
        data: bytes | bytearray,
        now: int,
        mtime: int,
        mode: int | None,
    ) -> _Write:
        """The write storing ``data`` as a file: a new version of ``existing``, or a new record."""
        if existing is not None:
            meta = existing.meta.evolve(
                size=len(data),
                mtime_ns=mtime,
                ctime_ns=now,
                mode=existing.meta.mode if mode is None else mode,
            )
            meta = replace(meta, body_gen=meta.gen)
            entry = Entry(existing.record_id, meta, existing.data_key)
            write = _Write(entry, existing.meta.gen, None)
        else:
            file_mode = records.DEFAULT_FILE_MODE if mode is None else mode
            meta = Meta(
                norm, FILE, file_mode, len(data), mtime, now, 1, 1, os.getuid(), os.getgid(),
            )  # fmt: skip
            write = self._new_record(meta)
        write.sealed_body = self._seal_body(write.entry, data)
        return write

    def mkdir(self, path: str, *, mode: int | None = None, parents: bool = False) -> Meta:
        with self._lock:
            self._check_writable()
            norm = paths.normalize(path)
            existing = self._by_path.get(norm)
            if existing is not None:
                if parents and existing.meta.is_dir:
                    return existing.meta
                raise AlreadyExists(norm)
            now = time.time_ns()
            if parents:
                writes = self._parent_dirs(norm, now)
            else:
                self._require_dir(paths.parent(norm))
                writes = []
            meta = self._dir_meta(norm, now, mode)
            writes.append(self._new_record(meta))
            self._commit(writes)
            return meta

    def symlink(self, path: str, target: str) -> Meta:
        with self._lock:
            self._check_writable()
            norm = paths.normalize(path)
            if norm in self._by_path:
                raise AlreadyExists(norm)
            self._require_dir(paths.parent(norm))
            now = time.time_ns()
            meta = Meta(
                norm,
                SYMLINK,
                0o777,
                len(target.encode()),
                now,
                now,
                1,
                1,
                os.getuid(),
                os.getgid(),
                target=target,
            )
            self._commit([self._new_record(meta)])
            return meta

    def set_attrs(
        self,
        path: str,
        *,
        mode: int | None = None,
        mtime_ns: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        xattrs: dict[str, str] | None = None,
    ) -> Meta:
        """Change metadata only (chmod, utimens, chown, xattrs); the body is untouched."""
        with self._lock:
            self._check_writable()
            norm = paths.normalize(path, allow_root=True)
            changes: dict = {"ctime_ns": time.time_ns()}
            for name, value in (
                ("mode", mode),
                ("mtime_ns", mtime_ns),
                ("uid", uid),
                ("gid", gid),
                ("xattrs", xattrs),
            ):
                if value is not None:
                    changes[name] = value
            if norm == paths.ROOT:
                return self._set_root(self.root_meta().evolve(**changes))
            entry = self._entry(norm)
            meta = entry.meta.evolve(**changes)
            self._commit(
                [_Write(Entry(entry.record_id, meta, entry.data_key), entry.meta.gen, None)]
            )
            return meta

    # -- derived data (a record's chunk vectors), sealed under its data key ----

    def put_derived(self, record_id: bytes, body_gen: int, blob: bytes) -> bool:
        """Store data derived from a record's current body; False if it changed meanwhile.

        Sealed with the record's own key and bound to its body generation, so
        it is shredded with the record and never outlives the content it
        describes.
        """
        with self._lock:
            self._check_writable()
            entry = self._by_id.get(record_id)
            if entry is None or entry.meta.body_gen != body_gen:
                return False
            framed = padding.frame(blob)
            ad = self._ad(Kind.VECTOR, record_id, body_gen)
            sealed = seal(entry.data_key, framed, ad, padding.bucket(len(framed)))
            dbs = self._store.dbs
            self._write(lambda txn: txn.put(record_id, sealed, db=dbs["derived"]), bookkeeping=True)
            return True

    def get_derived(self, record_id: bytes) -> bytes | None:
        """The derived data stored for a record's current body, or None."""
        with self._lock:
            entry = self._by_id.get(record_id)
            if entry is None:
                return None
            with self._store.read() as txn:
                stored = txn.get(record_id, db=self._store.dbs["derived"])
                if stored is None:
                    return None
                stored = bytes(stored)
            try:  # bound to the current body generation: anything older fails
                ad = self._ad(Kind.VECTOR, record_id, entry.meta.body_gen)
                return padding.unframe(open_sealed(entry.data_key, stored, ad))
            except (DecryptionError, ValueError):
                log.warning("derived data of a record failed authentication; recomputing")
                return None

    def drop_derived(self) -> None:
        """Forget every record's derived data (`memvault reindex`)."""
        with self._lock:
            self._check_writable()
            with self._store.read() as txn:
                keys = [bytes(k) for k, _ in self._store.items(txn, "derived")]
            dbs = self._store.dbs

            def txn_fn(txn) -> None:
                for key in keys:
                    txn.delete(key, db=dbs["derived"])

            if keys:
                self._write(txn_fn, owes_compaction=True)  # old vectors leave the file
                self._schedule_compaction()

    # -- the embedding model the vault's vectors belong to ----------------------

    def pinned_model(self) -> str | None:
        """SHA-256 of the embedding model this vault's vectors are made with."""
        with self._lock, self._store.read() as txn:
            sealed = txn.get(_MODEL_KEY, db=self._store.dbs["state"])
            if sealed is None:
                return None
            try:
                return bytes(self._open_master_with(Kind.INDEX, _MODEL_KEY, sealed)).decode()
            except DecryptionError:
                raise VaultTampered(self.path, "its embedding-model pin was changed") from None

    def pin_model(self, sha256: str) -> None:
        with self._lock:
            self._check_writable()
            sealed = seal(self._master, sha256.encode(), self._ad(Kind.INDEX, _MODEL_KEY))
            dbs = self._store.dbs
            self._write(lambda txn: txn.put(_MODEL_KEY, sealed, db=dbs["state"]))

    def _set_root(self, meta: Meta) -> Meta:
        """The root's attributes live sealed under the master key in the state database."""
        plain = meta.encode()
        sealed = seal(
            self._master, plain, self._ad(Kind.META, _ROOT_ID), padding.bucket(len(plain))
        )
        dbs = self._store.dbs
        self._write(lambda txn: txn.put(_ROOT_KEY, sealed, db=dbs["state"]))
        self._root = meta
        return meta

    def rename(self, old: str, new: str, *, replace_existing: bool = True) -> None:
        """Move a file or directory tree; an existing target file is replaced (and shredded)."""
        with self._lock:
            self._check_writable()
            src = paths.normalize(old)
            dst = paths.normalize(new)
            entry = self._entry(src)
            if src == dst:
                return
            if paths.is_within(dst, src):
                raise InvalidMove(src, dst, "a directory cannot move inside itself")
            now = time.time_ns()
            shreds: list[Entry] = []
            target = self._by_path.get(dst)
            if target is not None:
                if not replace_existing:
                    raise AlreadyExists(dst)
                if entry.meta.is_dir and not target.meta.is_dir:
                    raise NotADirectory(dst)
                if not entry.meta.is_dir and target.meta.is_dir:
                    raise IsADirectory(dst)
                if target.meta.is_dir and self._children.get(dst):
                    raise DirectoryNotEmpty(dst)
                shreds.append(target)
            moving = [entry, *self._subtree(src)]
            self._check_moved_paths(src, dst, moving)
            writes = self._parent_dirs(dst, now)
            for e in moving:
                new_path = dst + e.meta.path[len(src) :]
                meta = e.meta.evolve(path=new_path, ctime_ns=now)
                writes.append(_Write(Entry(e.record_id, meta, e.data_key), e.meta.gen, None))
            self._commit(writes, shreds)
        self._notify([("delete", e.record_id, e.meta.path, None) for e in shreds])
        self._notify(_moves(writes))

    def exchange(self, a: str, b: str) -> None:
        """Swap two entries atomically (rename with RENAME_EXCHANGE)."""
        with self._lock:
            self._check_writable()
            first, second = paths.normalize(a), paths.normalize(b)
            if first == second:
                return
            if paths.is_within(first, second) or paths.is_within(second, first):
                raise InvalidMove(first, second, "one contains the other")
            now = time.time_ns()
            writes = []
            moves = [
                (s, d, [self._entry(s), *self._subtree(s)])
                for s, d in ((first, second), (second, first))
            ]
            for src, dst, moving in moves:
                self._check_moved_paths(src, dst, moving)
            for src, dst, moving in moves:
                for e in moving:
                    meta = e.meta.evolve(path=dst + e.meta.path[len(src) :], ctime_ns=now)
                    writes.append(_Write(Entry(e.record_id, meta, e.data_key), e.meta.gen, None))
            self._commit(writes)
        self._notify(_moves(writes))

    @staticmethod
    def _check_moved_paths(src: str, dst: str, moving: list[Entry]) -> None:
        """Refuse a move that would push a descendant past the path limit.

        Checked before anything changes: such an entry could no longer be
        listed, read or removed, through the mount or the CLI.
        """
        for e in moving:
            paths.check_length(dst + e.meta.path[len(src) :])

    def _subtree(self, norm: str) -> list[Entry]:
        """Every entry strictly below the directory ``norm`` (none for a file)."""
        found = []
        stack = [norm]
        while stack:
            for child in self._children.get(stack.pop(), {}).values():
                found.append(child)
                if child.meta.is_dir:
                    stack.append(child.meta.path)
        return found

    def entry_at(self, norm: str) -> tuple[bytes, Meta]:
        """(record id, metadata) at an already normalised path: the filesystem's fast path."""
        entry = self._by_path.get(norm)
        if entry is None:
            raise MemoryNotFound(norm)
        return entry.record_id, entry.meta

    def record_id(self, path: str) -> bytes:
        """The stable identity of the entry at ``path`` (kept across renames)."""
        with self._lock:
            return self._entry(paths.normalize(path)).record_id

    def by_record_id(self, record_id: bytes) -> Meta | None:
        """The current metadata of a record, or None once it is gone."""
        with self._lock:
            entry = self._by_id.get(record_id)
            return entry.meta if entry is not None else None

    def delete(self, path: str, *, recursive: bool = False) -> int:
        """Crypto-shred a file, symlink or directory; return how many records went."""
        with self._lock:
            self._check_writable()
            norm = paths.normalize(path)
            entry = self._entry(norm)
            below = self._subtree(norm)
            if below and not recursive:
                raise DirectoryNotEmpty(norm)
            doomed = [entry, *below]
            self._commit([], doomed)
        self._notify([("delete", e.record_id, e.meta.path, None) for e in doomed])
        return len(doomed)

    def _check_writable(self) -> None:
        if self._closed:
            raise ReadOnlyVault(self.path)
        if self._store.readonly:
            raise ReadOnlyVault(self.path)

    def _require_dir(self, norm: str) -> None:
        if norm == paths.ROOT:
            return
        entry = self._entry(norm)
        if not entry.meta.is_dir:
            raise NotADirectory(norm)

    def _dir_meta(self, norm: str, now: int, mode: int | None = None) -> Meta:
        return Meta(
            norm,
            DIRECTORY,
            records.DEFAULT_DIR_MODE if mode is None else mode,
            0,
            now,
            now,
            1,
            1,
            os.getuid(),
            os.getgid(),
        )

    def _parent_dirs(
        self, norm: str, now: int, planned: dict[str, _Write] | None = None
    ) -> list[_Write]:
        """Writes creating the missing ancestors of ``norm`` (mkdir -p).

        ``planned`` collects directories already created earlier in the same
        batch, so that a batch creates each directory once.
        """
        planned = {} if planned is None else planned
        writes = []
        for ancestor in paths.ancestors(norm):
            existing = self._by_path.get(ancestor)
            if existing is None and ancestor not in planned:
                write = self._new_record(self._dir_meta(ancestor, now))
                planned[ancestor] = write
                writes.append(write)
            elif existing is not None and not existing.meta.is_dir:
                raise NotADirectory(ancestor)
        return writes

    def _new_record(self, meta: Meta) -> _Write:
        record_id = os.urandom(_ID_SIZE)
        while record_id in self._by_id:  # pragma: no cover - 2^-128
            record_id = os.urandom(_ID_SIZE)
        data_key = new_key()
        wrapped = seal(self._master, data_key, self._ad(Kind.DATA_KEY, record_id))
        write = _Write(Entry(record_id, meta, data_key), None, None, wrapped)
        if meta.type != FILE:  # every record has a body: types look alike in the file
            write.sealed_body = self._seal_body(write.entry, b"")
        return write

    def _write(
        self,
        fn: Callable,
        acc: Accumulator | None = None,
        *,
        owes_compaction: bool = False,
        bookkeeping: bool = False,
    ):
        """Run ``fn`` in one store write, with the sealed state that goes with it.

        Every write carries the state (accumulator, the journal position it
        will have, whether a journal is on), so what LMDB or the journal holds
        always says, authenticated, how far it goes. ``bookkeeping`` writes
        (the state alone, the index snapshot) do not make a compaction worth
        it at close.
        """
        sealed = self._sealed_state(acc)
        dbs = self._store.dbs

        def txn_fn(txn):
            result = fn(txn)
            txn.put(_STATE_KEY, sealed, db=dbs["state"])
            if owes_compaction:
                txn.put(COMPACTION_OWED_KEY, b"", db=dbs["state"])
            return result

        result = self._store.write(txn_fn)
        self._wrote = True
        self._dirty = self._dirty or not bookkeeping
        if owes_compaction:
            self.compaction_owed = True
        return result

    def _sealed_state(self, acc: Accumulator | None = None) -> bytes:
        state = VaultState(self._acc if acc is None else acc, self._store.next_seq)
        state.journal_boot = self._journal_boot
        return self._seal_master(Kind.STATE, state.encode())

    def _pack_record(self, w: _Write, sealed_body: bytes) -> bytes:
        """A record's stored value: its sealed generation, metadata and the given body."""
        rid = w.entry.record_id
        meta = w.entry.meta.encode()
        sealed_meta = seal(
            w.entry.data_key, meta, self._ad(Kind.META, rid), padding.bucket(len(meta))
        )
        sealed_gen = seal(
            self._master, records.GEN.pack(w.entry.meta.gen), self._ad(Kind.GENERATION, rid)
        )
        return records.pack(sealed_gen, sealed_meta, sealed_body)

    def _put_record(self, txn, w: _Write) -> None:
        """Store one record (keeping its stored body unless the write has a new one)."""
        dbs = self._store.dbs
        rid = w.entry.record_id
        body = w.sealed_body
        if body is None:
            _, _, stored_body = records.unpack(txn.get(rid, db=dbs["records"]))
            body = bytes(stored_body)
        txn.put(rid, self._pack_record(w, body), db=dbs["records"])
        if w.wrapped_key is not None:
            txn.put(rid, w.wrapped_key, db=dbs["keys"])
        elif w.sealed_body is not None:  # new content: its derived data is stale
            txn.delete(rid, db=dbs["derived"])

    def _commit(self, writes: list[_Write], shreds: Iterable[Entry] = ()) -> None:
        """Apply writes and shreds in one durable transaction, then to the index.

        Shreds and replaced records leave old ciphertext in LMDB's free pages
        (readable with keys that are still live, for a replaced record), so
        both make a compaction owed: recorded in the same transaction, done
        after a quiet moment, at close, or by the next writer.
        """
        shreds = list(shreds)
        acc = self._acc.copy()
        for w in writes:
            if w.old_gen is not None:
                acc.remove(w.entry.record_id, w.old_gen)
            acc.add(w.entry.record_id, w.entry.meta.gen)
        for s in shreds:
            acc.remove(s.record_id, s.meta.gen)
        dbs = self._store.dbs
        owed = bool(shreds) or any(w.old_gen is not None for w in writes)

        def txn_fn(txn) -> None:
            for w in writes:
                self._put_record(txn, w)
            for s in shreds:
                txn.delete(s.record_id, db=dbs["derived"])
                txn.delete(s.record_id, db=dbs["records"])
                txn.delete(s.record_id, db=dbs["keys"])
            if self._snapshot_stored:
                txn.delete(_SNAPSHOT_KEY, db=dbs["state"])

        try:
            self._write(txn_fn, acc, owes_compaction=owed)
        except DiskFull:
            if writes or not self._store.release_reserve():
                raise
            self._write(txn_fn, acc, owes_compaction=owed)  # a shred frees space: use the reserve
        for w in writes:  # stored now: a flush below must not find a second copy alive
            w.sealed_body = None
        self._snapshot_stored = False
        self._acc = acc
        for s in shreds:
            self._unindex(s)
            wipe(s.data_key)
        for w in writes:
            old = self._by_id.get(w.entry.record_id)
            if old is not None:
                self._unindex(old)
        for w in sorted(writes, key=lambda w: w.entry.meta.path.count("/")):
            self._index(w.entry)
        self.pending_shreds += len(shreds)
        if owed:
            self._schedule_compaction()
        self._schedule_flush()

    # -- compaction and closing ------------------------------------------------------

    def _schedule_flush(self) -> None:
        """Journaled changes reach LMDB within FLUSH_DELAY, or at once past FLUSH_BYTES."""
        pending = self._store.journal_bytes
        if not pending:
            return
        if pending > FLUSH_BYTES:
            self._store.flush()
        elif self._flush_timer is None:
            timer = threading.Timer(FLUSH_DELAY, self._flush_quietly)
            timer.daemon = True
            self._flush_timer = timer
            timer.start()

    def _flush_quietly(self) -> None:
        with self._lock:
            self._flush_timer = None
            if not self._closed:
                try:
                    self._store.flush()
                except MemvaultError as exc:
                    log.warning("moving the journal into the vault failed: %s", exc)

    def _schedule_compaction(self) -> None:
        if self._compact_delay is None:
            return
        if self._compact_timer is not None:
            self._compact_timer.cancel()
        timer = threading.Timer(self._compact_delay, self._compact_quietly)
        timer.daemon = True
        self._compact_timer = timer
        timer.start()

    def _compact_quietly(self) -> None:
        """The debounced compaction (a timer thread): failures are logged, retried at close."""
        with self._lock:
            if not self._closed and self.compaction_owed:
                try:
                    self.compact()
                except MemvaultError as exc:
                    log.warning("compaction after shreds failed: %s", exc)

    def sync(self) -> None:
        """Make every change so far durable on disk (fsync)."""
        with self._lock:
            if not self._store.readonly:
                self._store.sync()

    def compact(
        self,
        leave_out: Iterable[tuple[str, bytes]] = (),
        extra: dict[tuple[str, bytes], bytes] | None = None,
    ) -> None:
        """Rewrite the vault file without free pages: shredded bytes are gone after this."""
        with self._lock:
            self._check_writable()
            dropped = frozenset({("state", COMPACTION_OWED_KEY), *leave_out})
            self._store.rebuild(leave_out=dropped, extra=extra)
            self.pending_shreds = 0
            self.compaction_owed = False
            self._dirty = False

    def _finish_writes(self) -> None:
        """Snapshot the index, close the journal, then compact if anything changed.

        The state that says no journal is open is written straight into
        LMDB, after everything journaled is there and before the journal
        file goes (see _begin_session). Compacting whenever the session
        changed something leaves no old version in free pages and packs the
        B-tree's half-full pages (random ids split them): a locked vault is
        always as small as it can be.
        """
        if self.damaged:
            return  # opened only to be repaired: repair() does its own rewrite
        if not self._snapshot_stored:
            with contextlib.suppress(DiskFull):  # only an unlock speed-up
                self._write_snapshot()
        self._store.flush()
        if self._journal_boot != NO_BOOT:
            self._store.journal_writes(False)
            self._journal_boot = NO_BOOT
            self._write(_no_change, bookkeeping=True)
        if self.compaction_owed or self._dirty:
            try:
                self.compact()
            except DiskFull:
                self._store.settle()
                self._store.sync()
                if self.compaction_owed:
                    raise CompactionPending(self.path, "the disk is full") from None
        elif self._wrote:
            self._store.settle()
        self._store.sync()
        self._store.close_journal()  # the state in the file says no session is open

    def close(self) -> None:
        """Finish pending shreds (compaction), then wipe every key from memory."""
        with self._lock:
            if self._closed:
                return
            for timer in (self._compact_timer, self._flush_timer):
                if timer is not None:
                    timer.cancel()
            try:
                if not self._store.readonly:
                    self._finish_writes()
            finally:
                self._closed = True
                self._store.close()
                for entry in self._by_id.values():
                    wipe(entry.data_key)
                wipe(self._master)
                for key in self._subkeys:
                    wipe(key)
                self._by_path.clear()
                self._by_id.clear()
                self._children.clear()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _moves(writes: list[_Write]) -> list[tuple[str, bytes, str, bytes | None]]:
    return [("move", w.entry.record_id, w.entry.meta.path, None)
            for w in writes if w.entry.meta.type == FILE and w.sealed_body is None]  # fmt: skip


class _Damaged(Exception):
    """A record that cannot be decrypted (reason in the message)."""


def _no_change(txn) -> None:
    """A write that only carries the sealed state (see Vault._write)."""


def _unlock(path: Path, header: Header, slots: list, passphrase: bytearray) -> bytearray:
    """Try each keyslot in turn; return the master key."""
    try:
        for slot in slots:
            if not isinstance(slot, Keyslot):
                raise VaultCorrupted(path, f"keyslot {slot.index} is damaged")
            try:  # before any Argon2id: a forged slot must not cost minutes and GiBs
                slot.kdf.validate()
            except ValueError:
                raise UnreasonableKdf(slot.index, slot.kdf.describe(), KdfParams.limits()) from None
        for slot in slots:
            try:
                return slot.unwrap(passphrase, header.version, header.vault_id)
            except DecryptionError:
                continue
        raise WrongPassphrase(path)
    finally:
        wipe(passphrase)
