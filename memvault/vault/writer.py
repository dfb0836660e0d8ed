"""Everything that changes the vault file: commits, a writing session, compaction.

A commit turns writes and shreds into one store transaction that carries
the sealed state (integrity sum, journal position, whether a journal is on;
on a mount, a later entry seals it for a burst of commits), then updates
the path tree. A session begins by saying in the sealed state
whether a journal is on and ends by snapshotting the index, closing the
journal and compacting if anything changed. Callers hold the vault's lock,
except for the background compaction (see compact()).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..activity import Activity
from ..crypto import DecryptionError, Kind, wipe
from ..errors import (
    AlreadyExists,
    CompactionPending,
    DirectoryNotEmpty,
    DiskFull,
    InvalidMove,
    IsADirectory,
    NotADirectory,
)
from . import clock, records
from .accumulator import Accumulator
from .audit import MAX_ENTRIES, AuditLog, Caller, Checkpoint, Pending, current_caller, seq_key
from .bodies import Bodies
from .housekeeping import Housekeeper
from .journal import DELETE, NO_BOOT, PUT, Op, current_boot_id
from .later import LaterLock
from .loading import seal_snapshot
from .records import DIRECTORY, FILE, Meta
from .schema import (
    AUDIT,
    AUDIT_CHECKPOINT_KEY,
    CHUNKS,
    COMPACTION_OWED_KEY,
    DERIVED,
    KEYS,
    RECORDS,
    ROOT_ID,
    ROOT_KEY,
    SEARCH_INDEX_KEY,
    SNAPSHOT_KEY,
    STATE,
    STATE_KEY,
)
from .sealing import FreshRecord, Sealer
from .state import VaultState
from .store import Store
from .tree import Entry, PathTree
from .txn import DB_INDEX

_STATE_DB, _RECORDS_DB = DB_INDEX[STATE], DB_INDEX[RECORDS]
_KEYS_DB, _DERIVED_DB = DB_INDEX[KEYS], DB_INDEX[DERIVED]
_SHREDDED = (DERIVED, RECORDS, KEYS)
"""What a shred deletes under the record's id (its chunks aside), in this order."""
_SHREDDED_DBS = tuple(DB_INDEX[db] for db in _SHREDDED)

Event = tuple[str, bytes, str, bytes | None]
"""A change for the vault's listeners: (kind, record id, path, data)."""

log = logging.getLogger("memvault")


@dataclass
class Write:
    """One record to store: new, a new version, or new metadata over the stored body."""

    entry: Entry
    old_gen: int | None  # None for a record that does not exist yet
    sealed_body: bytes | None  # None keeps the stored body
    wrapped_key: bytes | None = None  # set for new records
    chunk_puts: dict[bytes, bytes] = field(default_factory=dict)  # a chunked file's new chunks
    chunk_deletes: list[bytes] = field(default_factory=list)  # and those it no longer has
    caller: Caller = field(default_factory=current_caller.get)  # who asked for it (audit.py)
    audited: bool = True  # False for what memvault does on its own (directory times)


