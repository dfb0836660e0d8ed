"""The LMDB file under the vault: one writer process, map growth, the journal,
and the compacting rebuild. It stores opaque bytes; the Vault encrypts them.

One module, longer than the others, because these share one environment and
its three locks (below): the journal's flush and the rebuild both swap or
write the environment that every read goes through. The parts that stand
alone live beside it: lockfile.py, structure.py, salvage.py, journal.py, txn.py.

Why these choices:

* ``lock=False``: LMDB's own lock file only coordinates processes, and a
  vault allows exactly one writer process (lockfile.py). Within the process
  the store serialises access itself, which also lets compaction replace the
  data file without leaving a lock region that describes the old one.
* LMDB trusts its pages, so a file is checked by a forked child before it is
  mapped (structure.py), and read around its damage if that fails (salvage.py).
* Compaction is a logical rebuild (every live key and value written into a
  fresh environment), not ``mdb_env_copy2(MDB_CP_COMPACT)``: a compacting copy
  keeps live pages verbatim, and LMDB leaves bytes of deleted nodes in the
  free gap inside live pages. A rebuild only ever writes live bytes.

Concurrency. Three locks, always taken in this order, none held long by
requests: ``_housekeeping`` serialises the two slow jobs (moving the journal
into LMDB, rebuilding the file) with every direct LMDB write; ``_env_lock``
is held for each LMDB transaction (with ``lock=False`` a reader must not run
while a write commits) and to swap environments; ``_mu`` guards the journal,
its sequence numbers and the overlay. While the journal takes the writes
(the mount daemon), a rebuild copies LMDB without ``_env_lock`` (nothing
writes into LMDB meanwhile) and swaps in a short critical section; what was
journaled meanwhile stays in the journal and the overlay, and reaches the new
file with the next flush.
"""

from __future__ import annotations

import errno
import heapq
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import cffi
import lmdb

from ..errors import (
    DiskFull,
    JournalDamaged,
    MemvaultError,
    NotAVault,
    VaultCorrupted,
    VaultInUse,
    VaultTampered,
    VaultUnreadable,
)
from . import lockfile, salvage
from .journal import (
    NO_BOOT,
    PUT,
    Journal,
    Op,
    Ref,
    StaleRef,
    current_boot_id,
    journal_path,
    scan_unauthenticated,
)
from .schema import (
    ADDED_LATER,
    CHUNKS,
    COMPACTION_OWED_KEY,
    DB_NAMES,
    META,
    RECORDS,
    SETTLED_KEY,
    SLOTS,
    STATE,
    STATE_KEY,
)
from .structure import MAX_DBS, check_structure
from .txn import (
    DB_INDEX,
    Overlay,
    PendingTxn,
    ReadTxn,
    WriteTxn,
    apply_to_lmdb,
    apply_to_overlay,
    overlay_of,
)

T = TypeVar("T")
log = logging.getLogger("memvault")

MIN_MAP_SIZE = 64 << 20
RESERVE_BYTES = 256 << 10
"""Disk space kept aside so that a shred (which frees space) works on a full disk."""
ROOM_BYTES = 64 << 20
"""Free disk space below which a new file is stored at once, not with its first write."""
ROOM_RECHECK_S = 0.5
"""How long a disk found roomy is taken to stay so."""
FLUSH_PART_BYTES = 32 << 20
"""Journaled bytes moved into LMDB per transaction: an LMDB write transaction
keeps its dirty pages in memory until it commits, so a flush of a large
file's chunks goes in parts (each entry whole: a part never splits a commit)."""


def reserve_path(path: Path) -> Path:
    return path.with_name(path.name + "-reserve")


