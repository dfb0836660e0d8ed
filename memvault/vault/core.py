"""The Vault: encrypted memories in one LMDB file, addressed by record id.

Key hierarchy (see crypto/SECURITY.md): passphrase --Argon2id--> keyslot key,
which wraps the random master key; the master key wraps one random data key
per record and seals the vault-level state; each data key seals its record's
metadata and body. LMDB keys are random record ids. The path of every record
lives inside its sealed metadata; unlocking builds the path tree in memory.

The filesystem works by record id (lookup, listdir, create_in, get_record,
put_record, remove_record, move, set_record_attrs): one trip through the
lock per request. Paths are for the edges (CLI, ingest): the path methods
resolve a path and do the same.

The Vault is thread-safe: every request holds one lock, briefly (the tree in
memory and one store transaction). Moving the journal into LMDB and
compacting run in the background without it (housekeeping.py, store.py).

This module is the vault's whole public surface, by id and by path, and so
longer than the others; the work is done by the parts it names: loading.py
(unlock), tree.py, sealing.py, writer.py (commits, sessions, compaction),
damage.py, store.py, schema.py.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..activity import Activity
from ..crypto import DEFAULT_KDF, DecryptionError, KdfParams, Keyslot, Kind, new_key, wipe
from ..errors import (
    AlreadyExists,
    DestinationExists,
    InvalidMove,
    IsADirectory,
    MemoryCorrupted,
    MemoryNotFound,
    NotADirectory,
    ReadOnlyVault,
    TooLarge,
    VaultDamaged,
    VaultExists,
    VaultNotFound,
    VaultTampered,
)
from . import audit, clock, padding, rollback
from .accumulator import Accumulator
from .audit import Checkpoint, Shown, current_caller
from .bodies import Bodies, ChunkMissing, chunk_size_of
from .damage import Damage
from .header import FORMAT_VERSION, Header
from .housekeeping import DEFAULT_COMPACT_DELAY
from .keyslots import PASSPHRASE_ONLY, Factors, candidates, unlock
from .later import LaterLock
from .loading import (
    Loader,
    VaultInfo,
    open_state,
    read_header_and_slots,
    read_info,
)
from .records import FILE, SYMLINK, Meta, RecordFormatError
from .schema import (
    AUDIT,
    AUDIT_CHECKPOINT_KEY,
    CHUNKS,
    DERIVED,
    HEADER_AUTH_KEY,
    HEADER_KEY,
    ID_SIZE,
    KEYS,
    META,
    MODEL_KEY,
    RECORDS,
    ROOT_ID,
    ROOT_KEY,
    SEARCH_INDEX_KEY,
    SIGNING_KEY,
    SLOTS,
    SNAPSHOT_KEY,
    STATE,
    STATE_KEY,
    STRUCTURE_ID,
)
from .sealing import Sealer, header_binding
from .store import Store, fsync_dir
from .tree import Entry, PathTree
from .writer import Event, Write, Writer

__all__ = ["MAX_MEMORY_SIZE", "Vault", "VaultInfo", "read_info"]

log = logging.getLogger("memvault")

MAX_MEMORY_SIZE = 1 << 30
"""Largest memory the vault stores (the filesystem answers EFBIG above it): 1 GiB,
16,384 chunks, whose table (8 bytes a chunk) every write of the file re-seals."""


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
        self._sealer = Sealer(header, master_key)
        self._state_key = self._sealer.derive(b"memvault.state")
        self._lock = LaterLock()
        self._tree = PathTree()
        self._bodies = Bodies(self._sealer, self._stored_record, chunk_size_of(header.version))
        self.activity = Activity()
        """Touched by the mount for every request: background work waits for a lull."""
        self._writer = Writer(
            store,
            self._sealer,
            self._bodies,
            self._tree,
            self._state_key,
            self._lock,
            compact_delay,
            self.activity,
        )
        self._writer.created_ns = header.created_ns
        self.damage = Damage()
        self.kdf_seconds = 0.0  # how long unlocking spent in Argon2id
        self.first_seen_here = False  # no record of it on this machine before (rollback.py)
        self.opened_with: Keyslot | None = None
        """The keyslot the unlock's secret opened."""
        self._listeners: list[Callable[[str, bytes, str, bytes | None], None]] = []
        self._closed = False

    @property
    def pending_shreds(self) -> int:
        """Shreds since the last compaction (their ciphertext may still be in free pages)."""
        return self._writer.pending_shreds

    @property
    def compaction_owed(self) -> bool:
        """Shredded or replaced bytes are still in the file (a compaction will remove them)."""
        return self._writer.compaction_owed

    @property
    def journaled_changes(self) -> int:
        """Changes in the journal only, not moved into LMDB yet (the housekeeper's job)."""
        return self._store.journaled_entries

    @property
    def housekeeping(self) -> list[str]:
        """The background jobs scheduled or running ("flush", "compaction"): work
        the last changes left for a lull in the requests."""
        return self._writer.housekeeper.scheduled()

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
            header = Header(FORMAT_VERSION, os.urandom(ID_SIZE), time.time_ns())
            slot = Keyslot.create(
                0, master, bytearray(passphrase), kdf, header.version, header.vault_id
            )
            vault = cls(store, header, [slot], master, compact_delay=compact_delay)
            auth = vault._sealer.seal(Kind.HEADER, header_binding(header, [slot]))

            def txn_fn(txn):
                txn.put(HEADER_KEY, header.encode(), db=META)
                txn.put(HEADER_AUTH_KEY, auth, db=META)
                txn.put(bytes([0]), slot.encode(), db=SLOTS)

            vault._writer.write(txn_fn)
            vault._watch_rollback()
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
        factors: Factors = PASSPHRASE_ONLY,
        verify_every_record: bool = False,
        accept_rollback: bool = False,
    ) -> Vault:
        """Unlock a vault.

        ``factors``: a keyfile's hash, or that the secret is a recovery key
        (keyslots.py); a missing or wrong keyfile is refused before the
        passphrase is asked.

        ``journal=True`` (the mount daemon) makes each change cost one write()
        to the journal instead of an fsync; see journal.py. Whatever a killed
        writer left in the journal is replayed either way; a journal that was
        damaged or shortened within this boot is an error unless
        ``accept_journal_loss`` (then what verifies is applied, the rest lost).

        A vault with damaged records opens read-only; opening it for writing
        raises VaultDamaged unless ``repair`` (then call :meth:`repair`).
        A writer finishes what an earlier one left owed: compaction after
        shreds and replaced records. ``verify_every_record`` decrypts each
        record's key and metadata even where the sealed index snapshot would
        spare it (`memvault check`).

        A vault older than the last one this machine saw (rollback.py) raises
        VaultRolledBack unless ``accept_rollback``, and so does another copy of it
        at the generation it last saw (VaultForked).
        """
        path = Path(path).expanduser()
        if not path.exists():
            raise VaultNotFound(path)
        store = Store(path, readonly=readonly, map_size=map_size)
        try:
            header, slots = read_header_and_slots(store)
            candidates(path, slots, factors)  # damage and missing factors: before asking
            # A callable is asked only now, once the file is known to be a
            # readable vault: nobody types a passphrase for a broken file.
            secret = passphrase() if callable(passphrase) else bytearray(passphrase)
            kdf_started = time.perf_counter()
            master, opened = unlock(path, header, slots, secret, factors)
            kdf_seconds = time.perf_counter() - kdf_started
            vault = cls(store, header, slots, master, compact_delay=compact_delay)
            vault.kdf_seconds = kdf_seconds
            vault.opened_with = opened
            with store.read() as txn:
                applied = open_state(
                    vault._sealer, vault._state_key, txn.get(STATE_KEY, STATE), path
                )
            store.attach_journal(
                vault._sealer.derive(b"memvault.journal"),
                applied=applied.journal_seq,
                session_boot=applied.journal_boot,
                accept_loss=accept_journal_loss,
            )
            # Loading allocates tens of thousands of long-lived objects; the
            # cyclic GC would rescan them all repeatedly for nothing.
            gc.disable()
            try:
                vault._load(trust_snapshot=not verify_every_record)
            finally:
                gc.enable()
            vault._watch_rollback(accept=accept_rollback)
            if not readonly:
                if vault.damage and not repair:
                    raise VaultDamaged(path, len(vault.damaged), vault.describe_damage())
                if store.replayed_tail:  # what a killed daemon left without a state
                    vault._writer.seal_replayed(store.replayed_unsealed)
                vault._writer.begin(journal=journal, previous=applied, damaged=bool(vault.damage))
            return vault
        except BaseException:
            store.close()
            raise

    def _load(self, *, trust_snapshot: bool = True) -> None:
        loader = Loader(
            self._store,
            self._sealer,
            self._state_key,
            self._tree,
            self.damage,
            trust_snapshot=trust_snapshot,
        )
        now = clock.now_ns()
        loaded = loader.load(
            self.header,
            self.slots,
            lambda norm: self._writer.new_record(self._writer.dir_meta(norm, now)),
        )
        self._writer.acc = loaded.acc
        self._writer.root = loaded.root
        self._writer.snapshot_stored = loaded.snapshot_stored
        self._writer.search_index_stored = loaded.search_index_stored
        self._writer.generation = loaded.generation
        self._writer.audit.head_seq, self._writer.audit.head_link = loaded.audit_head
        if loaded.compaction_owed:
            self._writer.compaction_owed = True  # an earlier session never compacted
            self._writer.pending_shreds = 1

    def _watch_rollback(self, *, accept: bool = False) -> None:
        """Refuse a vault older than this machine last saw, or another copy of it at
        the same generation (unless ``accept``), then record each generation made
        durable from now on (rollback.py)."""
        key = self._sealer.derive(rollback.KEY_INFO)
        vault_id, generation = self.header.vault_id, self._writer.generation
        digest = self._writer.state_digest()
        seen = rollback.last_seen(vault_id, key)
        self.first_seen_here = seen is None
        differs = rollback.differs(seen, generation, digest)
        if differs and not accept:
            raise rollback.refuse(self.path, seen, generation)
        if seen is None or differs:  # first seen here, or rolled back on purpose
            rollback.remember(vault_id, key, generation, digest)
        if differs:
            self.note(
                "accept-rollback",
                f"generation {generation}, this machine had seen {seen.generation}",
            )
        if not self._store.readonly:
            self._writer.on_flushed = lambda gen, dig: rollback.remember(vault_id, key, gen, dig)

    @property
    def generation(self) -> int:
        """Commits so far: the sealed state's count (rollback.py)."""
        return self._writer.generation

    # -- signed and backed-up copies (signing.py, cli/copies.py) ----------------------

    def signing_seed(self, *, create: bool = False) -> bytearray | None:
        """The vault's Ed25519 signing key (its seed), sealed in the vault; made and
        stored on first use if ``create``, else None until then."""
        with self._lock:
            seed = self.sealed_setting(SIGNING_KEY, Kind.SIGNING, "its signing key")
            if seed is None and create:
                seed = new_key()
                self.put_sealed_setting(SIGNING_KEY, Kind.SIGNING, seed)
            return seed

    def sealed_setting(self, name: bytes, kind: Kind, what: str) -> bytearray | None:
        """A value sealed under the master key in the vault's state (None if unset);
        VaultTampered, naming ``what``, if it fails authentication."""
        with self._lock, self._store.read() as txn:
            sealed = txn.get(name, db=STATE)
            if sealed is None:
                return None
            try:
                return self._sealer.open(kind, bytes(sealed), name)
            except DecryptionError:
                raise VaultTampered(self.path, f"{what} was altered") from None

    def put_sealed_setting(
        self, name: bytes, kind: Kind, value: bytes | bytearray, *, forgets: bool = False
    ) -> None:
        """Seal and store a state value (one commit; journaled on a mount).
        ``forgets``: the old value held what a shred removed, so its bytes are
        compacted away like a shredded record's."""
        with self._lock:
            self._check_writable()
            sealed = self._sealer.seal(kind, value, name)
            self._writer.write(
                lambda txn: txn.put(name, sealed, db=STATE),
                owes_compaction=forgets,
                bookkeeping=not forgets,
            )

    def backup(self, dest: Path | str) -> int:
        """Write a consistent, compacted copy of the vault as it is now to ``dest``
        (fsynced, mode 0600, renamed into place; never over an existing file);
        return its generation. On a mount, requests wait for the copy."""
        dest = Path(dest)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
        with self._lock:
            self._check_writable()
            try:
                self._writer.backup(tmp)
                os.chmod(tmp, 0o600)
                try:
                    os.link(tmp, dest)  # never over a file that appeared meanwhile
                except FileExistsError:
                    raise DestinationExists(dest) from None
            finally:
                tmp.unlink(missing_ok=True)
            fsync_dir(dest.parent)
            return self._writer.generation

    # -- the audit trail (audit.py) ------------------------------------------------------

    def note(self, op: str, detail: str = "") -> None:
        """A vault-level event for the audit trail (an export, a backup, a key change),
        for the current caller; stored with the next commit, at the latest with the
        next journal flush or the lock. A read-only vault records nothing."""
        if not self._store.readonly and not self._closed:
            with self._lock:
                if self._writer.audit.note(op, current_caller.get(), detail=detail):
                    self._writer.housekeeper.audit_noted()

    def note_read(self, record_id: bytes) -> None:
        """A memory was opened for reading (one event per caller, memory and minute)."""
        if self._store.readonly or self._closed:
            return
        with self._lock:
            entry = self._tree.by_id.get(record_id)
            caller = current_caller.get()
            if entry is not None and self._writer.audit.note(
                "read", caller, record_id, entry.meta.path, entry.data_key
            ):
                self._writer.housekeeper.audit_noted()

    def audit_trail(self) -> list[Shown]:
        """Every event the trail keeps, oldest first, those noted and not yet stored
        too; a shredded memory's path is None. Entries that fail authentication are
        left out (audit_problem names them)."""

        def data_key_of(record_id: bytes):
            entry = self._tree.by_id.get(record_id)
            return None if entry is None else entry.data_key

        shown: list[Shown] = []
        with self._lock:
            if self._writer.audit.pending and not self._store.readonly and not self._closed:
                self._writer.store_pending()  # the reads noted a moment ago: stored now
        with self._lock, self._store.read() as txn:
            audit = self._writer.audit
            for key, sealed in txn.items(AUDIT):
                seq = int.from_bytes(key, "big")
                try:
                    doc = audit.open_entry(seq, sealed)
                except (DecryptionError, ValueError):
                    continue
                shown.extend(audit.shown(seq, doc, data_key_of))
        return shown

    def audit_problem(self) -> tuple[str, int, Checkpoint]:
        """Walk the trail's chain: the first broken link ("" if none), how many
        entries it keeps, and the checkpoint it starts from."""
        with self._lock:
            try:
                checkpoint = self._writer.audit_checkpoint()
            except (DecryptionError, ValueError):
                return "its checkpoint fails authentication", 0, Checkpoint()
            with self._store.read() as txn:
                entries = [(int.from_bytes(k, "big"), bytes(v)) for k, v in txn.items(AUDIT)]
            problem = self._writer.audit.verify(iter(entries), (checkpoint.seq, checkpoint.link))
            return problem, len(entries), checkpoint

    def prune_audit(self, keep_days: int) -> int:
        """Drop entries older than ``keep_days`` now, and keep that retention."""
        with self._lock:
            self._check_writable()
            return self._writer.prune_audit(keep_days)

    # -- keyslots (the policy is keyslots.py) -----------------------------------------

    def is_master(self, key: bytes | bytearray) -> bool:
        """Whether ``key`` is this vault's master key (constant time)."""
        return self._sealer.is_master(key)

    def new_slot(
        self,
        index: int,
        secret: bytearray,
        kdf: KdfParams,
        *,
        kind: str = "passphrase",
        keyfile: bytes | None = None,
    ) -> Keyslot:
        """The master key wrapped under ``secret`` (and a keyfile's hash), not stored yet."""
        kdf.validate()
        return self._sealer.keyslot(index, secret, kdf, kind, keyfile)

    def replace_slots(self, added: list[Keyslot], removed: list[int]) -> None:
        """Store ``added`` (replacing slots of the same index) and delete ``removed``,
        with the header's authentication re-sealed, in one transaction; then
        compact, so that no byte of a replaced or removed slot stays in the file."""
        with self._lock:
            self._check_writable()
            gone = set(removed) | {s.index for s in added}
            slots = sorted(
                [s for s in self.slots if s.index not in gone] + added, key=lambda s: s.index
            )
            auth = self._sealer.seal(Kind.HEADER, header_binding(self.header, slots))

            def txn_fn(txn) -> None:
                for index in removed:
                    txn.delete(bytes([index]), db=SLOTS)
                for slot in added:
                    txn.put(bytes([slot.index]), slot.encode(), db=SLOTS)
                txn.put(HEADER_AUTH_KEY, auth, db=META)

            self._writer.write(txn_fn, owes_compaction=True)
            self.slots = slots
        self.compact()

    # -- damage ------------------------------------------------------------------

    @property
    def damaged(self) -> dict[bytes, str]:
        """Records that cannot be read, by stored id: what is wrong with each."""
        return self.damage.records

    @property
    def unexplained(self) -> bool:
        return self.damage.unexplained

    def describe_damage(self, limit: int = 5) -> str:
        return self.damage.describe(limit)

    def repair(self, *, accept_unverified: bool = False) -> list[str]:
        """Re-file what was stored under a damaged id, drop what is damaged, and compact.

        Returns one line per action. Everything happens in one rewrite of the
        file (an atomic rename): a repair killed half-way changes nothing.
        Afterwards the vault is whole again, its accumulator re-sealed over
        the records that verify. When what could be read does not add up to
        the old accumulator, damage cannot be told from removed or rolled-back
        records, and only ``accept_unverified`` goes on.
        """
        damage, sealer = self.damage, self._sealer
        with self._lock:
            self._check_writable()
            if damage.unexplained and not accept_unverified:
                raise VaultTampered(
                    self.path,
                    "what can be read does not add up to its integrity sum, so damage cannot "
                    "be told from removed or rolled-back records; `memvault repair "
                    "--accept-unverified` accepts the vault as it now reads",
                )
            refiled = [
                (stored_id, sealer.decode_entry(true_id, wrapped, value), value)
                for stored_id, (true_id, wrapped, value) in damage.misfiled.items()
            ]
            refiled_ids = {entry.record_id for _, entry, _ in refiled}
            dropped = [
                rid
                for rid in damage.records
                if rid not in damage.misfiled
                and rid not in refiled_ids
                and rid not in (ROOT_ID, STRUCTURE_ID)
            ]
            # Damaged entries are left out of the rewritten file rather than
            # deleted: a damaged key may be one LMDB cannot even look up.
            leave_out = {(db, rid) for rid in dropped for db in (RECORDS, KEYS, DERIVED)}
            leave_out |= {(RECORDS, sid) for sid, _, _ in refiled if sid not in refiled_ids}
            leave_out |= {(STATE, SNAPSHOT_KEY), (STATE, SEARCH_INDEX_KEY)}
            live_chunks = {
                key
                for entry in [*self._tree.by_id.values(), *(e for _, e, _ in refiled)]
                for key in self._bodies.chunk_keys_of(entry)
            }
            with self._store.read() as txn:  # chunks of dropped records: left out too
                leave_out |= {
                    (CHUNKS, bytes(key))
                    for key, _ in txn.items(CHUNKS)
                    if bytes(key) not in live_chunks
                }
            extra = {(RECORDS, entry.record_id): value for _, entry, value in refiled}
            for w in damage.recreated:
                body = sealer.seal_body(w.entry, b"")  # recreated directories: empty
                extra[(RECORDS, w.entry.record_id)] = sealer.pack_record(w.entry, body)
                extra[(KEYS, w.entry.record_id)] = w.wrapped_key
            if ROOT_ID in damage.records:
                extra[(STATE, ROOT_KEY)] = sealer.seal(
                    Kind.META, self.root_meta().encode(), ROOT_ID, pad=True
                )
            trail_note = self._reanchor_audit(leave_out, extra)
            acc = Accumulator(self._state_key)
            for entry in [*self._tree.by_id.values(), *(e for _, e, _ in refiled)]:
                acc.add(entry.record_id, entry.meta.gen)
            extra[(STATE, STATE_KEY)] = self._writer.sealed_state(acc)
            self._writer.rebuild(leave_out, extra)
            self._writer.acc = acc
            self._writer.snapshot_stored = self._writer.search_index_stored = False
            done = []
            for _, entry, _ in refiled:
                self._tree.add(entry)
                done.append(f"recovered {entry.meta.path}")
            done += [f"dropped {damage.name(rid)} ({damage.records[rid]})" for rid in dropped]
            done += [f"recreated the directory {w.entry.meta.path}" for w in damage.recreated]
            if STRUCTURE_ID in damage.records:
                done.append("rebuilt the file's storage structure from what could be read")
            if ROOT_ID in damage.records:
                done.append("reset the root directory's attributes")
            if damage.unexplained:
                done.append("accepted the vault as it now reads (its integrity sum did not match)")
            done += trail_note
            damage.clear()
            self._store.close_journal()  # a salvaged journal is in the rebuilt file now
            return done

    def _reanchor_audit(self, leave_out: set, extra: dict) -> list[str]:
        """(repair) A trail with a broken link: the entries up to it are left out
        and a checkpoint lets the intact rest verify (audit.reanchor)."""
        problem, _, _ = self.audit_problem()
        if not problem:
            return []
        with self._store.read() as txn:
            stored = [(bytes(k), bytes(v)) for k, v in txn.items(AUDIT)]
        entries = [(int.from_bytes(k, "big"), v) for k, v in stored]
        dropped, seq, link = audit.reanchor(self._writer.audit, entries)
        try:
            old = self._writer.audit_checkpoint()
        except (DecryptionError, ValueError):
            old = Checkpoint()
        checkpoint = Checkpoint(seq, link, old.pruned + dropped, old.keep_days)
        leave_out |= {(AUDIT, key) for key, _ in stored[:dropped]}
        extra[(STATE, AUDIT_CHECKPOINT_KEY)] = self._sealer.seal(
            Kind.AUDIT, checkpoint.encode(), AUDIT_CHECKPOINT_KEY
        )
        return [
            f"dropped the audit trail's {dropped} oldest entries, up to its last broken link "
            f"({problem}); it verifies from entry {seq + 1} on"
        ]

    # -- change notifications (the search index keeps up through them) ----------

    def add_listener(self, listener: Callable[[str, bytes, str, bytes | None], None]) -> None:
        """Call ``listener(kind, record_id, path, data)`` after each change.

        kind is "put" (a file's new content), "delete" (a record shredded) or
        "move" (a file renamed to ``path``, content unchanged: whether it is
        indexed may change with its name, e.g. a temporary renamed to `x.md`).
        Listeners run after the vault's lock is released, in the writer's thread.
        """
        self._listeners.append(listener)

    def _notify(self, events: Iterable[Event]) -> None:
        for event in events:
            for listener in self._listeners:
                listener(*event)

    # -- queries by record id (the filesystem) -------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return self._tree.files()

    @property
    def readonly(self) -> bool:
        return self._store.readonly

    @property
    def record_count(self) -> int:
        """Files, directories and symlinks (O(1), unlike len(), which counts files)."""
        return len(self._tree)

    def root_meta(self) -> Meta:
        """The root directory's attributes (it has no record; see set_attrs)."""
        return self._writer.root_meta()

    def by_record_id(self, record_id: bytes | None) -> Meta | None:
        """The current metadata of a record (None: the root), or None once it is gone."""
        if record_id is None:
            return self.root_meta()
        with self._lock:
            entry = self._tree.by_id.get(record_id)
            return entry.meta if entry is not None else None

    def directories_above(self, record_id: bytes | None) -> list[Meta]:
        """The metadata of the directories a path walk to a record passes through,
        the root first (none for the root, or a file unlinked while open)."""
        if record_id is None:
            return []
        root = self.root_meta()
        with self._lock:
            entry = self._tree.by_id.get(record_id)
            if entry is None or entry.meta.orphan:
                return []
            by_path = self._tree.by_path
            return [root, *(by_path[p].meta for p in paths.ancestors(entry.meta.path))]

    def lookup(self, parent: bytes | None, name: str) -> tuple[bytes, Meta]:
        """(record id, metadata) of ``name`` in the directory ``parent`` (None: the root)."""
        with self._lock:
            entry = self._tree.children(self._dir_path(parent)).get(name)
            if entry is None:
                raise MemoryNotFound(name)
            return entry.record_id, entry.meta

    def listdir(self, directory: bytes | None) -> list[tuple[str, bytes, Meta]]:
        """(name, record id, metadata) of each entry of a directory, sorted by name."""
        with self._lock:
            children = self._tree.children(self._dir_path(directory))
            return sorted((name, e.record_id, e.meta) for name, e in children.items())

    def get_record(self, record_id: bytes) -> bytes:
        """The content of a file record wherever it lives now (MemoryNotFound once gone)."""
        with self._lock:
            return self._read_body(self._tree.of(record_id))

    @property
    def chunk_size(self) -> int:
        """The size of a large file's chunks in this vault (its format's)."""
        return self._bodies.chunk_size

    def read_chunk(self, record_id: bytes, index: int) -> bytearray:
        """Chunk ``index`` (chunk_size bytes from index * chunk_size) of a file's
        content, in a new buffer the caller may keep or change."""
        with self._lock:
            entry = self._tree.of(record_id)
            if entry.meta.type != FILE:
                raise IsADirectory(entry.meta.path)
            return self._read_chunk(entry, index)

    def read_span(self, record_id: bytes, first: int, count: int) -> bytearray:
        """Chunks ``first`` to ``first + count - 1`` of a file's content in one new
        buffer, as long as the file says (a large read: see Bodies.read_span)."""
        with self._lock:
            entry = self._tree.of(record_id)
            if entry.meta.type != FILE:
                raise IsADirectory(entry.meta.path)
            if not entry.meta.chunked or record_id in self._writer.staged:
                start = first * self.chunk_size
                return self._read_chunk(entry, 0)[start : start + count * self.chunk_size]
            with self._store.read() as txn, self._corruption(entry):
                return self._bodies.read_span(txn, entry, first, count)

    def readlink_record(self, record_id: bytes) -> str:
        with self._lock:
            entry = self._tree.of(record_id)
            if entry.meta.type != SYMLINK:
                raise InvalidMove(entry.meta.path, entry.meta.path, "not a symbolic link")
            return entry.meta.target

    def _dir_path(self, directory: bytes | None) -> str:
        if directory is None:
            return paths.ROOT
        entry = self._tree.of(directory)
        if not entry.meta.is_dir:
            raise NotADirectory(entry.meta.path)
        return entry.meta.path

    def _read_body(self, entry: Entry) -> bytes:
        if entry.meta.is_dir:
            raise IsADirectory(entry.meta.path)
        if entry.record_id in self._writer.staged:  # new, empty, not stored yet
            return b""
        with self._store.read() as txn, self._corruption(entry):
            return bytes(self._bodies.read_all(txn, entry))

    @contextmanager
    def _corruption(self, entry: Entry) -> Iterator[None]:
        """A body that fails to open is MemoryCorrupted, naming the memory."""
        try:
            yield
        except (DecryptionError, RecordFormatError, ChunkMissing):
            raise MemoryCorrupted(entry.meta.path) from None

    def _stored_record(self, txn, record_id: bytes):
        """A record's stored value; found by a scan if a damaged key broke the B-tree's order.

        LMDB finds keys by binary search: one damaged key can hide its
        neighbours from lookups while a cursor still walks past them.
        """
        value = txn.get(record_id, db=RECORDS)
        if value is None and self.damage:
            for key, found in txn.items(RECORDS):
                if bytes(key) == record_id:
                    return found
        return value

    # -- queries by path (the CLI, ingest) ---------------------------------------

    def exists(self, path: str) -> bool:
        with self._lock:
            norm = paths.normalize(path, allow_root=True)
            return norm == paths.ROOT or norm in self._tree.by_path

    def stat(self, path: str) -> Meta:
        with self._lock:
            norm = paths.normalize(path, allow_root=True)
            if norm == paths.ROOT:
                return self.root_meta()
            return self._tree.at(norm).meta

    def list(self, directory: str = paths.ROOT) -> list[tuple[str, Meta]]:
        """The entries of a directory, sorted by name."""
        with self._lock:
            norm = paths.normalize(directory, allow_root=True)
            self._tree.require_dir(norm)
            return sorted((name, e.meta) for name, e in self._tree.children(norm).items())

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the vault's lock across several calls: no other change (a write
        through the mount) comes in between."""
        with self._lock:
            yield

    def walk_records(self) -> list[tuple[bytes, Meta]]:
        """Every named record, with its id, sorted by path."""
        with self._lock:
            entries = sorted(self._tree.named(), key=lambda e: e.meta.path)
            return [(e.record_id, e.meta) for e in entries]

    def walk(self) -> list[Meta]:
        """Every record's metadata, sorted by path."""
        with self._lock:
            return sorted((e.meta for e in self._tree.named()), key=lambda m: m.path)

    def records_under(self, directory: str) -> set[bytes]:
        """The record ids of the files below ``directory`` (empty if there is none)."""
        with self._lock:
            norm = paths.normalize(directory, allow_root=True)
            return {e.record_id for e in self._tree.subtree(norm) if e.meta.type == FILE}

    def get(self, path: str) -> bytes:
        with self._lock:
            return self._read_body(self._tree.at(paths.normalize(path)))

    def readlink(self, path: str) -> str:
        with self._lock:
            return self.readlink_record(self._tree.at(paths.normalize(path)).record_id)

    def record_id(self, path: str) -> bytes:
        """The stable identity of the entry at ``path`` (kept across renames)."""
        with self._lock:
            return self._tree.at(paths.normalize(path)).record_id

    # -- changes by record id (the filesystem) -----------------------------------

    def put_record(self, record_id: bytes, data: bytes | bytearray) -> Meta:
        """Store ``data`` as the content of a file record, wherever it lives now.

        The filesystem commits through this: a path read before the vault's
        lock may name another record by then (rm, mv), a record id cannot.
        Raises MemoryNotFound once the record is gone (shredded).
        """
        with self._lock:
            self._check_writable()
            entry = self._tree.of(record_id)
            norm = entry.meta.path
            if entry.meta.type != FILE:
                raise IsADirectory(norm)
            if len(data) > MAX_MEMORY_SIZE:
                raise TooLarge(norm, len(data), MAX_MEMORY_SIZE)
            now = clock.now_ns()
            write = self._writer.file_write(norm, entry, data, now, now, None)
            self._writer.commit([write])
        self._notify([("put", record_id, norm, data)])
        return write.entry.meta

    def write_chunks(
        self, record_id: bytes, chunks: Mapping[int, bytes | bytearray], size: int
    ) -> Meta:
        """Replace whole chunks of a file and set its size, in one commit.

        ``chunks`` maps a chunk index to its new content (up to chunk_size
        bytes; the last chunk up to the size). Chunks not given keep their
        content; past the size they are dropped; when the size shrinks into
        a chunk, that chunk must be given, cut. The filesystem writes through
        this: a write() is committed (journaled) before it returns.
        """
        with self._lock:
            meta = self._write_chunks(self._tree.of(record_id), chunks, size)
        self._notify([("put", record_id, meta.path, None)])
        return meta

    def resize_record(self, record_id: bytes, size: int) -> Meta:
        """truncate(2): cut a file, or extend it with zeros (a hole, stored nowhere).

        Only the chunk the new end falls in is read: cutting a 1 GiB file to
        nothing decrypts nothing."""
        with self._lock:
            entry = self._tree.of(record_id)
            self._check_writable()
            chunks = {}
            step = self.chunk_size
            if entry.meta.chunked and size <= step:  # back inline: its one chunk
                chunks[0] = self._read_chunk(entry, 0)[:size] if size else b""
            elif size < entry.meta.size and size % step:  # the new last chunk, cut
                last = size // step
                chunks[last] = self._read_chunk(entry, last)[: size % step]
            meta = self._write_chunks(entry, chunks, size)
        self._notify([("put", record_id, meta.path, None)])
        return meta

    def _write_chunks(self, entry: Entry, chunks: Mapping, size: int) -> Meta:
        self._check_writable()
        if entry.meta.type != FILE:
            raise IsADirectory(entry.meta.path)
        if size > MAX_MEMORY_SIZE:
            raise TooLarge(entry.meta.path, size, MAX_MEMORY_SIZE)
        content = chunks.get(0)
        if len(chunks) == 1 and content is not None and len(content) == size:
            meta = self._writer.put_small(entry, content)
            if meta is not None:
                return meta
        with self._corruption(entry):
            write = self._writer.chunk_write(entry, chunks, size)
        self._writer.commit([write])
        return write.entry.meta

    def _read_chunk(self, entry: Entry, index: int) -> bytearray:
        if entry.record_id in self._writer.staged:
            return bytearray()
        with self._store.read() as txn, self._corruption(entry):
            return self._bodies.read_chunk(txn, entry, index)

    def create_in(
        self,
        parent: bytes | None,
        name: str,
        kind: int,
        *,
        mode: int,
        uid: int | None = None,
        gid: int | None = None,
        target: str = "",
        opened: bool = False,
    ) -> tuple[bytes, Meta]:
        """Create an empty file, a directory or a symlink in ``parent``, owned by uid:gid.

        ``opened``: the caller holds the new file open and will write or close
        it; it is stored then, with its first write (see Writer.stage), unless
        the disk is nearly full (then at once: a full disk fails the create)."""
        with self._lock:
            self._check_writable()
            norm = paths.join(self._dir_path(parent), paths.check_name(name))
            if norm in self._tree.by_path:
                raise AlreadyExists(norm)
            now = clock.now_ns()
            meta = Meta(
                norm,
                kind,
                mode,
                len(target.encode()),
                now,
                now,
                1,
                1,
                os.getuid() if uid is None else uid,
                os.getgid() if gid is None else gid,
                target=target,
            )
            if opened and kind == FILE and self._store.has_room():
                # Nothing stored yet (Writer.stage): what the reply needs is the id.
                fresh, caller = self._writer.fresh_record(), current_caller.get()
                record_id = fresh[0]
                self._lock.later.append(lambda: self._writer.stage(fresh, meta, caller))
            else:
                write = self._writer.new_record(meta)
                self._writer.commit([write])
                record_id = write.entry.record_id
        if kind == FILE:
            self._notify([("put", record_id, norm, b"")])
        return record_id, meta

    def link_count(self, record_id: bytes | None) -> int:
        """st_nlink of a record (None: the root): 2 plus its subdirectories for a
        directory, 1 for a file, 0 for one unlinked while open."""
        with self._lock:
            return self._tree.link_count(None if record_id is None else self._tree.of(record_id))

    def orphan_record(self, record_id: bytes) -> None:
        """Unlink a file that is still open: its name goes now (and its search
        entry), its content stays reachable by id until remove_record at the
        last close. An orphan a killed daemon left is shredded at the next unlock."""
        with self._lock:
            self._check_writable()
            entry = self._tree.of(record_id)
            if entry.meta.is_dir:
                raise IsADirectory(entry.meta.path)
            events = self._writer.orphan(entry)
        self._notify(events)

    def unlink_in(
        self, parent: bytes | None, name: str, *, is_open: Callable[[bytes], bool]
    ) -> None:
        """unlink(2) by directory id: the file is shredded, or only its name goes
        while ``is_open`` says it is open (see orphan_record)."""
        with self._lock:
            self._check_writable()
            entry = self._tree.children(self._dir_path(parent)).get(name)
            if entry is None:
                raise MemoryNotFound(name)
            if entry.meta.is_dir:
                raise IsADirectory(entry.meta.path)
            if is_open(entry.record_id):
                events = self._writer.orphan(entry)
            else:
                events = self._writer.delete(entry, recursive=False)
        self._notify(events)

    def remove_record(self, record_id: bytes, *, directory: bool) -> None:
        """Shred one entry (unlink, or rmdir with ``directory``): the type must match."""
        with self._lock:
            self._check_writable()
            entry = self._tree.of(record_id)
            if directory and not entry.meta.is_dir:
                raise NotADirectory(entry.meta.path)
            if not directory and entry.meta.is_dir:
                raise IsADirectory(entry.meta.path)
            events = self._writer.delete(entry, recursive=False)
        self._notify(events)

    def move(
        self,
        parent: bytes | None,
        name: str,
        new_parent: bytes | None,
        new_name: str,
        *,
        replace_existing: bool = True,
        exchange: bool = False,
        is_open: Callable[[bytes], bool] = lambda record_id: False,
    ) -> None:
        """rename(2) by directory ids: replace a target (shredded, or orphaned when
        ``is_open`` says it is open), refuse one, or swap them."""
        with self._lock:
            self._check_writable()
            src = paths.join(self._dir_path(parent), paths.check_name(name))
            dst = paths.join(self._dir_path(new_parent), paths.check_name(new_name))
            if exchange:
                events = self._writer.exchange(src, dst)
            else:
                events = self._writer.rename(src, dst, replace_existing, is_open)
        self._notify(events)

    def set_record_attrs(self, record_id: bytes | None, **changes) -> Meta:
        """Change metadata only (mode, mtime_ns, uid, gid, xattrs) of a record or the root."""
        with self._lock:
            self._check_writable()
            if record_id is None:
                return self._update(None, changes)
            return self._update(self._tree.of(record_id), changes)

    # -- changes by path (the CLI, ingest) -----------------------------------------

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
            now = clock.now_ns()
            mtime = now if mtime_ns is None else mtime_ns
            new_dirs: dict[str, Write] = {}
            writes: list[Write] = []
            metas = []
            events = []
            for norm, data in batch.items():
                writes += self._writer.parent_dirs(norm, now, new_dirs)
                existing = self._tree.by_path.get(norm)
                if norm in new_dirs or (existing is not None and existing.meta.is_dir):
                    raise IsADirectory(norm)
                write = self._writer.file_write(norm, existing, data, now, mtime, mode)
                writes.append(write)
                metas.append(write.entry.meta)
                events.append(("put", write.entry.record_id, norm, data))
            self._writer.commit(writes)
        self._notify(events)
        return metas

    def mkdir(self, path: str, *, mode: int | None = None, parents: bool = False) -> Meta:
        with self._lock:
            self._check_writable()
            norm = paths.normalize(path)
            existing = self._tree.by_path.get(norm)
            if existing is not None:
                if parents and existing.meta.is_dir:
                    return existing.meta
                raise AlreadyExists(norm)
            now = clock.now_ns()
            if parents:
                writes = self._writer.parent_dirs(norm, now)
            else:
                self._tree.require_dir(paths.parent(norm))
                writes = []
            meta = self._writer.dir_meta(norm, now, mode)
            writes.append(self._writer.new_record(meta))
            self._writer.commit(writes)
            return meta

    def symlink(self, path: str, target: str) -> Meta:
        with self._lock:
            norm = paths.normalize(path)
            parent = paths.parent(norm)
            parent_id = None if parent == paths.ROOT else self._tree.at(parent).record_id
            return self.create_in(
                parent_id, paths.basename(norm), SYMLINK, mode=0o777, target=target
            )[1]

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
        changes = {"mode": mode, "mtime_ns": mtime_ns, "uid": uid, "gid": gid, "xattrs": xattrs}
        with self._lock:
            self._check_writable()
            norm = paths.normalize(path, allow_root=True)
            entry = None if norm == paths.ROOT else self._tree.at(norm)
            return self._update(entry, {k: v for k, v in changes.items() if v is not None})

    def rename(self, old: str, new: str, *, replace_existing: bool = True) -> None:
        """Move a file or directory tree; an existing target file is replaced (and shredded)."""
        with self._lock:
            self._check_writable()
            events = self._writer.rename(
                paths.normalize(old), paths.normalize(new), replace_existing
            )
        self._notify(events)

    def exchange(self, a: str, b: str) -> None:
        """Swap two entries atomically (rename with RENAME_EXCHANGE)."""
        with self._lock:
            self._check_writable()
            events = self._writer.exchange(paths.normalize(a), paths.normalize(b))
        self._notify(events)

    def delete(self, path: str, *, recursive: bool = False) -> int:
        """Crypto-shred a file, symlink or directory; return how many records went."""
        with self._lock:
            self._check_writable()
            events = self._writer.delete(self._tree.at(paths.normalize(path)), recursive=recursive)
        self._notify(events)
        return len(events)

    # -- derived data (a record's chunk vectors), sealed under its data key ----

    def put_derived(self, record_id: bytes, body_gen: int, blob: bytes) -> bool:
        """Store data derived from a record's current body; False if it changed meanwhile.

        Sealed with the record's own key and bound to its body generation, so
        it is shredded with the record and never outlives the content it
        describes.
        """
        return bool(self.put_derived_many([(record_id, body_gen, blob)]))

    def put_derived_many(self, items: Iterable[tuple[bytes, int, bytes]]) -> int:
        """``put_derived`` for several records in one write; how many were stored."""
        with self._lock:
            self._check_writable()
            sealed = []
            for record_id, body_gen, blob in items:
                entry = self._tree.by_id.get(record_id)
                if entry is not None and entry.meta.body_gen == body_gen:
                    sealed.append((record_id, self._sealer.seal_derived(entry, blob)))

            def txn_fn(txn) -> None:
                for record_id, value in sealed:
                    txn.put(record_id, value, db=DERIVED)

            if sealed:
                self._writer.write(txn_fn, bookkeeping=True)
            return len(sealed)

    def get_derived(self, record_id: bytes) -> bytes | None:
        """The derived data stored for a record's current body, or None."""
        return self.get_derived_many([record_id])[0]

    def get_derived_many(self, record_ids: Sequence[bytes]) -> list[bytes | None]:
        """get_derived of each record, read in one transaction (an unlock reads
        20,000 of them)."""
        found: list[bytes | None] = []
        with self._lock, self._store.read() as txn:
            for record_id in record_ids:
                entry = self._tree.by_id.get(record_id)
                stored = txn.get(record_id, db=DERIVED) if entry is not None else None
                if stored is None:
                    found.append(None)
                    continue
                try:  # bound to the current body generation: anything older fails
                    found.append(self._sealer.open_derived(entry, bytes(stored)))
                except (DecryptionError, ValueError):
                    log.warning("derived data of a record failed authentication; recomputing")
                    found.append(None)
        return found

    def check_derived(self) -> list[str]:
        """What fails authentication among the data derived from the records (their
        vectors, the stored search index, the model pin), a sentence each. Each is
        recomputed where it fails, so only `memvault check` asks."""
        problems = []
        with self._lock, self._store.read() as txn:
            for key, stored in txn.items(DERIVED):
                entry = self._tree.by_id.get(bytes(key))
                try:
                    if entry is None:
                        raise DecryptionError("no such record")
                    self._sealer.open_derived(entry, bytes(stored))
                except (DecryptionError, ValueError):
                    name = entry.meta.path if entry else "record " + bytes(key).hex()[:12]
                    problems.append(f"{name}: its stored vectors fail authentication")
        for key, what in (
            (SEARCH_INDEX_KEY, "the stored search index"),
            (MODEL_KEY, "the model pin"),
        ):
            try:
                self._index_value(key)
            except DecryptionError:
                problems.append(f"{what} fails authentication")
        return problems

    def drop_derived(self) -> None:
        """Forget every record's derived data (`memvault reindex`)."""
        with self._lock:
            self._check_writable()
            with self._store.read() as txn:
                keys = [bytes(k) for k, _ in txn.items(DERIVED)]

            stored_index = self._writer.search_index_stored

            def txn_fn(txn) -> None:
                for key in keys:
                    txn.delete(key, db=DERIVED)
                if stored_index:
                    txn.delete(SEARCH_INDEX_KEY, db=STATE)

            if keys or stored_index:
                self._writer.write(txn_fn, owes_compaction=True)  # old vectors leave the file
                self._writer.search_index_stored = False

    # -- the search index, stored at lock ----------------------------------------

    @property
    def search_index_stored(self) -> bool:
        """A search index is stored, and no memory changed since (it is deleted
        in the same transaction as the first change)."""
        return self._writer.search_index_stored

    def put_search_index(self, data: bytes) -> None:
        """Store the search index of the vault as it is now, sealed (Kind.INDEX)."""
        with self._lock:
            self._check_writable()
            sealed = self._sealer.seal(Kind.INDEX, padding.frame(data), SEARCH_INDEX_KEY, pad=True)
            self._writer.write(
                lambda txn: txn.put(SEARCH_INDEX_KEY, sealed, db=STATE), bookkeeping=True
            )
            self._writer.search_index_stored = True

    def search_index(self) -> bytes | None:
        """The stored search index, or None (none stored, or damaged: rebuilt then)."""
        try:
            framed = self._index_value(SEARCH_INDEX_KEY)
            return None if framed is None else padding.unframe(framed)
        except DecryptionError:
            log.warning("the stored search index failed authentication; rebuilding it")
        except ValueError:  # stored unpadded by an earlier version
            log.info("the stored search index is of an earlier format; rebuilding it")
        return None

    def _index_value(self, key: bytes) -> bytes | None:
        """A sealed search-index value of STATE, opened (None: not stored);
        DecryptionError if it fails authentication."""
        with self._lock, self._store.read() as txn:
            sealed = txn.get(key, db=STATE)
            return None if sealed is None else bytes(self._sealer.open(Kind.INDEX, sealed, key))

    # -- the embedding model the vault's vectors belong to ----------------------

    def pinned_model(self) -> str | None:
        """SHA-256 of the embedding model this vault's vectors are made with."""
        try:
            pinned = self._index_value(MODEL_KEY)
        except DecryptionError:
            raise VaultTampered(self.path, "its embedding-model pin was changed") from None
        return None if pinned is None else pinned.decode()

    def pin_model(self, sha256: str) -> None:
        with self._lock:
            self._check_writable()
            sealed = self._sealer.seal(Kind.INDEX, sha256.encode(), MODEL_KEY)
            self._writer.write(lambda txn: txn.put(MODEL_KEY, sealed, db=STATE))

    # -- the changes themselves (under the lock) -----------------------------------

    def _update(self, entry: Entry | None, changes: dict) -> Meta:
        """Metadata-only changes of an entry, or of the root (None)."""
        changes = {"ctime_ns": clock.now_ns(), **changes}
        if entry is None:
            meta = self.root_meta().evolve(**changes)
            sealed = self._writer.seal_root(meta)
            self._writer.write(lambda txn: txn.put(ROOT_KEY, sealed, db=STATE))
            self._writer.root = meta
            return meta
        meta = entry.meta.evolve(**changes)
        self._writer.commit(
            [Write(Entry(entry.record_id, meta, entry.data_key), entry.meta.gen, None)]
        )
        return meta

    def _check_writable(self) -> None:
        if self._closed or self._store.readonly:
            raise ReadOnlyVault(self.path)

    # -- compaction and closing ------------------------------------------------------

    def catch_up(self) -> None:
        """Finish the bookkeeping the last changes left for later (later.py): the
        mount calls this once it has replied."""
        self._lock.catch_up()

    def store_new_files(self) -> None:
        """Store the files created and not written since (the filesystem calls this
        at each RELEASE, which the kernel sends soon after a close, not before
        close() returns)."""
        if self._writer.staged or self._lock.later:  # the common case: neither, no lock
            with self._lock:
                if not self._closed and not self._store.readonly:
                    self._writer.store_staged()

    def sync(self) -> None:
        """Make every change so far durable on disk (fsync of a directory, or of the
        vault): directory times and new files too."""
        if not self._store.readonly:
            self._writer.store_pending()
            self._store.make_durable()

    def sync_files(self) -> None:
        """fsync() of a file: every write is in the journal already, so store the new
        files still staged and flush the journal once. Directory times are not
        part of a file's fsync (POSIX: that is the directory's); they reach the
        journal with the next flush or an fsync of a directory."""
        if not self._store.readonly:
            self.store_new_files()
            self._store.make_durable()

    def prepare_records(self, count: int = 256) -> None:
        """(The mount, at a lull.) Make ``count`` more new records' ids and keys
        ahead, for the next burst of creates (Sealer.prepare_records)."""
        with self._lock:
            if not self._closed and not self._store.readonly:
                self._sealer.prepare_records(count)

    def compact(self) -> tuple[int, int]:
        """Rewrite the vault file without free pages; return its size before and after.

        Shredded bytes are gone after this. On a mount, requests go on meanwhile.
        """
        with self._lock:
            self._check_writable()
        return self._writer.compact()

    def close(self) -> None:
        """Finish pending shreds (compaction), then wipe every key from memory."""
        self._writer.housekeeper.stop()
        with self._lock:
            if self._closed:
                return
            self._writer.closed = True
            try:
                if not self._store.readonly and not self.damage:
                    self._writer.finish()  # a damaged vault is only opened to be repaired
            finally:
                self._closed = True
                self._store.close()
                self._tree.clear()
                self._sealer.wipe()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