class Writer:
    def __init__(
        self,
        store: Store,
        sealer: Sealer,
        bodies: Bodies,
        tree: PathTree,
        state_key: bytearray,
        lock: LaterLock,
        compact_delay: float | None,
        activity: Activity,
    ) -> None:
        self.store = store
        self.sealer = sealer
        self.bodies = bodies
        self.tree = tree
        self.lock = lock  # the vault's
        self.acc = Accumulator(state_key)
        self.audit = AuditLog(sealer)
        self.journal_boot = NO_BOOT  # written into every state while a journal is on
        self.generation = 0  # of the state last written: one more with every write
        self.on_flushed: Callable[[int, bytes], None] = lambda generation, digest: None
        """Told a generation (and its state_digest) is durable now (rollback.py)."""
        self.snapshot_stored = False
        self.search_index_stored = False
        self.pending_shreds = 0
        self.compaction_owed = False
        """Shredded or replaced bytes are still in the file (a compaction will remove them)."""
        self._owing = 0  # writes that made a compaction owed (a concurrent one may miss them)
        self._dirty = False  # memories changed since the last compaction: compact at close
        self._wrote = False  # anything written this session: settle the meta pages at close
        self.unsealed = False  # commits in the journal that no sealed state covers yet
        self.closed = False
        self.root: Meta | None = None  # the root's attributes, once changed
        self.created_ns = 0  # the vault's creation time: the root's times until then
        self._changed_times: set[bytes] = set()  # directories whose times are not stored yet
        self._root_changed = False
        self.staged: dict[bytes, Write] = {}
        """New empty files not stored yet: the next commit stores them (see stage)."""
        self.housekeeper = Housekeeper(
            self._flush_soon, self._compact_quietly, compact_delay, activity
        )

    # -- new records -------------------------------------------------------------

    def fresh_record(self) -> FreshRecord:
        """A new record's id (one no record has) and keys."""
        fresh = self.sealer.fresh_record()
        while fresh[0] in self.tree.by_id:  # pragma: no cover - 2^-128
            fresh = self.sealer.fresh_record()
        return fresh

    def new_record(self, meta: Meta, fresh: FreshRecord | None = None) -> Write:
        """A new record with an empty body: every record has one, so types look alike
        (the body is sealed when the record is stored, see _put_record)."""
        record_id, data_key, wrapped = self.fresh_record() if fresh is None else fresh
        return Write(Entry(record_id, meta, data_key), None, None, wrapped)

    def stage(self, fresh: FreshRecord, meta: Meta, caller: Caller) -> None:
        """Add a new empty file, created by ``caller``, to the tree now and store it
        with the next commit (the work a create leaves for after its reply, later.py).

        A file is almost always written right after it is created: its first
        write stores both in one commit (one sealed state, one journal entry).
        Until then it lives in memory only, so a daemon killed between the
        create and the first write or close loses an empty file, never data.
        """
        write = self.new_record(meta, fresh)
        write.caller = caller
        touched = self._touch_dirs([write], [])
        self.tree.add(write.entry)
        self._apply_times(touched)
        self.staged[write.entry.record_id] = write

    def store_staged(self) -> None:
        """Store the files staged so far (at their last close, fsync and lock)."""
        if self.staged:
            self.commit([])

    def file_write(
        self,
        norm: str,
        existing: Entry | None,
        data: bytes | bytearray,
        now: int,
        mtime: int,
        mode: int | None,
    ) -> Write:
        """The write storing ``data`` as a file: a new version of ``existing``, or a new record."""
        size = len(data)
        if existing is not None:
            meta = existing.meta.evolve(
                size=size,
                mtime_ns=mtime,
                ctime_ns=now,
                mode=existing.meta.mode if mode is None else mode,
                chunked=size > self.bodies.chunk_size,
                body_gen=existing.meta.gen + 1,
            )
            write = Write(
                Entry(existing.record_id, meta, existing.data_key), existing.meta.gen, None
            )
        else:
            file_mode = records.DEFAULT_FILE_MODE if mode is None else mode
            owner = (os.getuid(), os.getgid())
            chunked = size > self.bodies.chunk_size
            meta = Meta(norm, FILE, file_mode, size, mtime, now, 1, 1, *owner, chunked=chunked)
            write = self.new_record(meta)
        view = memoryview(data)
        step = self.bodies.chunk_size
        chunks = {i: view[i * step : (i + 1) * step] for i in range(self.bodies.count(size))}
        self._set_body(write, existing, chunks or {0: b""})
        return write

    def chunk_write(self, entry: Entry, chunks: dict[int, bytes | bytearray], size: int) -> Write:
        """A new version of a file: ``chunks`` replaced, ``size`` bytes (see Bodies.change)."""
        now = clock.now_ns()
        chunked = size > self.bodies.chunk_size
        gen = entry.meta.gen + 1
        meta = entry.meta.evolve(
            size=size, mtime_ns=now, ctime_ns=now, chunked=chunked, body_gen=gen
        )
        write = Write(Entry(entry.record_id, meta, entry.data_key), entry.meta.gen, None)
        self._set_body(write, entry, chunks)
        return write

    def put_small(self, entry: Entry, content: bytes | bytearray) -> Meta | None:
        """The mount's hot path: a small file's whole new content, committed alone.

        The same commit as chunk_write + commit (tests/vault/test_short_paths.py
        holds the two side by side) for the case almost every write() is: an
        inline file, before and after, stored or staged alone, while the
        journal takes the writes. It skips what that case cannot need (the
        batch's directory times, other staged files, shreds, moves, a stored
        snapshot to drop): a quarter of a write's time. What follows the
        journal entry (the integrity sum, the audit event, the timers) waits
        for the mount's reply (journal_ops). None: take the general path.
        """
        meta = entry.meta
        rid = entry.record_id
        staged = self.staged
        first = staged.get(rid)
        if (
            meta.chunked
            or meta.orphan
            or len(content) > self.bodies.chunk_size
            or len(staged) > (first is not None)
            or self.snapshot_stored
            or self.search_index_stored
            or not self.store.journaling
        ):
            return None
        now = clock.now_ns()
        gen = meta.gen + 1
        changes = {"size": len(content), "mtime_ns": now, "ctime_ns": now, "body_gen": gen}
        new = Entry(rid, meta.but(gen=gen, **changes), entry.data_key)
        record = self.sealer.pack_record(new, self.sealer.seal_body(new, content))
        ops = [Op(_RECORDS_DB, PUT, rid, record)]
        if first is not None:
            ops.append(Op(_KEYS_DB, PUT, rid, first.wrapped_key))
        else:  # new content: its derived data is stale
            ops.append(Op(_DERIVED_DB, DELETE, rid))
        replaced, caller = first is None, current_caller.get()

        def then() -> None:
            if replaced:
                self.acc.remove(rid, meta.gen)
            self.acc.add(rid, gen)
            self.audit.note(
                "write" if replaced else "create", caller, rid, meta.path, entry.data_key
            )
            self.housekeeper.committed(self.store.journal_bytes, owes_compaction=replaced)

        self.journal_ops(ops, owes_compaction=replaced, then=then)
        staged.pop(rid, None)
        self.tree.replace(new)
        return new.meta

    def _set_body(self, write: Write, old: Entry | None, chunks) -> None:
        if old is not None and old.record_id in self.staged:
            old = None  # empty, and nothing stored to keep
        with self.store.read() as txn:
            change = self.bodies.change(txn, old, write.entry, chunks)
        write.sealed_body = change.sealed_body
        write.chunk_puts = change.puts
        write.chunk_deletes = change.deletes

    @staticmethod
    def dir_meta(norm: str, now: int, mode: int | None = None) -> Meta:
        mode = records.DEFAULT_DIR_MODE if mode is None else mode
        return Meta(norm, DIRECTORY, mode, 0, now, now, 1, 1, os.getuid(), os.getgid())

    def parent_dirs(
        self, norm: str, now: int, planned: dict[str, Write] | None = None
    ) -> list[Write]:
        """Writes creating the missing ancestors of ``norm`` (mkdir -p).

        ``planned`` collects directories already created earlier in the same
        batch, so that a batch creates each directory once.
        """
        planned = {} if planned is None else planned
        writes = []
        for ancestor in paths.ancestors(norm):
            existing = self.tree.by_path.get(ancestor)
            if existing is None and ancestor not in planned:
                write = self.new_record(self.dir_meta(ancestor, now))
                planned[ancestor] = write
                writes.append(write)
            elif existing is not None and not existing.meta.is_dir:
                raise NotADirectory(ancestor)
        return writes

    # -- committing ----------------------------------------------------------------

    def write(
        self,
        fn: Callable,
        acc: Accumulator | None = None,
        *,
        owes_compaction: bool = False,
        bookkeeping: bool = False,
        seal_later: bool = False,
    ):
        """Run ``fn`` in one store write, with the sealed state that goes with it.

        A write carries the state (accumulator, the journal position it will
        have, whether a journal is on) and the audit trail's next entry, so
        what LMDB or the journal holds always says, authenticated, how far it
        goes. ``seal_later`` (a commit, while the journal takes the writes)
        leaves both to seal_state, which covers a burst of commits with one
        state: the journal's MAC authenticates the entries in between, and a
        replay accounts for those a killed daemon left after its last state
        (Store.attach_journal). ``bookkeeping`` writes (the state alone, the
        index snapshot) do not make a compaction worth it at close.
        """
        deferred = seal_later and self.store.journaling
        generation = self.generation + 1  # counted once the write is stored
        entry = None if deferred else self.audit.next_entry()  # since the last state, this too
        sealed = None if deferred else self.sealed_state(acc, generation, entry)

        def txn_fn(txn):
            result = fn(txn)
            if entry is not None:
                txn.put(seq_key(entry.seq), entry.sealed, db=AUDIT)
            if sealed is not None:
                txn.put(STATE_KEY, sealed, db=STATE)
            if owes_compaction:
                txn.put(COMPACTION_OWED_KEY, b"", db=STATE)
            return result

        result = self.store.write(txn_fn)
        if entry is not None:
            self.audit.stored(entry)
        if not deferred:
            self.generation = generation
        self._written(deferred, owes_compaction, bookkeeping)
        if fn is not _no_change:  # the state alone: a flush's own (store_pending), or at close
            self.housekeeper.committed(self.store.journal_bytes, owes_compaction=owes_compaction)
        return result

    def journal_ops(
        self, ops: list[Op], *, owes_compaction: bool, then: Callable[[], None]
    ) -> None:
        """write(..., seal_later=True) for a change given as its operations, which
        reads nothing first: straight into the journal, without a transaction
        (the mount's short paths; the journal must take the writes). The change
        is durable when this returns; ``then``, its bookkeeping in memory, and
        the journal's header are left for after the mount's reply (later.py).
        If the append fails, nothing is left for later."""
        if owes_compaction:
            ops.append(Op(_STATE_DB, PUT, COMPACTION_OWED_KEY, b""))
        self.store.append_ops(ops, header_later=True)
        self.lock.later += (self.store.write_due_header, then)
        self._written(True, owes_compaction, False)

    def _written(self, unsealed: bool, owes_compaction: bool, bookkeeping: bool) -> None:
        self.unsealed = unsealed
        self._wrote = True
        self._dirty = self._dirty or not bookkeeping
        if owes_compaction:
            self.compaction_owed = True
            self._owing += 1

    def seal_state(self) -> None:
        """Store the sealed state and the audit trail's events, if commits or noted
        reads are not covered yet (lock held)."""
        if self.unsealed or self.audit.pending:
            self.write(_no_change, bookkeeping=True)

    def seal_replayed(self, record_ids: Iterable[bytes]) -> None:
        """Cover with a state the changes a killed daemon journaled after its last one.

        They are authentic (the journal's MAC) and replayed; their audit
        events were still in the daemon's memory, so the trail says which
        memories changed then, not who changed them.
        """
        caller = current_caller.get()
        for record_id in record_ids:
            entry = self.tree.by_id.get(record_id)
            path, key = (entry.meta.path, entry.data_key) if entry else ("", None)
            self.audit.note(
                "replay", caller, record_id, path, key, detail="changed before the daemon stopped"
            )
        self.store.journal_writes(True)  # the state goes after them, then all into LMDB
        self.seal_state()
        self.store.journal_writes(False)

    def sealed_state(
        self,
        acc: Accumulator | None = None,
        generation: int | None = None,
        audit_entry: Pending | None = None,
    ) -> bytes:
        state = VaultState(self.acc if acc is None else acc, self.store.next_seq)
        state.journal_boot = self.journal_boot
        state.generation = self.generation if generation is None else generation
        if audit_entry is None:
            state.audit_seq, state.audit_link = self.audit.head_seq, self.audit.head_link
        else:
            state.audit_seq, state.audit_link = audit_entry.seq, audit_entry.link
        return self.sealer.seal(Kind.STATE, state.encode())

    def commit(
        self,
        writes: list[Write],
        shreds: Iterable[Entry] = (),
        *,
        store_root: bool = False,
        times_only: bool = False,
    ) -> None:
        """Apply writes and shreds in one durable transaction, then to the tree.

        Shreds and replaced records leave old ciphertext in LMDB's free pages
        (readable with keys that are still live, for a replaced record), so
        both make a compaction owed: recorded in the same transaction, done
        after a quiet moment, at close, or by the next writer.
        """
        shreds = list(shreds)
        shredding_only = not writes and bool(shreds)
        touched = self._touch_dirs(writes, shreds)
        staged = dict(self.staged)  # kept whole for a failed commit
        writes, stored_shreds = self._unstage(writes, shreds, everything=not shredding_only)
        times_only = times_only and not staged
        # An old version left in free pages is worth a compaction, unless only its times differ.
        owed = bool(stored_shreds) or (
            not times_only and any(w.old_gen is not None for w in writes)
        )
        acc = self.acc.copy()
        for w in writes:
            if w.old_gen is not None:
                acc.remove(w.entry.record_id, w.old_gen)
            acc.add(w.entry.record_id, w.entry.meta.gen)
        for s in stored_shreds:
            acc.remove(s.record_id, s.meta.gen)
        sealed_root = self.seal_root(self.root_meta()) if store_root else None
        stale_index = self.search_index_stored and not times_only  # directory times: not indexed
        noted = len(self.audit.pending)
        self._audit(writes, shreds)

        def txn_fn(txn) -> None:
            for w in writes:
                self._put_record(txn, w)
            for s in stored_shreds:
                for key in self.bodies.chunk_keys_of(s):
                    txn.delete(key, db=CHUNKS)
                for db in _SHREDDED:
                    txn.delete(s.record_id, db=db)
            if sealed_root is not None:
                txn.put(ROOT_KEY, sealed_root, db=STATE)
            if self.snapshot_stored:
                txn.delete(SNAPSHOT_KEY, db=STATE)
            if stale_index:  # it may hold a shredded or changed record's words
                txn.delete(SEARCH_INDEX_KEY, db=STATE)

        try:
            try:
                self.write(txn_fn, acc, owes_compaction=owed, seal_later=True)
            except DiskFull:
                if not shredding_only or not self.store.release_reserve():
                    raise
                # a shred frees space: the reserve
                self.write(txn_fn, acc, owes_compaction=owed, seal_later=True)
        except BaseException:
            self.staged = staged  # still to be stored
            self.audit.discard_since(noted)  # it did not happen
            raise
        for w in writes:  # stored now: a large body need not stay in memory
            w.sealed_body = None
            w.chunk_puts = {}
        self.snapshot_stored = False
        self.search_index_stored = self.search_index_stored and not stale_index
        self.acc = acc
        for s in shreds:
            self._forget(s)
        for w in writes:
            old = self.tree.by_id.get(w.entry.record_id)
            if old is not None:
                self.tree.remove(old)
        for w in sorted(writes, key=lambda w: w.entry.meta.path.count("/")):
            self.tree.add(w.entry)
        self._apply_times(touched)
        self.pending_shreds += len(shreds)

    def _audit(self, writes: list[Write], shreds: list[Entry]) -> None:
        """Note what a commit does, for whom, in the entry it will store (audit.py)."""
        note = self.audit.note
        for w in writes:
            if not w.audited:
                continue
            e, old = w.entry, self.tree.by_id.get(w.entry.record_id)
            old_path = ""
            if w.old_gen is None:
                op = "create"
            elif w.sealed_body is not None:
                op = "write"
            elif e.meta.orphan and old is not None and not old.meta.orphan:
                op = "unlink"  # still open somewhere: shredded at its last close
            elif old is not None and old.meta.path != e.meta.path:
                op, old_path = "rename", old.meta.path
            else:
                op = "attr"
            note(op, w.caller, e.record_id, e.meta.path, e.data_key, old_path=old_path)
        if shreds:
            caller = current_caller.get()
            for s in shreds:
                note("shred", caller, s.record_id, s.meta.path, s.data_key)

    def _unstage(
        self, writes: list[Write], shreds: list[Entry], *, everything: bool
    ) -> tuple[list[Write], list[Entry]]:
        """The writes and shreds to store, with the staged files folded in: a change
        to one becomes its first version, a shred of one touches nothing stored,
        and the others are stored too unless ``everything`` is False (a shred
        alone, which must work on a full disk, leaves them staged)."""
        if not self.staged:
            return writes, shreds
        for w in writes:
            first = self.staged.pop(w.entry.record_id, None)
            if first is not None:
                w.old_gen, w.wrapped_key = None, first.wrapped_key
        stored_shreds = [s for s in shreds if self.staged.pop(s.record_id, None) is None]
        if not everything:
            return writes, stored_shreds
        rest, self.staged = list(self.staged.values()), {}
        return [*rest, *writes], stored_shreds

    def _touch_dirs(self, writes: list[Write], shreds: list[Entry]) -> list[Entry | None]:
        """The directories whose entries ``writes`` and ``shreds`` create, remove or
        move (None: the root): their mtime and ctime become now (POSIX). Those
        written anyway get the new times in ``writes``; the others are returned,
        for times kept in memory after the commit and stored by store_pending."""
        touched: set[str] = set()
        passing: set[str] = set()  # paths moving or going: their own children do not count
        for w in writes:
            old = self.tree.by_id.get(w.entry.record_id)
            new_path = w.entry.meta.path
            if old is None:
                touched.add(paths.parent(new_path))
            elif old.meta.orphan:
                continue
            elif w.entry.meta.orphan:
                touched.add(paths.parent(old.meta.path))
            elif old.meta.path != new_path:
                touched.update((paths.parent(old.meta.path), paths.parent(new_path)))
                passing.update((old.meta.path, new_path))
        for s in shreds:
            if not s.meta.orphan:
                touched.add(paths.parent(s.meta.path))
                passing.add(s.meta.path)
        touched -= passing
        if not touched:
            return []
        now = clock.now_ns()
        by_path = {w.entry.meta.path: w for w in writes if not w.entry.meta.orphan}
        later: list[Entry | None] = []
        for path in touched:
            if path in by_path:
                w = by_path[path]
                w.entry.meta = w.entry.meta.but(mtime_ns=now, ctime_ns=now)
            elif path == paths.ROOT:
                later.append(None)
            elif (entry := self.tree.by_path.get(path)) is not None:
                later.append(entry)
        return later

    def _apply_times(self, entries: list[Entry | None]) -> None:
        """Set directory times in memory after a commit; store_pending stores them.

        Times come from a coarse clock (clock.py): a burst of changes in one
        directory finds its times already set to now, and changes nothing."""
        now = clock.now_ns()
        for entry in entries:
            if entry is None:
                root = self.root_meta()
                if root.mtime_ns != now or root.ctime_ns != now:
                    self.root = root.but(mtime_ns=now, ctime_ns=now)
                    self._root_changed = True
            elif self.tree.by_id.get(entry.record_id) is entry:
                meta = entry.meta
                if meta.mtime_ns != now or meta.ctime_ns != now:
                    entry.meta = meta.but(mtime_ns=now, ctime_ns=now)
                    self._changed_times.add(entry.record_id)

    def store_pending(self) -> None:
        """Store what waits in memory: the directory times changed since the last
        time (one commit), the files staged so far, then the sealed state and
        the audit trail's events over every commit since the last state.

        Called before every journal flush and by fsync of a directory: a
        directory's times reach the journal within a flush delay of the
        change, not with it, which saves a record write on every create,
        unlink and rename; the state and the trail's entry are sealed once
        per burst of commits, not with each.
        """
        with self.lock:
            if not self.closed:
                self._store_times()
                self.store_staged()
                self.seal_state()

    def _store_times(self) -> None:
        if self._changed_times or self._root_changed:
            ids, self._changed_times = self._changed_times, set()
            root, self._root_changed = self._root_changed, False
            writes = []
            for record_id in ids:
                entry = self.tree.by_id.get(record_id)
                if entry is not None:
                    meta = entry.meta.evolve()
                    write = Write(Entry(record_id, meta, entry.data_key), entry.meta.gen, None)
                    write.audited = False
                    writes.append(write)
            try:
                self.commit(writes, store_root=root, times_only=True)
            except BaseException:  # kept for the next try
                self._changed_times |= ids
                self._root_changed = self._root_changed or root
                raise

    def _flush_soon(self) -> None:
        """The housekeeping flush: directory times first, then the journal into LMDB
        (with at least the generation noted before it: never one ahead of the file)."""
        try:
            with self.lock:  # no commit between the state and its digest
                self.store_pending()
                durable = (self.generation, self.state_digest())
        finally:
            self.store.flush()
        self.on_flushed(*durable)

    def state_digest(self) -> bytes:
        """What the vault holds at this generation, in 16 bytes (rollback.py): the
        integrity sum over every record, the generation and the audit trail's head.
        Another copy changed elsewhere to the same generation differs here."""
        value, count = self.acc.state()
        head = struct.pack(">QQQ", count, self.generation, self.audit.head_seq)
        return hashlib.blake2b(value + head + self.audit.head_link, digest_size=16).digest()

    def root_meta(self) -> Meta:
        """The root directory's attributes (it has no record; they are under ROOT_KEY)."""
        if self.root is not None:
            return self.root
        created = self.created_ns
        return Meta("", DIRECTORY, 0o700, 0, created, created, 0, 0, os.getuid(), os.getgid())

    def seal_root(self, meta: Meta) -> bytes:
        return self.sealer.seal(Kind.META, meta.encode(), ROOT_ID, pad=True)

    def _put_record(self, txn, w: Write) -> None:
        """Store one record (keeping its stored body unless the write has a new one)."""
        rid = w.entry.record_id
        body = w.sealed_body
        if body is None and (w.entry.meta.type != FILE or w.old_gen is None):
            body = self.sealer.seal_body(w.entry, b"")  # empty: nothing to read back
        elif body is None:
            _, _, stored_body = records.unpack(txn.get(rid, db=RECORDS))
            body = bytes(stored_body)
        txn.put(rid, self.sealer.pack_record(w.entry, body), db=RECORDS)
        for key, chunk in w.chunk_puts.items():
            txn.put(key, chunk, db=CHUNKS)
        for key in w.chunk_deletes:
            txn.delete(key, db=CHUNKS)
        if w.wrapped_key is not None:
            txn.put(rid, w.wrapped_key, db=KEYS)
        elif w.sealed_body is not None:  # new content: its derived data is stale
            txn.delete(rid, db=DERIVED)

    # -- moves and shreds (paths already normalised) -------------------------------

    def rename(
        self,
        src: str,
        dst: str,
        replace_existing: bool,
        is_open: Callable[[bytes], bool] = lambda record_id: False,
    ) -> list[Event]:
        """Move ``src`` to ``dst``; a file replaced there is shredded, or orphaned
        if ``is_open`` says it is still open (shredded at its last close)."""
        entry = self.tree.at(src)
        if src == dst:
            return []
        if paths.is_within(dst, src):
            raise InvalidMove(src, dst, "a directory cannot move inside itself")
        now = clock.now_ns()
        shreds: list[Entry] = []
        target = self.tree.by_path.get(dst)
        if target is not None:
            if not replace_existing:
                raise AlreadyExists(dst)
            if entry.meta.is_dir and not target.meta.is_dir:
                raise NotADirectory(dst)
            if not entry.meta.is_dir and target.meta.is_dir:
                raise IsADirectory(dst)
            if target.meta.is_dir and self.tree.children(dst):
                raise DirectoryNotEmpty(dst)
        writes = self.parent_dirs(dst, now)
        target_open = target is not None and not target.meta.is_dir and is_open(target.record_id)
        if not writes and not target_open:
            events = self.move_small(entry, dst, target, now)
            if events is not None:
                return events
        gone = []
        if target_open:
            meta = target.meta.evolve(orphan=True, ctime_ns=now)
            writes.append(
                Write(Entry(target.record_id, meta, target.data_key), target.meta.gen, None)
            )
            gone.append(target)
        elif target is not None:
            shreds.append(target)
            gone.append(target)
        for e in [entry, *self.tree.subtree(src)]:
            meta = e.meta.evolve(path=dst + e.meta.path[len(src) :], ctime_ns=now)
            writes.append(Write(Entry(e.record_id, meta, e.data_key), e.meta.gen, None))
        self.commit(writes, shreds)
        return [("delete", e.record_id, e.meta.path, None) for e in gone] + _moves(writes)

    def move_small(
        self, entry: Entry, dst: str, target: Entry | None, now: int
    ) -> list[Event] | None:
        """The mount's rename of a file (an editor's atomic save): a stored file
        moved alone into an existing directory, over nothing or over a closed,
        stored, inline file (shredded).

        The same commit as rename's general path (tests/vault/test_short_paths.py
        holds the two side by side) for the case almost every rename is, while
        the journal takes the writes; it skips what that case cannot need
        (staged files, subtrees, new directories, a stored snapshot to drop, a
        transaction). None: take the general path.
        """
        meta = entry.meta
        if (
            meta.type != FILE
            or meta.orphan
            or (target is not None and (target.meta.type != FILE or target.meta.chunked))
            or self.staged
            or self.snapshot_stored
            or self.search_index_stored
            or not self.store.journaling
        ):
            return None
        rid = entry.record_id
        moved = Entry(rid, meta.evolve(path=dst, ctime_ns=now), entry.data_key)
        with self.store.read() as txn:
            _, _, stored_body = records.unpack(txn.get(rid, db=RECORDS))
            record = self.sealer.pack_record(moved, bytes(stored_body))
        ops = [Op(_RECORDS_DB, PUT, rid, record)]
        if target is not None:
            ops += [Op(db, DELETE, target.record_id) for db in _SHREDDED_DBS]
        caller = current_caller.get()

        def then() -> None:
            self.acc.remove(rid, meta.gen)
            self.acc.add(rid, moved.meta.gen)
            self.audit.note("rename", caller, rid, dst, entry.data_key, old_path=meta.path)
            if target is not None:
                self.acc.remove(target.record_id, target.meta.gen)
                self.audit.note("shred", caller, target.record_id, dst, target.data_key)
                self._forget(target)
                self.pending_shreds += 1
            self.tree.remove(entry)
            self.tree.add(moved)
            touched = {paths.parent(meta.path), paths.parent(dst)}
            self._apply_times([None if p == paths.ROOT else self.tree.by_path[p] for p in touched])
            self.housekeeper.committed(self.store.journal_bytes, owes_compaction=True)

        self.journal_ops(ops, owes_compaction=True, then=then)
        events: list[Event] = []
        if target is not None:
            events.append(("delete", target.record_id, dst, None))
        return [*events, ("move", rid, dst, None)]

    def exchange(self, first: str, second: str) -> list[Event]:
        if first == second:
            return []
        if paths.is_within(first, second) or paths.is_within(second, first):
            raise InvalidMove(first, second, "one contains the other")
        now = clock.now_ns()
        writes = []
        moves = [
            (s, d, [self.tree.at(s), *self.tree.subtree(s)])
            for s, d in ((first, second), (second, first))
        ]
        for src, dst, moving in moves:
            for e in moving:
                meta = e.meta.evolve(path=dst + e.meta.path[len(src) :], ctime_ns=now)
                writes.append(Write(Entry(e.record_id, meta, e.data_key), e.meta.gen, None))
        self.commit(writes)
        return _moves(writes)

    def orphan(self, entry: Entry) -> list[Event]:
        """Unlink a file that is still open: its name goes, its content stays (by id)."""
        meta = entry.meta.evolve(orphan=True, ctime_ns=clock.now_ns())
        self.commit([Write(Entry(entry.record_id, meta, entry.data_key), entry.meta.gen, None)])
        return [("delete", entry.record_id, entry.meta.path, None)]

    def delete(self, entry: Entry, *, recursive: bool) -> list[Event]:
        # An orphan's old path may name another entry by now: only directories have children.
        below = self.tree.subtree(entry.meta.path) if entry.meta.is_dir else []
        if below and not recursive:
            raise DirectoryNotEmpty(entry.meta.path)
        doomed = [entry, *below]
        if below or not self.shred_small(entry):
            self.commit([], doomed)
        return [("delete", e.record_id, e.meta.path, None) for e in doomed]

    def shred_small(self, entry: Entry) -> bool:
        """The mount's unlink: a stored, inline file shredded alone.

        The same commit as commit([], [entry]) (tests/vault/test_short_paths.py
        holds the two side by side) for the case almost every unlink is, while
        the journal takes the writes; it skips what that case cannot need
        (staged files, chunks, other shreds and writes, a stored snapshot to
        drop, a transaction). False: take the general path, which also frees
        the disk's reserve when the disk is full.
        """
        meta = entry.meta
        if (
            meta.type != FILE
            or meta.chunked
            or meta.orphan
            or self.staged
            or self.snapshot_stored
            or self.search_index_stored
            or not self.store.journaling
        ):
            return False
        rid = entry.record_id
        parent = paths.parent(meta.path)
        directory = self.tree.by_path.get(parent)
        touched = [None] if parent == paths.ROOT else [directory] if directory else []
        caller = current_caller.get()

        def then() -> None:
            self.acc.remove(rid, meta.gen)
            self.audit.note("shred", caller, rid, meta.path, entry.data_key)
            self._forget(entry)
            self._apply_times(touched)
            self.pending_shreds += 1
            self.housekeeper.committed(self.store.journal_bytes, owes_compaction=True)

        try:
            self.journal_ops(
                [Op(db, DELETE, rid) for db in _SHREDDED_DBS], owes_compaction=True, then=then
            )
        except DiskFull:
            return False
        return True

    def _forget(self, shredded: Entry) -> None:
        """A stored shred's entry gone from memory: the tree, the caches, its key."""
        self.tree.remove(shredded)
        self.bodies.forget(shredded.record_id)
        self.audit.forget(shredded.record_id)
        wipe(shredded.data_key)

    # -- the session -----------------------------------------------------------------

    def begin(self, *, journal: bool, previous: VaultState, damaged: bool) -> None:
        """Mark in the sealed state whether a journal is on, then finish owed work.

        The journal file exists (fsynced) before the state says a session is
        open, and the state says it is closed before the file goes: a journal
        is never missing while the state says one is open, except by damage.
        """
        store = self.store
        if journal:
            self.audit.note("unlock", current_caller.get())
            self.journal_boot = current_boot_id()
            store.open_journal_session(self.journal_boot)
            self.write(_no_change, bookkeeping=True)  # straight into LMDB: journal still off
            store.sync()
            store.journal_writes(True)
        else:
            if previous.session_open:  # a killed daemon's session: closed now
                self.write(_no_change, bookkeeping=True)
                store.sync()
            if not store.salvaged:  # on a salvage copy the journal waits for the rebuild
                store.close_journal()
        orphans = self.tree.orphans()
        if orphans and not damaged:  # files left open when a daemon was killed: shred them
            self.commit([], orphans)
        if self.compaction_owed and not damaged:
            try:
                self.compact()
            except DiskFull:
                log.warning("compaction owed by an earlier session waits: the disk is full")

    def finish(self) -> None:
        """Snapshot the index, close the journal, then compact if anything changed.

        The state that says no journal is open is written straight into
        LMDB, after everything journaled is there and before the journal
        file goes (see begin). Compacting whenever the session changed
        something leaves no old version in free pages and packs the B-tree's
        half-full pages (random ids split them): a locked vault is always as
        small as it can be.
        """
        if self.journal_boot != NO_BOOT:
            self.audit.note("lock", current_caller.get())
        orphans = self.tree.orphans()  # files still open at lock: their last close is now
        if orphans:
            self.commit([], orphans)
        try:
            self.store_staged()
        except DiskFull:  # the lock goes on: shreds and compaction matter more
            log.warning("%d new empty file(s) not stored: the disk is full", len(self.staged))
        with contextlib.suppress(DiskFull):  # directory times only
            self._store_times()
        with contextlib.suppress(DiskFull):  # the trail keeps its last entries; they wait
            self.prune_audit()
        if not self.snapshot_stored:
            with contextlib.suppress(DiskFull):  # only an unlock speed-up
                sealed = seal_snapshot(self.store, self.sealer, self.tree, self.acc)
                self.write(lambda txn: txn.put(SNAPSHOT_KEY, sealed, db=STATE), bookkeeping=True)
                self.snapshot_stored = True
        self.seal_state()
        self.store.flush()
        if self.journal_boot != NO_BOOT:
            self.store.journal_writes(False)
            self.journal_boot = NO_BOOT
            self.write(_no_change, bookkeeping=True)
        if self.compaction_owed or self._dirty:
            try:
                self.rebuild()
            except DiskFull:
                self.store.settle()
                self.store.sync()
                if self.compaction_owed:
                    raise CompactionPending(self.store.path, "the disk is full") from None
        elif self._wrote:
            self.store.settle()
        self.store.sync()
        self.store.close_journal()  # the state in the file says no session is open
        self.on_flushed(self.generation, self.state_digest())

    def backup(self, dest: Path) -> None:
        """A compacted copy of the vault as committed now into ``dest`` (vault lock
        held, so nothing commits meanwhile): it says no session is open, as if
        locked at this generation, and owes no compaction."""
        self._store_times()
        self.store_staged()
        self.seal_state()  # the backup's own event is in it
        boot, self.journal_boot = self.journal_boot, NO_BOOT
        try:
            sealed = self.sealed_state()
        finally:
            self.journal_boot = boot
        self.store.copy_to(
            dest,
            leave_out=frozenset({(STATE, COMPACTION_OWED_KEY)}),
            extra={(STATE, STATE_KEY): sealed},
        )

    # -- the audit trail's retention ------------------------------------------------------

    def audit_checkpoint(self) -> Checkpoint:
        """Where the kept trail begins (DecryptionError if the checkpoint was altered)."""
        with self.store.read() as txn:
            sealed = txn.get(AUDIT_CHECKPOINT_KEY, db=STATE)
            if sealed is None:
                return Checkpoint()
            return Checkpoint.decode(self.sealer.open(Kind.AUDIT, sealed, AUDIT_CHECKPOINT_KEY))

    def prune_audit(self, keep_days: int | None = None) -> int:
        """Drop the entries older than the retention (and any beyond MAX_ENTRIES),
        leaving a checkpoint from which verify still proves continuity; return how
        many went. ``keep_days`` becomes the retention from now on."""
        checkpoint = self.audit_checkpoint()
        keep = checkpoint.keep_days if keep_days is None else keep_days
        cutoff = time.time_ns() - keep * 86_400 * 10**9
        doomed: list[bytes] = []
        seq, link = checkpoint.seq, checkpoint.link
        with self.store.read() as txn:
            for key, sealed in txn.items(AUDIT):
                stored_seq = int.from_bytes(key, "big")
                if self.audit.head_seq - stored_seq < MAX_ENTRIES:
                    try:
                        doc = self.audit.open_entry(stored_seq, sealed)
                    except (DecryptionError, ValueError):
                        break  # never prune past a broken link: verify names it
                    if max((e["t"] for e in doc["events"]), default=0) >= cutoff:
                        break
                doomed.append(bytes(key))
                seq, link = stored_seq, self.audit.link(stored_seq, sealed)
        if not doomed and keep == checkpoint.keep_days:
            return 0
        new = Checkpoint(seq, link, checkpoint.pruned + len(doomed), keep)
        sealed_checkpoint = self.sealer.seal(Kind.AUDIT, new.encode(), AUDIT_CHECKPOINT_KEY)

        def txn_fn(txn) -> None:
            for key in doomed:
                txn.delete(key, db=AUDIT)
            txn.put(AUDIT_CHECKPOINT_KEY, sealed_checkpoint, db=STATE)

        self.write(txn_fn, bookkeeping=True, owes_compaction=bool(doomed))  # arms the compaction
        return len(doomed)

    # -- compaction --------------------------------------------------------------------

    def compact(self) -> tuple[int, int]:
        """Rewrite the vault file without free pages: shredded bytes are gone after this.

        Returns the file's size before and after. While the journal takes the
        writes (a mount), requests go on during the rewrite: the vault's lock
        is only taken to note what the compaction covered.
        """
        with self.lock:
            owing = self._owing
            if not self.store.journaling:
                return self.rebuild()
            self.seal_state()  # the flush moves only what a state covers
        sizes = self.store.rebuild(leave_out=frozenset({(STATE, COMPACTION_OWED_KEY)}))
        with self.lock:
            if self._owing == owing:  # nothing owed arrived during the rewrite
                self.pending_shreds = 0
                self.compaction_owed = False
        return sizes

    def rebuild(
        self,
        leave_out: Iterable[tuple[str, bytes]] = (),
        extra: dict[tuple[str, bytes], bytes] | None = None,
    ) -> tuple[int, int]:
        """Compact (and repair) under the vault's lock: nothing else changes meanwhile."""
        dropped = frozenset({(STATE, COMPACTION_OWED_KEY), *leave_out})
        sizes = self.store.rebuild(leave_out=dropped, extra=extra)
        self.pending_shreds = 0
        self.compaction_owed = False
        self._dirty = False
        return sizes

    def _compact_quietly(self) -> None:
        """The debounced compaction (a timer thread, without the vault's lock)."""
        if not self.closed and self.compaction_owed:
            self.compact()


def _no_change(txn) -> None:
    """A write that only carries the sealed state (see Writer.write)."""


def _moves(writes: list[Write]) -> list[Event]:
    """Files renamed with their content unchanged (their indexing may change with the name)."""
    return [
        ("move", w.entry.record_id, w.entry.meta.path, None)
        for w in writes
        if w.entry.meta.type == FILE and w.sealed_body is None
    ]