def compaction_owed(path: Path) -> bool:
    """Whether shredded or replaced bytes still wait in the file (no passphrase needed).

    Looks at the LMDB file and at what a killed daemon's journal would add;
    for `lock` and `status`, never for a decision about the data.
    """
    if any(
        op.db == DB_INDEX[STATE] and op.kind == PUT and op.key == COMPACTION_OWED_KEY
        for op in scan_unauthenticated(journal_path(path))
    ):
        return True
    try:
        check_structure(path, databases=(STATE,))  # LMDB trusts its pages: checked first
    except MemvaultError:
        return False
    try:
        env = lmdb.open(str(path), subdir=False, lock=False, readonly=True, max_dbs=MAX_DBS)
    except lmdb.Error:
        return False
    try:
        with env.begin() as txn:
            db = env.open_db(STATE.encode(), txn=txn, create=False)
            return txn.get(COMPACTION_OWED_KEY, db=db) is not None
    except lmdb.Error:
        return False
    finally:
        env.close()


class Store:
    """An open vault file: named databases of opaque keys and values."""

    def __init__(
        self,
        path: Path,
        *,
        readonly: bool = False,
        create: bool = False,
        map_size: int | None = None,
        check: bool = True,
        shared_lock: bool = True,
    ) -> None:
        """Open (or create) the file; writers lock it exclusively, readers shared.

        ``shared_lock=False`` is for ``status``, which only reads the header
        and keyslots: those pages are never rewritten by a writer.
        """
        self.path = path
        self.readonly = readonly
        self._lock_fd: int | None = None
        self._room_until = float("-inf")  # has_room() said yes; asked again after this
        self._journal: Journal | None = None
        self._journal_writes = False
        self._journal_key: bytearray | None = None
        self._env_path = path  # a salvage copy while the file's structure is damaged
        self.salvaged: int | bool = False
        """Set when working on a salvage copy (the number of unreadable nodes, or True)."""
        self._seq = 0
        self._pending: list[list[Op]] = []
        self._overlay: Overlay = {}
        self.replayed_tail = 0
        """Journal entries a killed writer left after its last sealed state."""
        self.replayed_unsealed: dict[bytes, bytes | None] = {}
        """The records those entries change, with their stored values from before."""
        self._housekeeping = threading.RLock()  # flush, rebuild, direct LMDB writes
        self._env_lock = threading.RLock()  # each LMDB transaction; swapping environments
        self._mu = threading.Lock()  # the journal, _seq, _pending, _overlay
        self.env: lmdb.Environment | None = None
        if not readonly or shared_lock:
            try:
                self._lock_fd = lockfile.acquire(path, exclusive=not readonly)
            except PermissionError as exc:
                raise VaultUnreadable(path, "permission denied") from exc
        if not readonly:  # a compaction killed half-way leaves its copy behind
            compacting = self._compacting_path()
            for stale in (compacting, lockfile.lock_path(compacting)):
                stale.unlink(missing_ok=True)
        try:
            if check and not create:
                self._check_or_salvage()
            size = path.stat().st_size if path.exists() else 0
            self._map_size = max(map_size or MIN_MAP_SIZE, _round_up(2 * size))
            self._open_env(create=create)
        except BaseException:
            self._release_lock()
            raise
        self._make_reserve()

    def _check_or_salvage(self) -> None:
        """Check the file's structure; restore a damaged meta page, or read around damage."""
        try:
            try:
                check_structure(self.path)
            except NotAVault:
                if not self._restore_meta_page():
                    raise
                check_structure(self.path)
        except VaultCorrupted as exc:
            self._salvage(exc)

    def _salvage(self, refused: VaultCorrupted) -> None:
        """Copy what can still be reached into ``<vault>.salvage`` and work on that copy.

        The copy holds the same ciphertext as the vault (nothing else) and is
        removed at close; the vault file itself is only replaced by a repair.
        """
        try:
            found, skipped = salvage.read_tolerantly(self.path, DB_NAMES)
        except (OSError, ValueError):
            raise refused from None
        if not found[META] or not found[SLOTS]:
            raise refused
        fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".salvage-")
        os.close(fd)
        copy = Path(name)
        size = sum(len(k) + len(v) for db in found.values() for k, v in db.items())
        env = lmdb.open(
            str(copy),
            subdir=False,
            lock=False,
            max_dbs=MAX_DBS,
            map_size=_round_up(4 * size + MIN_MAP_SIZE),
            meminit=True,
            mode=0o600,
        )
        try:
            with env.begin(write=True) as txn:
                for name in DB_NAMES:
                    db = env.open_db(name.encode(), txn=txn)
                    with txn.cursor(db) as cur:
                        cur.putmulti(sorted(found[name].items()), append=True)
        finally:
            env.close()
        self._env_path = copy  # opened next, then unlinked: no process ever sees another's
        self.salvaged = skipped or True
        log.warning("the storage structure of %s is damaged; reading around it", self.path)

    def _restore_meta_page(self) -> bool:
        """Rewrite a damaged LMDB meta page from the intact one; False if that is not the case.

        LMDB refuses a file when either of its two meta pages is unreadable,
        although one is enough: after every session both describe the same
        data (see settle()). Done under the exclusive lock, which a reader
        takes for the moment of the repair.
        """
        with open(self.path, "rb") as f:
            head = f.read(2 * 65536)
        psize = salvage.page_size(head)
        if psize is None:
            return False
        pages = [head[:psize], head[psize : 2 * psize]]
        good = [i for i, page in enumerate(pages) if salvage.meta_page_ok(page, i)]
        if len(good) != 1:
            return False
        if self._lock_fd is None:
            raise VaultCorrupted(
                self.path, "one of its two storage meta pages is damaged; unlocking it restores it"
            )
        if self.readonly and not lockfile.try_exclusive(self._lock_fd):
            raise VaultCorrupted(
                self.path,
                "one of its two storage meta pages is damaged and it is in use; "
                "close the other memvault processes and try again",
            )
        bad = 1 - good[0]
        page = bytearray(pages[good[0]])
        page[0:8] = bad.to_bytes(8, "little")  # the page number in the page header
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.pwrite(fd, bytes(page), bad * len(page))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise VaultUnreadable(
                self.path, f"its damaged meta page cannot be restored: {exc}"
            ) from None
        finally:
            if self.readonly:
                lockfile.downgrade(self._lock_fd)
        log.warning("restored a damaged storage meta page of %s from the intact one", self.path)
        return True

    # -- lifecycle ---------------------------------------------------------

    def _open_env(self, *, create: bool) -> None:
        try:
            self.env = lmdb.open(
                str(self._env_path),
                subdir=False,
                lock=False,
                readonly=self.readonly,
                create=create,
                max_dbs=MAX_DBS,
                map_size=self._map_size,
                readahead=True,  # a large file is read in runs of pages: let the kernel read ahead
                meminit=True,
                metasync=False,  # see sync()
                mode=0o600,
            )
        except lmdb.Error as exc:
            raise _from_lmdb_error(exc, self.path) from exc
        finally:
            if self._env_path != self.path:  # a salvage copy lives on as the open map only
                self._env_path.unlink(missing_ok=True)
                self._env_path = self.path
        try:
            self.dbs = {name: self._open_db(name) for name in DB_NAMES}
        except lmdb.NotFoundError as exc:
            self.env.close()
            raise NotAVault(self.path) from exc
        except lmdb.Error as exc:
            self.env.close()
            raise _from_lmdb_error(exc, self.path) from exc

    def _open_db(self, name: str):
        """A named database; None for one added later that a read-only vault lacks."""
        try:
            return self.env.open_db(name.encode(), create=not self.readonly)
        except lmdb.NotFoundError:
            if self.readonly and name in ADDED_LATER:
                return None
            raise

    def _make_reserve(self) -> None:
        """Set RESERVE_BYTES of disk aside (best effort: not on a disk already full)."""
        reserve = reserve_path(self.path)
        if self.readonly or reserve.exists():
            return
        try:
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:
            reserve.unlink(missing_ok=True)

    def has_room(self) -> bool:
        """Whether the disk holding the vault has ROOM_BYTES free (a statvfs, asked
        again ROOM_RECHECK_S after a yes: a burst of creates costs one)."""
        if time.monotonic() < self._room_until:
            return True
        try:
            disk = os.statvfs(self.path.parent)
        except OSError:
            return False
        room = disk.f_bavail * disk.f_frsize >= ROOM_BYTES
        if room:
            self._room_until = time.monotonic() + ROOM_RECHECK_S
        return room

    def release_reserve(self) -> bool:
        """Give the reserved space back to the disk; False if there was none."""
        reserve = reserve_path(self.path)
        if not reserve.exists():
            return False
        reserve.unlink()
        return True

    def close(self) -> None:
        """Close the file; the journal stays unless close_journal() removed it.

        Only the vault knows when the sealed state says no session is open,
        so only it may let the journal go (see Vault._finish_writes).
        Waits for a flush or rebuild running in another thread.
        """
        with self._housekeeping, self._env_lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            if self.env is not None:
                self.env.close()
                self.env = None
            self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- transactions ------------------------------------------------------

    def read(self) -> _Reading:
        """A read transaction (``with store.read() as txn``); it also sees journaled
        changes not yet in LMDB, and enters LMDB (under its lock) only for what
        the journal lacks."""
        return _Reading(self)

    def write(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in a write transaction and commit it.

        With the journal on, the changes ``fn`` makes are appended to the
        journal (one write(), no fsync) and seen by readers at once; flush()
        moves them into LMDB. Without it, they are committed to LMDB directly.
        ``fn`` must only touch the transaction: it may run again after the
        map has grown, and if the commit fails nothing of it took effect.
        """
        if self._journal is not None and self._journal_writes:
            return self._write_journal(fn)
        return self._write_lmdb(fn)

    def _write_journal(self, fn: Callable[[WriteTxn], T]) -> T:
        with _LazyLmdb(self) as open_lmdb:
            txn = PendingTxn(open_lmdb, self._overlay, self._resolve)
            result = fn(txn)
        self.append_ops(txn.ops)
        return result

    def append_ops(self, ops: list[Op], *, header_later: bool = False) -> None:
        """Journal a change given as its operations (one entry, no fsync), seen by
        readers at once: write() without a transaction, for a change that reads
        nothing first (the mount's short paths; the journal must take the writes).
        ``header_later``: see Journal.append; write_due_header follows."""
        with self._mu:
            seq = self._seq + 1
            try:
                kept = self._journal.append(seq, ops, header_later=header_later)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise DiskFull(self.path) from exc
                raise
            self._seq = seq
            self._pending.append(kept)
            apply_to_overlay(self._overlay, kept)

    def write_due_header(self) -> None:
        """The journal header an append_ops(header_later=True) left for later."""
        with self._mu:
            if self._journal is not None:
                self._journal.write_due_header()

    def _resolve(self, ref: Ref) -> bytes:
        """A large journaled value, read back from the journal file (page cache);
        StaleRef once the journal was emptied (LMDB holds the value then)."""
        with self._mu:
            if self._journal is None:
                raise StaleRef
            return self._journal.pread(ref)

    def _write_lmdb(self, fn: Callable[[WriteTxn], T]) -> T:
        with self._housekeeping, self._env_lock:
            while True:
                try:
                    with self.env.begin(write=True) as txn:
                        return fn(WriteTxn(txn, self.dbs, self._overlay, self._resolve))
                except lmdb.MapFullError:
                    self._grow()
                except lmdb.Error as exc:
                    raise _from_lmdb_error(exc, self.path) from exc

    # -- the journal ---------------------------------------------------------

    def attach_journal(
        self, key: bytearray, *, applied: int, session_boot: bytes, accept_loss: bool = False
    ) -> None:
        """Replay what a killed writer left in the journal.

        ``key`` (derived from the master key) authenticates journal entries;
        ``applied`` and ``session_boot`` come from the sealed state in LMDB:
        the last entry LMDB holds, and the boot in which a journaled session
        was left open (NO_BOOT if it was closed). Within that same boot
        nothing may be missing: a journal that is gone, shorter than its
        header says, or whose last entry fails its MAC is refused with
        JournalDamaged unless ``accept_loss``. After a restart, a torn tail
        is what a power cut leaves, and is dropped.
        """
        path = journal_path(self.path)
        self._seq = applied
        self._journal_key = key
        if not path.exists():
            if session_boot != NO_BOOT and not accept_loss:
                raise JournalDamaged(self.path, "is missing")
            return
        journal = Journal(path, key, readonly=self.readonly)
        found = journal.read()
        expected = applied + 1
        leftover = []
        for seq, ops in found.entries:
            if seq <= applied:
                continue
            if seq != expected:
                journal.close()
                raise VaultTampered(self.path, "its journal is missing entries")
            leftover.append(ops)
            expected += 1
        last = expected - 1
        sealed = _sealed_prefix(leftover)
        self.replayed_tail = len(leftover) - sealed
        self.replayed_unsealed = self._values_before(leftover[:sealed], leftover[sealed:])
        problem = None
        if found.boot_id is None and journal.size:
            problem = "has a damaged header"
        elif not found.clean_end:
            problem = "has a damaged or cut last entry"
        elif found.boot_id is not None and found.last_seq > last:
            problem = "was shortened"
        if problem is not None and session_boot == current_boot_id() and not accept_loss:
            journal.close()
            raise JournalDamaged(self.path, problem)
        if problem is not None:
            log.warning(
                "the journal %s; replaying the %d entries that verify", problem, len(leftover)
            )
        if not self.readonly:
            journal.cut(found.end)  # what follows the last entry that verifies is gone
        self._journal, self._seq = journal, last
        self._pending = leftover
        self._overlay = overlay_of(leftover)
        if not self.readonly:
            self.flush()  # what a state covers; the rest waits for the vault to seal it

    def _values_before(
        self, prefix: list[list[Op]], tail: list[list[Op]]
    ) -> dict[bytes, bytes | None]:
        """The record values ``tail`` changes, as they were after ``prefix``."""
        ids = dict.fromkeys(bytes(op.key) for ops in tail for op in ops if op.db == _RECORDS)
        if not ids:
            return {}
        with _LazyLmdb(self) as open_lmdb:
            txn = ReadTxn(open_lmdb, overlay_of(prefix))
            return {rid: None if (v := txn.get(rid, RECORDS)) is None else bytes(v) for rid in ids}

    def open_journal_session(self, boot_id: bytes) -> None:
        """Start an empty journal for this boot (durably); writes stay off until journal_writes."""
        if self._journal is None:
            self._journal = Journal(journal_path(self.path), self._journal_key)
        self._journal.start(boot_id, self._seq)

    @property
    def journaling(self) -> bool:
        """Writes go to the journal (the mount daemon), not straight into LMDB."""
        return self._journal is not None and self._journal_writes

    def journal_writes(self, on: bool) -> None:
        """Send writes to the journal (on) or straight into LMDB (off; flush first:
        a state must cover every journaled change by then, or the next state
        written into LMDB would claim changes LMDB does not have)."""
        if not on:
            self.flush()
            if self._pending:
                raise RuntimeError("journaled changes that no sealed state covers")
        self._journal_writes = on and self._journal is not None

    def close_journal(self) -> None:
        """Remove the journal once LMDB holds everything in it (and the state says so)."""
        if self._journal is not None and not self.readonly and not self._pending:
            with self._mu:  # make_durable may be taking a descriptor of it
                self._journal.close()
                self._journal = None
            journal_path(self.path).unlink(missing_ok=True)

    @property
    def next_seq(self) -> int:
        """The journal position LMDB will have once the next write is applied."""
        return self._seq + 1 if self._journal_writes else self._seq

    def flush(self) -> None:
        """Move journaled changes into LMDB (a commit per FLUSH_PART_BYTES, one
        fsync), then empty the journal.

        Only entries up to the last one that carries the sealed state move:
        LMDB never holds a change its state does not cover. Those after it
        stay in the journal until a state covers them (Writer.seal_state).

        Writes go on meanwhile (into the journal): they stay pending, and the
        journal is emptied only once nothing arrived during the flush (its
        entries up to LMDB's position are skipped by a replay anyway, and one
        applied twice after a failed flush leaves the same values).
        """
        with self._housekeeping:
            if self._journal is None or self.readonly or self.env is None:
                return
            with self._mu:
                batch = self._pending[: _sealed_prefix(self._pending)]
            if not batch:
                return
            parts = list(_parts(batch, FLUSH_PART_BYTES))  # bounded dirty pages in memory
            if len(parts) > 1:  # a part may end before the state that covers it: a power
                self._sync_journal()  # cut after it must find the rest in the journal
            for part in parts:
                self._write_lmdb(lambda txn, part=part: apply_to_lmdb(txn, part, self._resolve))
            self._sync_env()  # durable in LMDB before the journal lets go of it
            with self._mu:
                del self._pending[: len(batch)]
                self._overlay = overlay_of(self._pending)
                # a salvage copy is temporary: the journal waits for the rebuild
                emptied = not self._pending and not self.salvaged
                zeroed = emptied and self._journal.reset(self._seq)
            if zeroed:  # on disk now, not with the next fsync() of a file
                self._sync_journal()

    @property
    def journaled_entries(self) -> int:
        """Journal entries not in LMDB yet."""
        return len(self._pending)

    @property
    def journal_bytes(self) -> int:
        return self._journal.size if self._journal is not None else 0

    def sync(self) -> None:
        """Make every change so far durable in LMDB: flush the journal, fsync LMDB."""
        self.flush()
        self._sync_env()

    def _sync_journal(self, for_fsync: bool = False) -> bool:
        """fdatasync the journal, on a duplicate descriptor (writers go on meanwhile,
        and a close cannot reuse the number); False if there is none."""
        with self._mu:
            if self._journal is None:
                return False
            if for_fsync:
                self._journal.expect_fsyncs()
            fd = self._journal.duplicate_fd()
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        return True

    def make_durable(self) -> None:
        """What fsync() promises, as cheaply as it can be had: every change so far
        survives a power cut.

        With journal writes on, that is one fdatasync of the journal: its
        entries are replayed after a restart, and what a flush moved out of it
        was synced in LMDB before the journal let go of it. No LMDB commit, no
        page writes. Otherwise LMDB is synced.
        """
        if not (self.journaling and self._sync_journal(for_fsync=True)):
            self.sync()

    def _sync_env(self) -> None:
        """Make every commit so far durable.

        The environment runs with metasync=False: each commit fsyncs its data
        pages but leaves the meta page to the next commit's fsync (half the
        fsyncs, and LMDB stays consistent: a power cut can only undo the last
        commit). What must survive a power cut is synced here: on fsync(), at
        lock and when the vault closes. A killed process loses nothing either
        way: committed pages are in the kernel's page cache.
        """
        try:
            with self._housekeeping:  # the environment is swapped only under this lock
                self.env.sync(True)  # an fsync: readers go on meanwhile
        except lmdb.Error as exc:
            raise _from_lmdb_error(exc, self.path) from exc

    def settle(self) -> None:
        """Commit once more so both LMDB meta pages describe the same content.

        LMDB keeps the last two commits and opens the one with the higher
        transaction id; a damaged meta page can make it fall back to the older
        one. After this no-op commit that older one holds the same data, so
        such damage yields the right answer rather than a stale one.
        """
        self.flush()
        for _ in range(2):  # the second commit makes the other meta page current too
            self._write_lmdb(lambda txn: txn.put(SETTLED_KEY, b"", db=STATE))

    def _grow(self) -> None:
        self._map_size *= 2
        self.env.set_mapsize(self._map_size)

    # -- compaction --------------------------------------------------------

    def _compacting_path(self) -> Path:
        return self.path.with_name(self.path.name + ".compacting")

    def rebuild(
        self,
        *,
        leave_out: frozenset[tuple[str, bytes]] = frozenset(),
        extra: dict[tuple[str, bytes], bytes] | None = None,
    ) -> tuple[int, int]:
        """Rewrite the file with live data only (fsync, then atomic rename).

        ``leave_out`` names (database, key) pairs not to copy; ``extra`` adds
        or replaces values in the same rename (a repair is then all or
        nothing). The journal is flushed first, so it holds no shredded
        bytes afterwards either. While the journal takes the writes, readers
        and writers go on during the copy (see the module docstring).
        Returns the file's size before and after.
        """
        with self._housekeeping:
            if self.env is None:
                return (0, 0)
            self.flush()
            before = self.path.stat().st_size
            self._copy_now(self._compacting_path(), leave_out, extra or {})
            with self._env_lock:  # the short critical section: swap the files
                self.env.close()
                os.replace(self._compacting_path(), self.path)
                fsync_dir(self.path.parent)
                self._open_env(create=False)
            if self.salvaged:  # the vault file is whole again: now the journal may let go
                self.salvaged = False
                with self._mu:
                    if self._journal is not None and not self.readonly and not self._pending:
                        self._journal.reset(self._seq)
            self._make_reserve()
            return before, self.path.stat().st_size

    def copy_to(
        self,
        dest: Path,
        *,
        leave_out: frozenset[tuple[str, bytes]] = frozenset(),
        extra: dict[tuple[str, bytes], bytes] | None = None,
    ) -> None:
        """A compacted copy of the vault as it is now, journal included, into ``dest``
        (fsynced; a backup). The caller holds what keeps ``extra`` true meanwhile."""
        with self._housekeeping:
            self.flush()
            self._copy_now(dest, leave_out, extra or {})

    def _copy_now(
        self,
        tmp: Path,
        leave_out: frozenset[tuple[str, bytes]],
        extra: dict[tuple[str, bytes], bytes],
    ) -> None:
        if self._journal_writes:  # nothing writes into LMDB meanwhile
            self._build_copy(tmp, leave_out, extra)
        else:
            with self._env_lock:
                self._build_copy(tmp, leave_out, extra)

    def _build_copy(
        self,
        tmp: Path,
        leave_out: frozenset[tuple[str, bytes]],
        extra: dict[tuple[str, bytes], bytes],
    ) -> None:
        """Write every live value (and ``extra``) into ``tmp``, durably."""
        for stale in (tmp, lockfile.lock_path(tmp)):
            stale.unlink(missing_ok=True)
        while True:
            try:
                self._copy_into(tmp, leave_out, extra)
                fsync_file(tmp)
                return
            except lmdb.MapFullError:
                tmp.unlink(missing_ok=True)
                self._map_size *= 2  # the new file's map; the old one grows with it on reopen
            except lmdb.Error as exc:
                tmp.unlink(missing_ok=True)
                raise _from_lmdb_error(exc, self.path) from exc
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                if exc.errno == errno.ENOSPC:
                    raise DiskFull(self.path) from exc
                raise

    def _copy_into(
        self,
        tmp: Path,
        leave_out: frozenset[tuple[str, bytes]],
        extra: dict[tuple[str, bytes], bytes],
    ) -> None:
        new_env = lmdb.open(
            str(tmp),
            subdir=False,
            lock=False,
            max_dbs=MAX_DBS,
            map_size=self._map_size,
            meminit=True,
            mode=0o600,
        )
        try:
            with self.env.begin(buffers=True) as src, new_env.begin(write=True) as dst:
                for name in DB_NAMES:
                    new_db = new_env.open_db(name.encode(), txn=dst)
                    added = sorted((k, v) for (db, k), v in extra.items() if db == name)
                    skip = leave_out | {(name, k) for k, _ in added}
                    with src.cursor(self.dbs[name]) as cur, dst.cursor(new_db) as out:
                        kept = (
                            (bytes(k), v) for k, v in cur.iternext() if (name, bytes(k)) not in skip
                        )
                        if name == CHUNKS:  # where they lie in the file, not by key (_in_place)
                            out.putmulti([*_in_place(kept), *added])
                        else:
                            out.putmulti(heapq.merge(kept, added), append=True)
            for _ in range(2):  # both meta pages current: see settle()
                with new_env.begin(write=True) as dst:
                    dst.put(SETTLED_KEY, b"", db=new_env.open_db(STATE.encode(), txn=dst))
            new_env.sync(True)
        finally:
            new_env.close()


# -- helpers ---------------------------------------------------------------


class _LazyLmdb:
    """A context whose LMDB read transaction (and the environment's lock) is
    only taken if something asks for it; both are released at exit."""

    __slots__ = ("_store", "_txn")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._txn = None

    def open(self) -> tuple[lmdb.Transaction, dict]:
        store = self._store
        store._env_lock.acquire()
        try:
            self._txn = store.env.begin(write=False, buffers=True)
        except lmdb.Error as exc:
            store._env_lock.release()
            raise _from_lmdb_error(exc, store.path) from exc
        return self._txn, store.dbs

    def __enter__(self) -> Callable[[], tuple[lmdb.Transaction, dict]]:
        return self.open

    def __exit__(self, kind, exc, tb) -> None:
        if self._txn is not None:
            self._txn.abort()
            self._txn = None
            self._store._env_lock.release()
        if isinstance(exc, lmdb.Error):
            raise _from_lmdb_error(exc, self._store.path) from exc


class _Reading(_LazyLmdb):
    __slots__ = ()

    def __enter__(self) -> ReadTxn:
        return ReadTxn(self.open, self._store._overlay, self._store._resolve)


_RECORDS, _STATE = DB_INDEX[RECORDS], DB_INDEX[STATE]


def _sealed_prefix(entries: list[list[Op]]) -> int:
    """How many of ``entries`` end with the last one that stores the sealed state."""
    for i in range(len(entries) - 1, -1, -1):
        if any(op.db == _STATE and op.key == STATE_KEY and op.kind == PUT for op in entries[i]):
            return i + 1
    return 0


_ffi = cffi.FFI()


def _in_place(items: Iterable[tuple[bytes, memoryview]]) -> list[tuple[bytes, memoryview]]:
    """Values viewed in LMDB's map, in the order they lie in the file.

    A compaction copies a large file's chunks in this order, not in the order
    of their keys (keyed hashes, random): a file's chunks stay where its writes
    and the flushes put them, one after the other, and a cold read of the file
    reads the disk in long runs. Copied in key order, every page fault read
    ahead into other files' chunks: 100 MB read back took 250-350 ms against
    gocryptfs's 140-260, reading 2-3 times as much from disk (the more so, the
    more large files the vault held); in place, 140-200 ms and 1.0-1.5 times.
    """
    return sorted(items, key=lambda item: int(_ffi.cast("uintptr_t", _ffi.from_buffer(item[1]))))


def _round_up(n: int, unit: int = 1 << 20) -> int:
    return (n + unit - 1) // unit * unit


def _from_lmdb_error(exc: lmdb.Error, path: Path) -> MemvaultError:
    text = str(exc)
    if isinstance(exc, lmdb.InvalidError) or "not an LMDB" in text:
        return NotAVault(path)
    if "already open in this process" in text:
        return VaultInUse(path, f" (pid {os.getpid()}, this process)")
    if "No space left" in text or isinstance(exc, lmdb.DiskError) and "space" in text:
        return DiskFull(path)
    if "Input/output error" in text and _nearly_full(path.parent):
        return DiskFull(path)  # LMDB reports a short write on a full disk as EIO
    return VaultCorrupted(path, f"storage error: {text.split(':')[-1].strip()}")


def _nearly_full(directory: Path, margin: int = 1 << 20) -> bool:
    try:
        disk = os.statvfs(directory)
    except OSError:
        return False
    return disk.f_bavail * disk.f_frsize < margin


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parts(entries: list[list[Op]], limit: int) -> Iterator[list[list[Op]]]:
    """``entries`` in order, cut into runs of about ``limit`` bytes of values."""
    part: list[list[Op]] = []
    size = 0
    for ops in entries:
        part.append(ops)
        size += sum(op.value.length if isinstance(op.value, Ref) else len(op.value) for op in ops)
        if size >= limit:
            yield part
            part, size = [], 0
    if part:
        yield part
